package file

import (
	"testing"
	"time"
)

// TestSyncSampler: fsyncs are found blocking once, when the median of the
// first ones is over blockingSync, and never when they return at once,
// however slow a few of them were (a thread descheduled on a busy
// machine).
func TestSyncSampler(t *testing.T) {
	for _, tc := range []struct {
		name  string
		took  func(i int) time.Duration
		found int
	}{
		{"tmpfs", func(int) time.Duration { return time.Microsecond }, 0},
		{"tmpfs, a few descheduled", func(i int) time.Duration {
			if i%3 == 0 {
				return 5 * time.Millisecond
			}
			return time.Microsecond
		}, 0},
		{"disk", func(int) time.Duration { return 200 * time.Microsecond }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p syncSampler
			found := 0
			for i := range 3 * syncSamples {
				if p.note(tc.took(i)) {
					if i != syncSamples-1 {
						t.Fatalf("decided at sample %d, want %d", i+1, syncSamples)
					}
					found++
				}
			}
			if found != tc.found || !p.decided.Load() {
				t.Fatalf("found blocking %d times (decided %v), want %d", found, p.decided.Load(), tc.found)
			}
		})
	}
}

// TestSyncProbeTimesStoreSyncs: the store's fsyncs reach the process's
// probe once a hook is set (on whatever the test's temporary directory
// is, it decides one way or the other).
func TestSyncProbeTimesStoreSyncs(t *testing.T) {
	old := onBlockingSync.Load()
	reset := func() {
		syncProbe.mu.Lock()
		syncProbe.took = nil
		syncProbe.decided.Store(false)
		syncProbe.mu.Unlock()
	}
	reset()
	OnBlockingSync(func() {})
	t.Cleanup(func() {
		onBlockingSync.Store(old)
		reset()
	})
	tm, _ := spareTeam(t)
	for i := range syncSamples {
		setSubject(t, tm, string(rune('a'+i)))
	}
	if !syncProbe.decided.Load() {
		t.Fatalf("%d task changes did not decide the probe", syncSamples)
	}
}
