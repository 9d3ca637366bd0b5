package file

import (
	"context"
	"sync"
	"testing"

	"github.com/troupe-dev/troupe/internal/store"
)

// Goroutines that update one task at once, in group commits, lose no
// update: each change sees the ones staged before it in its batch; a List
// after them sees them all.
func TestGroupCommitLosesNoUpdate(t *testing.T) {
	t.Parallel()
	tm := newTestTeam(t, t.TempDir())
	ctx := context.Background()
	for range 3 {
		if _, err := tm.Tasks().Create(ctx, store.Task{Subject: "counter"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tm.Tasks().List(ctx); err != nil { // a cached board, to be kept up to date
		t.Fatal(err)
	}
	const workers, each = 8, 25
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				id := []string{"1", "2", "3"}[(w+i)%3]
				_, err := tm.Tasks().Update(ctx, id, func(tk *store.Task) error {
					n, _ := tk.Metadata["n"].(float64)
					tk.Metadata["n"] = n + 1
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	list, err := tm.Tasks().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, tk := range list {
		n, _ := tk.Metadata["n"].(float64)
		total += n
	}
	if total != workers*each {
		t.Errorf("%v updates on the board, want %d", total, workers*each)
	}
	s2, err := Open(tm.s.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	t2, _ := s2.OpenTeam("t1")
	fresh, err := t2.Tasks().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range fresh {
		if fresh[i].Metadata["n"] != list[i].Metadata["n"] {
			t.Errorf("task %s: n = %v in its file, %v in the cached board", fresh[i].ID, fresh[i].Metadata["n"], list[i].Metadata["n"])
		}
	}
}
