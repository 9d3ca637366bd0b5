package file

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/store/storetest"
)

func TestMain(m *testing.M) {
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
