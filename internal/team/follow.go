package team

import (
	"context"

	"github.com/troupe-dev/troupe/internal/store"
)

// follower passes the events other processes write to the team's journal
// (teammates in process mode) to the session's OnEvent, as they happen, so
// a timeline or a tally sees the whole team.
type follower struct {
	sv   *supervisor
	t    store.Team
	off  store.Cursor
	stop context.CancelFunc
	done chan struct{}
	// remoteOnly: the session's teammates run in its process, and only
	// those on other machines (remote placement) are followed.
	remoteOnly bool
}

// follow starts following t's journal if teammates run as processes and
// someone listens.
func (sv *supervisor) follow(t store.Team) {
	if sv.cfg.TeammateMode != ModeProcess || sv.cfg.OnEvent == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{sv: sv, t: t, stop: cancel, done: make(chan struct{})}
	sv.mu.Lock()
	sv.follower = f
	sv.mu.Unlock()
	go f.run(ctx)
}

func (f *follower) run(ctx context.Context) {
	defer close(f.done)
	appended, err := f.t.Journal().Watch(ctx)
	if err != nil {
		return
	}
	for {
		f.flush(ctx)
		select {
		case <-ctx.Done():
			return
		case _, ok := <-appended:
			if !ok {
				return
			}
		}
	}
}

// flush emits the events written since the last flush by other processes.
func (f *follower) flush(ctx context.Context) {
	evs, next, err := f.t.Journal().ReadAfter(context.WithoutCancel(ctx), f.off)
	if err != nil {
		return
	}
	f.off = next
	var remote map[string]bool
	if f.remoteOnly && len(evs) > 0 {
		remote = remoteMembers(context.WithoutCancel(ctx), f.t)
	}
	for _, e := range evs {
		if e.Agent != store.LeadName && (!f.remoteOnly || remote[e.Agent]) {
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
