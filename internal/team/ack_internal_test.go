package team

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
)

// ackTeam is a team whose mailbox fails its first acks with fail.
type ackTeam struct {
	store.Team
	mb *ackMailbox
}

func (t ackTeam) Mailbox() store.Mailbox { return t.mb }

type ackMailbox struct {
	store.Mailbox
	fails int
	fail  error
	calls int
}

func (m *ackMailbox) Ack(ctx context.Context, member, id string) error {
	m.calls++
	if m.calls <= m.fails {
		return m.fail
	}
	return nil
}

// TestAckRetried: an ack that fails while the store is unreachable is tried
// again until it lands (a lost ack leaves messages waiting that the member
// will never be woken for); one the store refuses for good is not.
func TestAckRetried(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	retry := func(mb *ackMailbox) { ackRetrying(ackTeam{mb: mb}, "alice", "m1", log, time.Millisecond, time.Second) }

	down := &ackMailbox{fails: 3, fail: fmt.Errorf("ack m1: %w", errors.New("nats: connection closed"))}
	retry(down)
	if down.calls != 4 {
		t.Errorf("store down for 3 acks: %d calls, want 4 (the last one lands)", down.calls)
	}

	for _, final := range []error{store.ErrNotReceived, store.ErrClosed, store.ErrUnknownMember, store.ErrTeamNotFound} {
		gone := &ackMailbox{fails: 100, fail: fmt.Errorf("ack m1: %w", final)}
		retry(gone)
		if gone.calls != 1 {
			t.Errorf("an ack refused for good (%v) was tried %d times, want 1", final, gone.calls)
		}
	}

	never := &ackMailbox{fails: 1 << 30, fail: errors.New("down for good")}
	retry(never)
	if never.calls < 2 {
		t.Errorf("a store down for good was tried %d times, want retries until the deadline", never.calls)
	}
}
