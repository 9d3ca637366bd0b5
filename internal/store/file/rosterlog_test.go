package file

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/store"
)

// Two stores on one directory (as two processes) change their own member's
// status in turn with the roster log and its folds in between: after each
// change, the other store reads it at once.
func TestRosterLogSeenAcrossStores(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := newTestTeam(t, dir, "alice", "bob")
	sb, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	b, err := sb.OpenTeam("t1")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	set := func(tm *Team, name, status string) {
		t.Helper()
		if _, err := tm.UpdateRoster(ctx, func(r *store.Roster) error {
			m, _ := r.Member(name)
			m.Status, m.HeartbeatAt = status, time.Now().UTC()
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	status := func(tm *Team, name string) string {
		t.Helper()
		r, err := tm.ReadRoster(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := r.Member(name)
		return m.Status
	}
	states := []string{store.StatusWorking, store.StatusIdle}
	for i := range 300 {
		want := states[i%2]
		set(a, "alice", want)
		if got := status(b, "alice"); got != want {
			t.Fatalf("step %d: the other store reads alice %q, want %q", i, got, want)
		}
		set(b, "bob", want)
		if got := status(a, "bob"); got != want {
			t.Fatalf("step %d: the other store reads bob %q, want %q", i, got, want)
		}
		if i%37 == 0 {
			// A fold, by either side.
			if err := []*Team{a, b}[i%2].compact(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Concurrent writers in two stores never lose an update.
func TestRosterLogConcurrentUpdates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := newTestTeam(t, dir)
	sb, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	b, err := sb.OpenTeam("t1")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	const each = 60
	for w, tm := range []*Team{a, b, a, b} {
		wg.Go(func() {
			name := fmt.Sprintf("m%d", w)
			for i := range each {
				_, err := tm.UpdateRoster(ctx, func(r *store.Roster) error {
					m, ok := r.Member(name)
					if !ok {
						r.Members = append(r.Members, store.Member{Name: name})
						m = &r.Members[len(r.Members)-1]
					}
					m.PID = i + 1
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				if i%20 == 0 {
					if err := tm.compact(ctx); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	for _, tm := range []*Team{a, b} {
		r, err := tm.ReadRoster(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, m := range r.Members {
			got[m.Name] = m.PID
		}
		want := map[string]int{"m0": each, "m1": each, "m2": each, "m3": each}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("pids (-want +got):\n%s", diff)
		}
	}
}

// A status change is one line of roster.jsonl; config.json has it once
// the log is folded (at the latest when the store closes), and both read
// the same roster.
func TestRosterLogFoldsIntoConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tm, err := s.CreateTeam(ctx, store.Roster{Name: "t1", Members: []store.Member{{Name: "alice"}}})
	if err != nil {
		t.Fatal(err)
	}
	team := filepath.Join(dir, "teams", "t1")
	if _, err := tm.UpdateRoster(ctx, func(r *store.Roster) error {
		r.Members[0].Status = store.StatusIdle
		r.Members = append(r.Members, store.Member{Name: "bob", Status: store.StatusWorking})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(read(t, filepath.Join(team, "roster.jsonl"))), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"name":"alice"`) || !strings.Contains(lines[1], `"name":"bob"`) {
		t.Errorf("roster.jsonl = %q, want a line for alice and one for bob", lines)
	}
	want, err := tm.ReadRoster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := read(t, filepath.Join(team, "config.json"))
	if !strings.Contains(cfg, `"name": "bob"`) || strings.Count(cfg, `"status": "idle"`) != 1 {
		t.Errorf("config.json after close lacks the logged changes:\n%s", cfg)
	}
	s2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	t2, _ := s2.OpenTeam("t1")
	got, err := t2.ReadRoster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("roster after the fold (-want +got):\n%s", diff)
	}
	// A crash between the fold's config.json and its new log leaves the
	// old lines: applied again, they change nothing.
	if err := os.WriteFile(filepath.Join(team, "roster.jsonl"), []byte(strings.Join(lines, "\n")+"\n"+`{"name":"bo`), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err = t2.ReadRoster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("roster with the folded lines again and a torn one (-want +got):\n%s", diff)
	}
}

// A fold by another store between a reader's opening of config.json and
// of the log must not leave the reader with the old config.json and the
// new, empty log: the folded changes would be lost to that read. Not
// parallel: it sets a package hook.
func TestRosterReadRacingFold(t *testing.T) {
	dir := t.TempDir()
	a := newTestTeam(t, dir, "alice")
	sb, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	b, err := sb.OpenTeam("t1")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := b.ReadRoster(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.UpdateRoster(ctx, func(r *store.Roster) error {
		r.Members[0].Status = store.StatusWorking
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	folds := 0
	testHookRosterBetweenOpens = func() {
		if folds++; folds == 1 {
			if err := a.compact(ctx); err != nil {
				t.Error(err)
			}
		}
	}
	defer func() { testHookRosterBetweenOpens = nil }()
	r, err := b.ReadRoster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if folds == 0 {
		t.Fatal("the read never reached the hook")
	}
	if m, _ := r.Member("alice"); m.Status != store.StatusWorking {
		t.Errorf("alice reads %q after a fold raced the read, want %q", m.Status, store.StatusWorking)
	}
}

// TestBeatWritesNoRoster: a change of heartbeats alone sets the members'
// heartbeat files and leaves config.json and roster.jsonl as they were, so
// that a beat wakes no watcher of the team's directory; a change of status
// is still logged.
func TestBeatWritesNoRoster(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tm := newTestTeam(t, dir, "alice", "bob")
	ctx := context.Background()
	files := func() string {
		var out []string
		for _, name := range []string{"config.json", "roster.jsonl"} {
			fi, err := os.Stat(tm.path(name))
			if err != nil {
				out = append(out, name+" "+err.Error())
				continue
			}
			out = append(out, fmt.Sprintf("%s %d %d", name, fi.Size(), fi.ModTime().UnixNano()))
		}
		return strings.Join(out, "; ")
	}
	before := files()
	at := time.Now().UTC().Add(time.Minute).Truncate(time.Microsecond)
	if _, err := tm.UpdateRoster(ctx, func(r *store.Roster) error {
		for i := range r.Members {
			r.Members[i].HeartbeatAt = at
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if after := files(); after != before {
		t.Errorf("a beat changed the roster's files:\nbefore %s\nafter  %s", before, after)
	}
	for _, name := range []string{"alice", "bob"} {
		fi, err := os.Stat(filepath.Join(dir, "teams", "t1", "beats", name))
		if err != nil {
			t.Fatal(err)
		}
		if !fi.ModTime().Equal(at) {
			t.Errorf("%s's heartbeat file has mtime %v, want %v", name, fi.ModTime().UTC(), at)
		}
	}
	if _, err := tm.UpdateRoster(ctx, func(r *store.Roster) error {
		r.Members[0].Status = store.StatusWorking
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if after := files(); after == before {
		t.Error("a change of status left the roster's files as they were")
	}
}

// TestRosterLogUnchangedByBirthTime: while the log is the file the cache
// read, unchanged, a roster read costs one statx and reads no log head;
// a log replaced by another of the same size and header (a new file, even
// on a reused inode) is read again.
func TestRosterLogUnchangedByBirthTime(t *testing.T) {
	dir := t.TempDir()
	tm := newTestTeam(t, dir, "alice")
	ctx := context.Background()
	if _, err := tm.UpdateRoster(ctx, func(r *store.Roster) error {
		m, _ := r.Member("alice")
		m.Status = store.StatusWorking
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.ReadRoster(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := instanceOf(tm.logPath()); err != nil || !ok {
		t.Skipf("this file system gives no birth times (%v): every read checks the log's head", err)
	}
	heads := 0
	testHookStatLog = func() { heads++ }
	t.Cleanup(func() { testHookStatLog = nil })
	for range 5 {
		if m, ok, err := tm.ReadMember(ctx, "alice"); err != nil || !ok || m.Status != store.StatusWorking {
			t.Fatalf("ReadMember = %+v, %v, %v", m, ok, err)
		}
	}
	if heads != 0 {
		t.Errorf("%d reads of the log's head for an unchanged log, want 0", heads)
	}
	// The same bytes but another status, as a new file renamed over it.
	data, err := os.ReadFile(tm.logPath())
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), `"`+store.StatusWorking+`"`, `"stopped"`, 1)
	if len(edited) != len(data) || edited == string(data) {
		t.Fatalf("cannot make a same-size edit of %q", data)
	}
	tmp := tm.logPath() + ".new"
	if err := os.WriteFile(tmp, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, tm.logPath()); err != nil {
		t.Fatal(err)
	}
	if m, _, err := tm.ReadMember(ctx, "alice"); err != nil || m.Status != "stopped" {
		t.Errorf("after the log was replaced: %+v, %v; want status stopped", m, err)
	}
}

// TestRemovedTeamFoldsNothing: a team deleted or archived with a fold of
// its roster log pending drops the fold, which would make config.lock
// again in the directory being removed (failing the removal) or in a team
// made again under the name.
func TestRemovedTeamFoldsNothing(t *testing.T) {
	t.Parallel()
	for _, archive := range []bool{false, true} {
		tm := newTestTeam(t, t.TempDir(), "alice")
		s, ctx := tm.s, context.Background()
		var err error
		pending := func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.compacting["t1"] != nil
		}
		status := []string{store.StatusIdle, store.StatusWorking}
		for i := 0; !pending(); i++ { // the fold waits rosterFoldDelay: on a slow machine it may have run
			if i == 100 {
				t.Fatal("no fold pending after 100 roster changes")
			}
			if _, err := tm.UpdateRoster(ctx, func(r *store.Roster) error { r.Members[0].Status = status[i%2]; return nil }); err != nil {
				t.Fatal(err)
			}
		}
		if archive {
			_, err = s.ArchiveTeam(ctx, "t1")
		} else {
			err = s.DeleteTeam(ctx, "t1")
		}
		if err != nil {
			t.Fatal(err)
		}
		if pending() {
			t.Errorf("archive %v: a fold of the removed team is still pending", archive)
		}
	}
}
