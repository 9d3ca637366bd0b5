package nats

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"

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

// TestAckDroppedByServer: an ack that reaches a consumer which has not yet
// delivered that far (rewound after a reconnect, or a leader just elected
// in a cluster) is dropped by the server with no answer. Ack sends it
// again until the consumer has delivered the message anew, and returns;
// waiting for the one answer instead held the reader until its caller's
// deadline (a cluster test's whole three minutes). The push starts again
// only once the ack has gone out twice: the first is dropped for certain.
func TestAckDroppedByServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, s, nm, r, _ := aliceHoldsOne(ctx, t)
	mb := store.Mailbox(nm)

	// The consumer goes back to its floor while this reader still holds
	// m1, and pushes nothing until the ack has been dropped. A pull
	// request the push left on the server would take m1 again at the
	// reset, and the first ack would be answered (once in a -count=2 run
	// of every package): wait until the push has unsubscribed and the
	// server holds no pull request of it.
	stopPush(ctx, t, r)
	cons, err := s.inbox.Consumer(ctx, nm.consumer("alice"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumWaiting == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d pull requests still wait after the push stopped", info.NumWaiting)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if _, err := s.inbox.ResetConsumer(ctx, nm.consumer("alice")); err != nil {
		t.Fatal(err)
	}
	watch, err := natsgo.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	acks, err := watch.SubscribeSync("$JS.ACK.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Flush(); err != nil {
		t.Fatal(err)
	}
	actx, acancel := context.WithTimeout(ctx, 30*time.Second)
	defer acancel()
	acked := make(chan error, 1)
	go func() { acked <- mb.Ack(actx, "alice", "m1") }()
	for i := range 2 {
		wctx, wcancel := context.WithTimeout(ctx, 3*requestTimeout)
		_, err := acks.NextMsgWithContext(wctx)
		wcancel()
		if err != nil {
			t.Fatalf("ack %d never sent (%v); Ack returned %v", i+1, err, pollErr(acked))
		}
	}
	if err := nm.consume(r, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := <-acked; err != nil {
		t.Fatalf("Ack of a message the consumer delivered again: %v", err)
	}
	cons, err = s.inbox.Consumer(ctx, nm.consumer("alice"))
	if err != nil {
		t.Fatal(err)
	}
	if info := cons.CachedInfo(); info.AckFloor.Stream == 0 || info.NumAckPending != 0 {
		t.Errorf("after the ack: floor %d, %d waiting for one", info.AckFloor.Stream, info.NumAckPending)
	}
}

// aliceHoldsOne is aliceReading with message m1 sent to alice and handed
// out to her reader, not yet acked.
func aliceHoldsOne(ctx context.Context, t *testing.T) (srv *server.Server, s *Store, nm *mailbox, r *reader, ended context.Context) {
	t.Helper()
	srv, s, nm, ended = aliceReading(ctx, t)
	if _, err := nm.Send(ctx, store.Message{ID: "m1", From: "human", To: "alice", Content: "one"}); err != nil {
		t.Fatal(err)
	}
	if got, err := nm.Receive(ctx, "alice"); err != nil || len(got) != 1 {
		t.Fatalf("Receive: %v %v", contents(got), err)
	}
	return srv, s, nm, nm.reader("alice"), ended
}

// stopPush stops r's push and waits until it has unsubscribed (Stop does
// it later, in the push's goroutine).
func stopPush(ctx context.Context, t *testing.T, r *reader) {
	t.Helper()
	r.cc.Stop()
	select {
	case <-r.cc.Closed():
	case <-ctx.Done():
		t.Fatal("the stopped push never closed")
	}
}

// pollErr is what ch holds, if anything yet.
func pollErr(ch chan error) any {
	select {
	case err := <-ch:
		return err
	default:
		return "nothing yet"
	}
}

// TestReackAfterLostAck: a hub killed -9 writes a consumer's state at most
// ten times a second, so it can come back with an inbox's ack floor behind
// an ack it answered. The reader, whose floor is past that message, skips
// it when it is pushed again, and must ack it again: otherwise it waits in
// the inbox for everyone who peeks, for ever (a lead judging whether its
// team is done waited on a member's "mail to read" the member had already
// taken, and hung). The lost state is made here by putting a fresh
// consumer of the same name and config in place of the reader's.
func TestReackAfterLostAck(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, s, nm, r, ended := aliceHoldsOne(ctx, t)
	mb := store.Mailbox(nm)
	if err := mb.Ack(ctx, "alice", "m1"); err != nil {
		t.Fatal(err)
	}

	// The server forgets the ack: the push stops, and the consumer is made
	// again from nothing.
	stopPush(ctx, t, r)
	cons, err := s.inbox.Consumer(ctx, nm.consumer("alice"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := cons.CachedInfo().Config
	if err := s.inbox.DeleteConsumer(ctx, cfg.Durable); err != nil {
		t.Fatal(err)
	}
	if _, err := s.inbox.CreateConsumer(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if waiting, err := mb.Peek(ctx, "alice"); err != nil || len(waiting) != 1 {
		t.Fatalf("the ack is not lost: Peek %v %v", contents(waiting), err)
	}
	select {
	case <-r.arrived: // drained: the next wake is the push below
	default:
	}
	if err := nm.consume(r, "alice"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.arrived:
	case <-ctx.Done():
		t.Fatal("m1 never pushed again")
	}
	// Received with an ended ctx, as the team's inboxes do.
	if got, _ := mb.Receive(ended, "alice"); len(got) != 0 {
		t.Fatalf("m1 handed out again: %v", contents(got))
	}
	if waiting, err := mb.Peek(ctx, "alice"); err != nil || len(waiting) != 0 {
		t.Errorf("after m1 was pushed again it still waits: Peek %v %v", contents(waiting), err)
	}
}
