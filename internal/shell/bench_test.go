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

// BenchmarkSession is the cost of one short command in a running session.
func BenchmarkSession(b *testing.B) {
	s := NewSession(b.TempDir(), nil)
	defer s.Close()
	if _, err := s.Run(context.Background(), Options{Command: "true"}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		r, err := s.Run(context.Background(), Options{Command: "echo hi"})
		if err != nil || r.Output != "hi\n" {
			b.Fatalf("%q %v", r.Output, err)
		}
	}
}
