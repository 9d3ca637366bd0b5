package team

import (
	"context"
	"fmt"
	"sync"

	"github.com/troupe-dev/troupe/internal/store"
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
	defer r.mu.Unlock()
	if !r.loaded {
		r.loaded = true
		if evs, err := t.Journal().Read(context.WithoutCancel(ctx)); err == nil {
			for _, e := range evs {
				if e.Type == "send" && e.Fields["from"] == agent && e.Fields["request_id"] != nil {
					r.n++
				}
			}
		}
	}
	r.n++
	return fmt.Sprintf("%s-%s-%d", kind, agent, r.n)
}
