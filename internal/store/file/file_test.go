package file

import (
	"context"
	"encoding/json"
	"github.com/troupe-dev/troupe/internal/racetest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/store/storetest"
)

func TestMain(m *testing.M) {
	racetest.QuickExit()
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	goleak.VerifyTestMain(m)
}

// damage breaks the file store's state as a bad disk or a hand edit would.
type damage struct{}

func (damage) CorruptTask(t *testing.T, s store.Store, team, id string) {
	t.Helper()
	path := filepath.Join(s.(*Store).Dir(), "teams", team, "tasks", id+".json")
	if err := os.WriteFile(path, []byte(`{"id": "`+id+`", "subj`), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (damage) CorruptRoster(t *testing.T, s store.Store, team string) {
	t.Helper()
	path := filepath.Join(s.(*Store).Dir(), "teams", team, "config.json")
	if err := os.WriteFile(path, []byte("{\"name\": \""+team+"\", \"members\": [{"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.RunWith(t, func(t *testing.T) func() store.Store {
		dir := t.TempDir()
		return func() store.Store {
			s, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}, storetest.Options{Damage: damage{}})
}

// The suite again with fsnotify off: in-process channels and the poll alone
// must keep every promise.
func TestConformancePollOnly(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("slow: waits on the poll")
	}
	storetest.RunWith(t, func(t *testing.T) func() store.Store {
		dir := t.TempDir()
		return func() store.Store {
			s, err := Open(dir, Options{DisableWatch: true, PollInterval: 50e6})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}, storetest.Options{Damage: damage{}})
}

// TestOpenURL: store.Open reaches the file store through its scheme, with a
// relative or an absolute path, and refuses what it cannot honour.
func TestOpenURL(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	t.Chdir(dir)
	for _, tt := range []struct {
		url, dir string
		poll     time.Duration
		noWatch  bool
	}{
		{"file:.troupe", filepath.Join(dir, ".troupe"), time.Second, false},
		{"file:" + filepath.Join(dir, "abs"), filepath.Join(dir, "abs"), time.Second, false},
		{"file://" + filepath.Join(dir, "slashes"), filepath.Join(dir, "slashes"), time.Second, false},
		{"FILE:rel/state?watch=false&poll=50ms", filepath.Join(dir, "rel", "state"), 50 * time.Millisecond, true},
	} {
		s, err := store.Open(ctx, tt.url)
		if err != nil {
			t.Fatalf("Open(%q): %v", tt.url, err)
		}
		fs := s.(*Store)
		if fs.Dir() != tt.dir || fs.opts.PollInterval != tt.poll || fs.opts.DisableWatch != tt.noWatch {
			t.Errorf("Open(%q): dir %s, poll %v, watch off %v; want %s, %v, %v", tt.url, fs.Dir(), fs.opts.PollInterval, fs.opts.DisableWatch, tt.dir, tt.poll, tt.noWatch)
		}
		if _, err := os.Stat(filepath.Join(tt.dir, "teams")); err != nil {
			t.Errorf("Open(%q) made no store: %v", tt.url, err)
		}
		s.Close()
	}
	for _, tt := range []struct{ url, want string }{
		{"file:", "no directory"},
		{"file://elsewhere/x", `host "elsewhere"`},
		{"file:x?colour=red", `unknown parameter "colour" (known: poll, watch)`},
		{"file:x?poll=soon", `poll="soon"`},
		{"file:x?watch=maybe", `watch="maybe"`},
	} {
		if s, err := store.Open(ctx, tt.url); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Open(%q) = %v, want an error with %q", tt.url, err, tt.want)
			if s != nil {
				s.Close()
			}
		}
	}
}

// TestHandEditSeen: a task file changed in place behind the store's back
// (an editor) is read anew, not served from the parse cache, even at the
// same size.
func TestHandEditSeen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tm, err := s.CreateTeam(ctx, store.Roster{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Tasks().Create(ctx, store.Task{Subject: "before"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.Dir(), "teams", "t", "tasks", "1.json")
	old := time.Now().Add(-time.Hour)
	for i, subject := range []string{"before", "edited in place", "edited again, longer", "same len as again!!!"} {
		if i > 0 {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var task store.Task
			if err := json.Unmarshal(data, &task); err != nil {
				t.Fatal(err)
			}
			task.Subject = subject
			data, _ = store.MarshalTask(&task)
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0) // same inode
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(data); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		// Old enough to be cached; each version a second apart.
		if err := os.Chtimes(path, old, old.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second read is served from the cache
			got, err := tm.Tasks().Get(ctx, "1")
			if err != nil || got.Subject != subject {
				t.Fatalf("after edit %d: %q, %v; want %q", i, got.Subject, err, subject)
			}
		}
	}
	s.parsed.mu.Lock()
	n := len(s.parsed.m)
	s.parsed.mu.Unlock()
	if n != 1 {
		t.Errorf("%d tasks cached, want 1 (the test would prove nothing)", n)
	}
}
