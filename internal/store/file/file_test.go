package file

import (
	"os"
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

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func() store.Store {
		dir := t.TempDir()
		return func() store.Store {
			s, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	})
}

// The suite again with fsnotify off: in-process channels and the poll alone
// must keep every promise.
func TestConformancePollOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: waits on the poll")
	}
	storetest.Run(t, func(t *testing.T) func() store.Store {
		dir := t.TempDir()
		return func() store.Store {
			s, err := Open(dir, Options{DisableWatch: true, PollInterval: 50e6})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	})
}
