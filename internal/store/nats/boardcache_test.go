package nats

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
)

// TestLaggingCopyNeverHidesAHandBack: a claim that loses is answered from
// the Store's copy of the board, so a copy that lags must never make a
// task handed back look owned to the claim its wake starts. While the copy
// of client B is held back, a task A hands back wakes B's board watch only
// once the copy gave up waiting (then dropped, so the claim goes to the
// server) or caught up; either way B's claim after the wake wins. Without
// the wait, B's claim is refused from the copy (owner alice) and, with no
// further wake, B never takes the task.
func TestLaggingCopyNeverHidesAHandBack(t *testing.T) {
	for _, tc := range []struct {
		name    string
		release bool // the copy is let go on before the catch-up bound
	}{{"copy dropped", false}, {"copy caught up", true}} {
		t.Run(tc.name, func(t *testing.T) {
			oldCatch := cacheCatchUp.Swap(int64(300 * time.Millisecond))
			defer func() { cacheCatchUp.Store(oldCatch); testHookCacheUpdate.Store(nil) }()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			srv := startServer(t, "")
			a, b := openStore(t, srv.ClientURL()), openStore(t, srv.ClientURL())
			defer a.Close()
			defer b.Close()
			ta, err := a.CreateTeam(ctx, store.Roster{Name: "t", Members: []store.Member{{Name: "alice"}, {Name: "bob"}}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ta.Tasks().Create(ctx, store.Task{Subject: "one"}); err != nil {
				t.Fatal(err)
			}
			if _, err := ta.Tasks().Claim(ctx, "1", "alice"); err != nil {
				t.Fatal(err)
			}
			tb, err := b.Team(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			// B's copy is loaded and says alice owns task 1: B's claim is
			// refused from it.
			nb := tb.Tasks().(*board)
			for nb.t.s.boardCache(nb.t.gen) == nil {
				if ctx.Err() != nil {
					t.Fatal("B's copy of the board never loaded")
				}
				time.Sleep(5 * time.Millisecond) // a condition polled, not a wait for a result
			}
			if _, err := tb.Tasks().Claim(ctx, "1", "bob"); !lostClaim(err) {
				t.Fatalf("B's claim of alice's task = %v, want it refused", err)
			}
			wctx, wcancel := context.WithCancel(ctx)
			defer wcancel()
			woken, err := tb.Tasks().Watch(wctx)
			if err != nil {
				t.Fatal(err)
			}
			// From now on B's copy applies nothing until held is closed.
			held := make(chan struct{})
			var holding atomic.Bool
			hold := func(ctx context.Context) {
				holding.Store(true)
				select {
				case <-held:
				case <-ctx.Done():
				}
			}
			testHookCacheUpdate.Store(&hold)
			if _, err := ta.Tasks().Update(ctx, "1", func(tk *store.Task) error {
				tk.Owner, tk.Status = "", store.TaskPending
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if tc.release {
				// Let the copy go on once it is held on the hand-back.
				for !holding.Load() {
					time.Sleep(time.Millisecond) // a condition polled, not a wait for a result
				}
				close(held)
			}
			select {
			case <-woken:
			case <-ctx.Done():
				t.Fatal("B's board watch never woke on the hand-back")
			}
			got, err := tb.Tasks().Claim(ctx, "1", "bob")
			if err != nil {
				t.Fatalf("B's claim after the wake of the hand-back: %v", err)
			}
			if got.Owner != "bob" {
				t.Errorf("owner %q, want bob", got.Owner)
			}
			if !tc.release {
				close(held)
			}
		})
	}
}
