package main

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// TestTuneRuntime: the collector and scheduler figures are set only where
// the environment leaves them to the runtime, and GOMAXPROCS is only ever
// raised, never for a teammate's own process.
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
	tuneRuntime(env(map[string]string{"GOGC": "100", "GOMAXPROCS": "1"}), []string{"demo"})
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS set in the environment: %d Ps, want 1", got)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC set in the environment: %d, want 100", got)
	}

	tuneRuntime(env(nil), []string{"agent", "--team", "t"})
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("troupe agent: %d Ps, want the default (1)", got)
	}

	tuneRuntime(env(nil), []string{"demo"})
	if got := runtime.GOMAXPROCS(0); got != minProcs {
		t.Errorf("one P by default: %d Ps after, want %d", got, minProcs)
	}
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Errorf("GOGC by default: %d, want %d", got, gcPercent)
	}

	runtime.GOMAXPROCS(minProcs + 3)
	tuneRuntime(env(nil), nil)
	if got := runtime.GOMAXPROCS(0); got != minProcs+3 {
		t.Errorf("%d Ps by default: %d after, want them kept", minProcs+3, got)
	}
}
