package main

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// TestTuneRuntime: the collector's figure is set only where the
// environment leaves it to the runtime, and the scheduler's Ps are raised
// only once the store's fsyncs block, never where GOMAXPROCS is set or for
// a teammate's own process, and never lowered.
func TestTuneRuntime(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	gc := debug.SetGCPercent(100)
	t.Cleanup(func() {
		runtime.GOMAXPROCS(procs)
		debug.SetGCPercent(gc)
	})
	env := func(set map[string]string) func(string) string {
		return func(k string) string { return set[k] }
	}

	runtime.GOMAXPROCS(1)
	debug.SetGCPercent(100)
	raise := tuneRuntime(env(map[string]string{"GOGC": "100", "GOMAXPROCS": "1"}), []string{"demo"})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC set in the environment: %d, want 100", got)
	}
	if raise != nil {
		t.Error("GOMAXPROCS set in the environment, yet a blocking fsync would change it")
	}

	if raise = tuneRuntime(env(nil), []string{"agent", "--team", "t"}); raise != nil {
		t.Error("troupe agent: a blocking fsync would change its Ps")
	}

	raise = tuneRuntime(env(nil), []string{"demo"})
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Errorf("GOGC by default: %d, want %d", got, gcPercent)
	}
	if raise == nil {
		t.Fatal("no hook for blocking fsyncs")
	}
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("%d Ps before any fsync blocked, want 1", got)
	}
	raise()
	if got := runtime.GOMAXPROCS(0); got != minProcs {
		t.Errorf("one P, then a blocking fsync: %d Ps, want %d", got, minProcs)
	}

	runtime.GOMAXPROCS(minProcs + 3)
	raise()
	if got := runtime.GOMAXPROCS(0); got != minProcs+3 {
		t.Errorf("%d Ps, then a blocking fsync: %d, want them kept", minProcs+3, got)
	}
}
