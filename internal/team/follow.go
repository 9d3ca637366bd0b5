package team

import (
	"context"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
)

// journalReader is implemented by journals that can be read from an offset
// (the file store's).
type journalReader interface {
	ReadFrom(ctx context.Context, off int64) ([]store.Event, int64, error)
}

// follower passes the events other processes write to the team's journal
// (teammates in process mode) to the session's OnEvent, as they happen, so
// a timeline or a tally sees the whole team.
type follower struct {
	sv   *supervisor
	t    store.Team
	jr   journalReader
	off  int64
	stop context.CancelFunc
	done chan struct{}
}

// follow starts following t's journal if teammates run as processes and
// someone listens.
func (sv *supervisor) follow(t store.Team) {
	if sv.cfg.TeammateMode != ModeProcess || sv.cfg.OnEvent == nil {
		return
	}
	jr, ok := t.Journal().(journalReader)
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{sv: sv, t: t, jr: jr, stop: cancel, done: make(chan struct{})}
	sv.mu.Lock()
	sv.follower = f
	sv.mu.Unlock()
	go f.run(ctx)
}

func (f *follower) run(ctx context.Context) {
	defer close(f.done)
	board, err := f.t.Tasks().Watch(ctx)
	if err != nil {
		return
	}
	inbox, err := f.t.Mailbox().Watch(ctx, store.LeadName)
	if err != nil {
		return
	}
	// The journal has no watch of its own; board and lead-inbox changes
	// come with most events, and a short tick catches the rest (status
	// changes) for the display. No agent waits on this loop.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		f.flush(ctx)
		select {
		case <-ctx.Done():
			return
		case <-board:
		case <-inbox:
		case <-tick.C:
		}
	}
}

// flush emits the events written since the last flush by other processes.
func (f *follower) flush(ctx context.Context) {
	evs, next, err := f.jr.ReadFrom(context.WithoutCancel(ctx), f.off)
	if err != nil {
		return
	}
	f.off = next
	for _, e := range evs {
		if e.Agent != store.LeadName {
			f.sv.cfg.OnEvent(e)
		}
	}
}

// stopFollowing stops the follower after a last flush.
func (sv *supervisor) stopFollowing() {
	sv.mu.Lock()
	f := sv.follower
	sv.follower = nil
	sv.mu.Unlock()
	if f == nil {
		return
	}
	f.stop()
	<-f.done
	f.flush(context.Background())
}
