package team_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
)

// countingStore counts the roster updates of its teams.
type countingStore struct {
	store.Store
	updates *atomic.Int64
}

func (s countingStore) CreateTeam(ctx context.Context, r store.Roster) (store.Team, error) {
	t, err := s.Store.CreateTeam(ctx, r)
	return countingTeam{Team: t, updates: s.updates}, err
}

func (s countingStore) Team(ctx context.Context, name string) (store.Team, error) {
	t, err := s.Store.Team(ctx, name)
	return countingTeam{Team: t, updates: s.updates}, err
}

type countingTeam struct {
	store.Team
	updates *atomic.Int64
}

func (t countingTeam) UpdateMember(ctx context.Context, name string, fn func(*store.Member) error) (store.Member, bool, error) {
	if name == "w1" {
		t.updates.Add(1)
	}
	return t.Team.UpdateMember(ctx, name, fn)
}

// TestWakeBetweenTasksWritesNoRoster: a teammate that goes from one task
// to the next wakes "working" each time; the journal tells each wake, but
// the roster, which already says working with this process's pid and a
// fresh heartbeat, is not written again for it.
func TestWakeBetweenTasksWritesNoRoster(t *testing.T) {
	t.Parallel()
	const tasks = 6
	var updates atomic.Int64
	f := start(t, fakeapi.BoardScript("Run the board", "board", 1, tasks), func(c *team.Config) {
		c.Store = countingStore{Store: c.Store, updates: &updates}
	})
	f.run("Run the board")

	wakes := 0
	for _, e := range f.journal() {
		if e.Type == "status" && e.Agent == "w1" && e.Fields["status"] == store.StatusWorking {
			wakes++
		}
	}
	if wakes < tasks {
		t.Fatalf("the journal has %d working wakes of w1, want one per task (%d) at least", wakes, tasks)
	}
	// Its first word, going idle at the end, and shutting down: a few, not
	// one per wake.
	if n := updates.Load(); n == 0 || n >= int64(wakes) {
		t.Errorf("w1's roster entry was updated %d times for %d working wakes, want a few", n, wakes)
	}
}
