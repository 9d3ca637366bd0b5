package file

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestDirSyncsGrouped: the directory fsyncs asked for while one runs share
// the next one, and each caller returns only after an fsync that began
// after it asked.
func TestDirSyncsGrouped(t *testing.T) {
	var (
		mu      sync.Mutex
		started []int // the callers asked before each fsync began
		asked   atomic.Int64
	)
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	d := dirSyncer{fsync: func(string) error {
		mu.Lock()
		started = append(started, int(asked.Load()))
		first := len(started) == 1
		mu.Unlock()
		if first {
			entered <- struct{}{}
			<-release
		}
		return nil
	}}
	var wg sync.WaitGroup
	ask := func() {
		asked.Add(1)
		wg.Go(func() {
			if err := d.sync("dir"); err != nil {
				t.Error(err)
			}
		})
	}
	ask()
	<-entered // the first fsync runs, and holds
	g := d.groups.get("dir")
	for range 4 {
		ask()
	}
	// The four queue behind the running fsync.
	for deadline := time.Now().Add(10 * time.Second); ; runtime.Gosched() {
		g.mu.Lock()
		n := len(g.queue)
		g.mu.Unlock()
		if n == 4 {
			break
		}
		if time.Now().After(deadline) {
			close(release)
			t.Fatalf("%d of 4 calls queued behind a running fsync", n)
		}
	}
	close(release)
	wg.Wait()
	if want := []int{1, 5}; !slices.Equal(started, want) {
		t.Fatalf("fsyncs began with %v callers asked, want %v: the four that queued share one", started, want)
	}
	// A later one has an fsync of its own.
	if err := d.sync("dir"); err != nil {
		t.Fatal(err)
	}
	if len(started) != 3 {
		t.Fatalf("%d fsyncs after a later call, want 3", len(started))
	}
}
