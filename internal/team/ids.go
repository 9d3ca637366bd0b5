package team

import (
	"context"
	"fmt"
	"sync"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// requestIDs makes protocol request ids of the form <kind>-<agent>-<n>:
// unique within a team (n continues from the requests the journal already
// holds, so a restarted agent does not reuse one) and the same from one run
// of a script to the next, which record and replay rely on.
type requestIDs struct {
	mu     sync.Mutex
	n      int
	loaded bool
}

func (r *requestIDs) next(ctx context.Context, t store.Team, agent, kind string) string {
	r.mu.Lock()
	loaded := r.loaded
	r.mu.Unlock()
	if !loaded {
		// Read without the lock (it is never held across a store call);
		// of two first calls racing, one count is applied.
		sent := 0
		if evs, err := t.Journal().Read(context.WithoutCancel(ctx)); err == nil {
			for _, e := range evs {
				if e.Type != "send" {
					continue
				}
				if env, err := teamevent.Decode(e); err == nil {
					if s, ok := env.Event.(teamevent.Send); ok && s.From == agent && s.RequestID != "" {
						sent++
					}
				}
			}
		}
		r.mu.Lock()
		if !r.loaded {
			r.loaded = true
			r.n += sent
		}
		r.mu.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	return fmt.Sprintf("%s-%s-%d", kind, agent, r.n)
}
