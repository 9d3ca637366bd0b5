package team_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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
	appends *journalAppends
}

func (s countingStore) CreateTeam(ctx context.Context, r store.Roster) (store.Team, error) {
	t, err := s.Store.CreateTeam(ctx, r)
	return countingTeam{Team: t, updates: s.updates, appends: s.appends}, err
}

func (s countingStore) Team(ctx context.Context, name string) (store.Team, error) {
	t, err := s.Store.Team(ctx, name)
	return countingTeam{Team: t, updates: s.updates, appends: s.appends}, err
}

type countingTeam struct {
	store.Team
	updates *atomic.Int64
	appends *journalAppends
}

func (t countingTeam) Journal() store.Journal {
	if t.appends == nil {
		return t.Team.Journal()
	}
	return countingJournal{JournalBatch: t.Team.Journal().(store.JournalBatch), appends: t.appends}
}

// journalAppends are the event types of w1's journal appends, one entry
// per append.
type journalAppends struct {
	mu  sync.Mutex
	all [][]string
}

type countingJournal struct {
	store.JournalBatch
	appends *journalAppends
}

func (j countingJournal) note(es []store.Event) {
	var types []string
	for _, e := range es {
		if e.Agent == "w1" {
			types = append(types, e.Type+":"+fmt.Sprint(e.Fields["why"]))
		}
	}
	if len(types) > 0 {
		j.appends.mu.Lock()
		j.appends.all = append(j.appends.all, types)
		j.appends.mu.Unlock()
	}
}

func (j countingJournal) Append(ctx context.Context, e store.Event) error {
	j.note([]store.Event{e})
	return j.JournalBatch.Append(ctx, e)
}

func (j countingJournal) AppendAll(ctx context.Context, es []store.Event) error {
	j.note(es)
	return j.JournalBatch.AppendAll(ctx, es)
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
// fresh heartbeat, is not written again for it. An idle claim journals its
// notice to the lead, the claim and the wake's status in one append.
func TestWakeBetweenTasksWritesNoRoster(t *testing.T) {
	t.Parallel()
	const tasks = 6
	var updates atomic.Int64
	appends := &journalAppends{}
	f := start(t, fakeapi.BoardScript("Run the board", "board", 1, tasks), func(c *team.Config) {
		c.Store = countingStore{Store: c.Store, updates: &updates, appends: appends}
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
	claims := 0
	appends.mu.Lock()
	for _, a := range appends.all {
		if !slices.ContainsFunc(a, func(s string) bool { return strings.HasPrefix(s, "claim:") }) {
			continue
		}
		claims++
		want := []string{"send:<nil>", "claim:<nil>", "status:claimed task #"}
		if len(a) != 3 || a[0] != want[0] || a[1] != want[1] || !strings.HasPrefix(a[2], want[2]) {
			t.Errorf("a claim's journal append holds %q, want the notice, the claim and the wake's status", a)
		}
	}
	appends.mu.Unlock()
	if claims != tasks {
		t.Errorf("%d appends with a claim of w1, want %d", claims, tasks)
	}
	// The first wake of the life still wrote its heartbeat, so the file
	// store made w1's heartbeat file then: left to the heartbeat loop, the
	// files of every member were made at once later, a burst of CPU in an
	// idle team (bench team's idle window).
	if _, err := os.Stat(filepath.Join(f.state, "teams", "board", "beats", "w1")); err != nil {
		t.Errorf("w1's heartbeat file after its wakes: %v", err)
	}
	// Its first word, going idle at the end, and shutting down: a few, not
	// one per wake.
	if n := updates.Load(); n == 0 || n >= int64(wakes) {
		t.Errorf("w1's roster entry was updated %d times for %d working wakes, want a few", n, wakes)
	}
}
