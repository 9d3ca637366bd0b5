package nats

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
	srv, s, nm, done := aliceReading(ctx, t)
	mb := store.Mailbox(nm)
	r := nm.reader("alice")

	loseOnTheWire(ctx, t, srv.ClientURL(), nm, r, "alice", store.Message{ID: "lost", From: "human", To: "alice", Content: "on the wire"})

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
	cons, err := s.inbox.Consumer(ctx, nm.consumer("alice"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 {
		t.Errorf("after the ack %d messages wait for one", info.NumAckPending)
	}
}
