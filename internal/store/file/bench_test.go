package file

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
)

// BenchmarkList is what every idle teammate does after each board change:
// read the whole board (500 tasks, a few with metadata and links).
func BenchmarkList(b *testing.B) {
	ctx := context.Background()
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	tm, err := s.CreateTeam(ctx, store.Roster{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 500 {
		t := store.Task{Subject: fmt.Sprintf("task %d", i+1), Description: "a task of the benchmark board", Metadata: map[string]any{"role": "dev", "n": i}}
		if i > 0 && i%5 == 0 {
			t.BlockedBy = []string{fmt.Sprint(i)}
		}
		if _, err := tm.Tasks().Create(ctx, t); err != nil {
			b.Fatal(err)
		}
	}
	// A board's tasks are mostly older than the last second (see
	// racyWindow).
	paths, _ := filepath.Glob(filepath.Join(s.Dir(), "teams", "bench", "tasks", "*.json"))
	old := time.Now().Add(-time.Minute)
	for _, p := range paths {
		if err := os.Chtimes(p, old, old); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		ts, err := tm.Tasks().List(ctx)
		if err != nil || len(ts) != 500 {
			b.Fatalf("List: %d tasks, %v", len(ts), err)
		}
	}
}

// BenchmarkCreateAll is a lead's batch of 500 TaskCreate calls: one
// transaction making 500 task files.
func BenchmarkCreateAll(b *testing.B) {
	ctx := context.Background()
	ts := make([]store.Task, 500)
	for i := range ts {
		ts[i] = store.Task{Subject: fmt.Sprintf("Task %d", i+1)}
	}
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	n := 0
	for b.Loop() {
		n++
		tm, err := s.CreateTeam(ctx, store.Roster{Name: fmt.Sprintf("bench%d", n)})
		if err != nil {
			b.Fatal(err)
		}
		if got, err := tm.Tasks().(store.TaskBatch).CreateAll(ctx, ts); err != nil || len(got) != len(ts) {
			b.Fatalf("CreateAll: %d tasks, %v", len(got), err)
		}
	}
}
