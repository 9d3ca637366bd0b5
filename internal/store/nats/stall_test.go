package nats

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/troupe-dev/troupe/internal/store"
)

// loseOnTheWire makes the server count the next message to member's inbox
// as delivered while it never reaches r: r's push is stopped, msg is sent,
// another client's fetch takes it and drops it, and r's push is started
// again. The server will not push msg again by itself (a day's ack wait),
// and with no reconnect nothing rewinds the consumer: the push is quiet
// while the stream holds a message past it, as the lead saw after a hub
// restart.
func loseOnTheWire(ctx context.Context, t *testing.T, url string, nm *mailbox, r *reader, member string, msg store.Message) {
	t.Helper()
	r.cc.Stop()
	if _, err := nm.Send(ctx, msg); err != nil {
		t.Fatal(err)
	}
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, inboxStream, nm.consumer(member))
	if err != nil {
		t.Fatal(err)
	}
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumPending == 0 && info.NumAckPending >= 1 {
			break // delivered as far as the server knows
		}
		if b, err := cons.Fetch(1, jetstream.FetchMaxWait(100*time.Millisecond)); err == nil {
			for range b.Messages() {
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("message never counted as delivered: %+v", info)
		}
	}
	if err := nm.consume(r, member); err != nil {
		t.Fatal(err)
	}
}

// aliceReading starts a server and a store with team t of member alice,
// whose inbox a first Receive (of an empty inbox, with ended, an ended ctx)
// has opened.
func aliceReading(ctx context.Context, t *testing.T) (srv *server.Server, s *Store, nm *mailbox, ended context.Context) {
	t.Helper()
	srv = startServer(t, "")
	s = openStore(t, srv.ClientURL())
	t.Cleanup(func() { s.Close() })
	tm, err := s.CreateTeam(ctx, store.Roster{Name: "t", Members: []store.Member{{Name: "alice"}}})
	if err != nil {
		t.Fatal(err)
	}
	nm = tm.Mailbox().(*mailbox)
	ended, stop := context.WithCancel(ctx)
	stop()
	if _, err := nm.Receive(ended, "alice"); err == nil {
		t.Fatal("Receive on an empty inbox with an ended ctx returned no error")
	}
	return srv, s, nm, ended
}

// TestStalledPushRestarts: a message stored in an inbox that the
// consumer's push never brings is handed out once all the same, both to a
// Receive that waits and, through the inbox's watch, to a reader that only
// looks when woken (the team's way). Without the repush the waiting
// Receive waits until its deadline and the watch is never woken.
func TestStalledPushRestarts(t *testing.T) {
	old := pushStall.Swap(int64(100 * time.Millisecond))
	defer pushStall.Store(old)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, _, nm, ended := aliceReading(ctx, t)
	mb := store.Mailbox(nm)
	r := nm.reader("alice")

	t.Run("waiting receive", func(t *testing.T) {
		loseOnTheWire(ctx, t, srv.ClientURL(), nm, r, "alice", store.Message{ID: "m1", From: "human", To: "alice", Content: "one"})
		wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
		defer wcancel()
		got, err := mb.Receive(wctx, "alice")
		if err != nil {
			t.Fatalf("Receive with a message stored and never pushed: %v", err)
		}
		if diff := cmp.Diff([]string{"one"}, contents(got)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if err := mb.Ack(ctx, "alice", "m1"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("woken reader", func(t *testing.T) {
		wctx, wcancel := context.WithCancel(ctx)
		defer wcancel()
		woken, err := mb.Watch(wctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		loseOnTheWire(ctx, t, srv.ClientURL(), nm, r, "alice", store.Message{ID: "m2", From: "human", To: "alice", Content: "two"})
		var got []store.Message
		deadline := time.After(20 * time.Second)
		for len(got) == 0 {
			select {
			case <-woken:
			case <-deadline:
				t.Fatal("the inbox's watch was not woken with the message, stored and never pushed, still unread")
			}
			ms, err := mb.Receive(ended, "alice")
			if err != nil && len(ms) == 0 && ctx.Err() != nil {
				t.Fatal(err)
			}
			got = append(got, ms...)
		}
		if diff := cmp.Diff([]string{"two"}, contents(got)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if err := mb.Ack(ctx, "alice", "m2"); err != nil {
			t.Fatal(err)
		}
		if again, _ := mb.Receive(ended, "alice"); len(again) != 0 {
			t.Errorf("handed out again: %v", contents(again))
		}
	})

	// A Receive that began with nothing to wait for, and then waits while
	// the push is quiet (a cluster node killed under the consumer's
	// leader): the message sent meanwhile is handed out all the same.
	// Without the core subscription it waited until its deadline, as the
	// reader of TestClusterNodeKilledMidRun once did for three minutes.
	t.Run("receive waiting when the push goes quiet", func(t *testing.T) {
		r.cc.Stop()
		select {
		case <-r.cc.Closed():
		case <-ctx.Done():
			t.Fatal("the stopped push never closed")
		}
		waiting := make(chan struct{}, 1)
		signal := func() {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
		receiveWaits.Store(&signal)
		defer receiveWaits.Store(nil)
		wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
		defer wcancel()
		type result struct {
			ms  []store.Message
			err error
		}
		done := make(chan result, 1)
		go func() {
			ms, err := mb.Receive(wctx, "alice")
			done <- result{ms, err}
		}()
		select {
		case <-waiting:
		case <-ctx.Done():
			t.Fatal("Receive never waited")
		}
		if _, err := mb.Send(ctx, store.Message{ID: "m3", From: "human", To: "alice", Content: "three"}); err != nil {
			t.Fatal(err)
		}
		got := <-done
		if got.err != nil {
			t.Fatalf("Receive waiting while the push was quiet: %v", got.err)
		}
		if diff := cmp.Diff([]string{"three"}, contents(got.ms)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if err := mb.Ack(ctx, "alice", "m3"); err != nil {
			t.Fatal(err)
		}
	})
}
