package nats

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/troupe-dev/troupe/internal/store"
)

// TestReconnectRewindsInbox: a message the server counted as delivered to
// a reader but that never reached it (on the wire when a hub was killed)
// is handed out after the reader's connection comes back, once. Without
// the rewind the server never pushes it again (a day's ack wait), and a
// lead whose last idle notification was lost so waited forever.
func TestReconnectRewindsInbox(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := StartServer(ServerConfig{Port: -1, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	s := openStore(t, srv.ClientURL())
	defer s.Close()
	tm, err := s.CreateTeam(ctx, store.Roster{Name: "t", Members: []store.Member{{Name: "alice"}}})
	if err != nil {
		t.Fatal(err)
	}
	mb := tm.Mailbox()
	done, stop := context.WithCancel(ctx)
	stop()
	if _, err := mb.Receive(done, "alice"); err == nil {
		t.Fatal("Receive on an empty inbox with an ended ctx returned no error")
	}
	nm := mb.(*mailbox)
	r := nm.reader("alice")

	// The reader stops pulling, and what the server pushes next goes
	// nowhere: to the stopped pull, or to a fetch that drops it.
	r.cc.Stop()
	if _, err := mb.Send(ctx, store.Message{ID: "lost", From: "human", To: "alice", Content: "on the wire"}); err != nil {
		t.Fatal(err)
	}
	nc, err := natsgo.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, inboxStream, nm.consumer("alice"))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second)); err == nil {
		for range b.Messages() {
		}
	}
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumPending == 0 && info.NumAckPending == 1 {
			break // delivered as far as the server knows, and never again
		}
		if ctx.Err() != nil {
			t.Fatalf("message never counted as delivered: %+v", info)
		}
		time.Sleep(10 * time.Millisecond) // a condition polled, not a wait for a result
	}
	if err := nm.consume(r, "alice"); err != nil {
		t.Fatal(err)
	}

	// The connection breaks and comes back: the reader rewinds.
	if err := s.Conn().ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	got, err := mb.Receive(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"on the wire"}, contents(got)); diff != "" {
		t.Errorf("after the reconnect (-want +got):\n%s", diff)
	}
	if err := mb.Ack(ctx, "alice", "lost"); err != nil {
		t.Fatal(err)
	}
	if again, err := mb.Receive(done, "alice"); len(again) != 0 {
		t.Errorf("handed out again: %v (%v)", contents(again), err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 {
		t.Errorf("after the ack %d messages wait for one", info.NumAckPending)
	}
}
