package team_test

import (
	"context"
	"encoding/json"
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
	lines   *transcriptOps
}

func (s countingStore) CreateTeam(ctx context.Context, r store.Roster) (store.Team, error) {
	t, err := s.Store.CreateTeam(ctx, r)
	return countingTeam{Team: t, updates: s.updates, appends: s.appends, lines: s.lines}, err
}

func (s countingStore) Team(ctx context.Context, name string) (store.Team, error) {
	t, err := s.Store.Team(ctx, name)
	return countingTeam{Team: t, updates: s.updates, appends: s.appends, lines: s.lines}, err
}

type countingTeam struct {
	store.Team
	updates *atomic.Int64
	appends *journalAppends
	lines   *transcriptOps
}

func (t countingTeam) Transcripts() store.Transcripts {
	if t.lines == nil {
		return t.Team.Transcripts()
	}
	return countingTranscripts{TranscriptsDeferred: t.Team.Transcripts().(store.TranscriptsDeferred), ops: t.lines}
}

// transcriptOps are w1's transcript writes in order ("durable <role>",
// "deferred <role>" or "sync"), and its roster updates ("status <status>").
type transcriptOps struct {
	mu  sync.Mutex
	all []string
}

func (o *transcriptOps) add(member, op string, line json.RawMessage) {
	if member != "w1" {
		return
	}
	if line != nil {
		var l struct{ Role string }
		_ = json.Unmarshal(line, &l)
		op += " " + l.Role
	}
	o.mu.Lock()
	o.all = append(o.all, op)
	o.mu.Unlock()
}

type countingTranscripts struct {
	store.TranscriptsDeferred
	ops *transcriptOps
}

func (c countingTranscripts) Append(ctx context.Context, member string, line json.RawMessage) error {
	c.ops.add(member, "durable", line)
	return c.TranscriptsDeferred.Append(ctx, member, line)
}

func (c countingTranscripts) AppendDeferred(ctx context.Context, member string, line json.RawMessage) error {
	c.ops.add(member, "deferred", line)
	return c.TranscriptsDeferred.AppendDeferred(ctx, member, line)
}

func (c countingTranscripts) Sync(ctx context.Context, member string) error {
	c.ops.add(member, "sync", nil)
	return c.TranscriptsDeferred.Sync(ctx, member)
}

func (t countingTeam) Journal() store.Journal {
	if t.appends == nil {
		return t.Team.Journal()
	}
	return countingJournal{JournalDeferred: t.Team.Journal().(store.JournalDeferred), appends: t.appends}
}

// journalAppends are the event types of w1's journal appends, one entry
// per append, and whether each was deferred.
type journalAppends struct {
	mu       sync.Mutex
	all      [][]string
	deferred []bool
}

type countingJournal struct {
	store.JournalDeferred
	appends *journalAppends
}

func (j countingJournal) note(es []store.Event, deferred bool) {
	var types []string
	for _, e := range es {
		if e.Agent == "w1" {
			types = append(types, e.Type+":"+fmt.Sprint(e.Fields["why"]))
		}
	}
	if len(types) > 0 {
		j.appends.mu.Lock()
		j.appends.all = append(j.appends.all, types)
		j.appends.deferred = append(j.appends.deferred, deferred)
		j.appends.mu.Unlock()
	}
}

func (j countingJournal) Append(ctx context.Context, e store.Event) error {
	j.note([]store.Event{e}, false)
	return j.JournalDeferred.Append(ctx, e)
}

func (j countingJournal) AppendAll(ctx context.Context, es []store.Event) error {
	j.note(es, false)
	return j.JournalDeferred.AppendAll(ctx, es)
}

func (j countingJournal) AppendDeferred(ctx context.Context, es []store.Event) error {
	j.note(es, true)
	return j.JournalDeferred.AppendDeferred(ctx, es)
}

func (t countingTeam) UpdateMember(ctx context.Context, name string, fn func(*store.Member) error) (store.Member, bool, error) {
	if name == "w1" {
		t.updates.Add(1)
	}
	m, changed, err := t.Team.UpdateMember(ctx, name, fn)
	if t.lines != nil && err == nil {
		t.lines.add(name, "status "+m.Status, nil)
	}
	return m, changed, err
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
	for i, a := range appends.all {
		// The observations of what the board and the lead's inbox hold
		// (claims, completions, model calls) go without waiting for their
		// fsync; a status of the member's own is durable.
		observation := slices.ContainsFunc(a, func(s string) bool {
			return strings.HasPrefix(s, "claim:") || strings.HasPrefix(s, "complete:") || strings.HasPrefix(s, "usage:")
		})
		if observation != appends.deferred[i] {
			t.Errorf("w1's journal append %q deferred %v, want %v", a, appends.deferred[i], observation)
		}
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

// TestEndOfTurnDurableBeforeIdle: a teammate's reply that ends its turn
// is written without an fsync of its own. Going from one task to the next,
// nothing syncs it: the first call of the next task's turn is the
// transcript's next durable line. Once nothing is left to claim, the
// transcript is made durable before the member says it is idle.
func TestEndOfTurnDurableBeforeIdle(t *testing.T) {
	t.Parallel()
	const tasks = 4
	var updates atomic.Int64
	ops := &transcriptOps{}
	f := start(t, fakeapi.BoardScript("Run the board", "board", 1, tasks), func(c *team.Config) {
		c.Store = countingStore{Store: c.Store, updates: &updates, lines: ops}
	})
	f.run("Run the board")

	ops.mu.Lock()
	all := slices.Clone(ops.all)
	ops.mu.Unlock()
	count := func(op string) int {
		n := 0
		for _, o := range all {
			if o == op {
				n++
			}
		}
		return n
	}
	// One reply to the spawn prompt and one per task end a turn; one per
	// task calls TaskUpdate.
	if n := count("deferred assistant"); n != tasks+1 {
		t.Errorf("%d replies of w1 written without their fsync, want %d (every end of turn): %q", n, tasks+1, all)
	}
	if n := count("durable assistant"); n != tasks {
		t.Errorf("%d replies of w1 written durably, want %d (every call of TaskUpdate): %q", n, tasks, all)
	}
	firstReply, lastReply := slices.Index(all, "deferred assistant"), -1
	for i, o := range all {
		if o == "deferred assistant" {
			lastReply = i
		}
	}
	if firstReply >= 0 && slices.Contains(all[firstReply:lastReply], "sync") {
		t.Errorf("w1's transcript was synced between two tasks: %q", all)
	}
	idle := slices.Index(all, "status "+store.StatusIdle)
	if idle < lastReply || !slices.Contains(all[lastReply+1:idle], "sync") {
		t.Errorf("w1's transcript was not synced after its last reply before the roster said idle: %q", all)
	}
	// Everything is in the file, in order.
	lines := readLines(t, filepath.Join(f.state, "teams", "board", "transcripts", "w1.jsonl"))
	var roles []string
	for _, l := range lines {
		var line struct{ Role string }
		if json.Unmarshal(l, &line) == nil && line.Role != "" {
			roles = append(roles, line.Role)
		}
	}
	if want := 2 * (2*tasks + 1); len(roles) != want {
		t.Errorf("w1's transcript holds %d messages, want %d", len(roles), want)
	}
}
