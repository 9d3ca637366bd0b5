package shell

import (
	"context"
	"testing"
)

// BenchmarkRun is the cost of one short command: start, group, cgroup
// where available, records, wait and clean-up.
func BenchmarkRun(b *testing.B) {
	for b.Loop() {
		if _, err := Run(context.Background(), Options{Command: "echo hi", Dir: b.TempDir()}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunNoCgroup is the same with cgroups turned off, to show what
// they cost.
func BenchmarkRunNoCgroup(b *testing.B) {
	was := cgroups.disabled.Load()
	cgroups.disabled.Store(true)
	defer cgroups.disabled.Store(was)
	for b.Loop() {
		if _, err := Run(context.Background(), Options{Command: "echo hi", Dir: b.TempDir()}); err != nil {
			b.Fatal(err)
		}
	}
}
