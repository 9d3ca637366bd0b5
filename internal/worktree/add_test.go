package worktree_test

import (
	"context"
	"testing"

	"github.com/troupe-dev/troupe/internal/worktree"
)

// TestAddAfterAFailedAddMadeTheBranch: a `git worktree add -b` that failed
// after it made the branch (another git was writing its worktree record)
// is tried again as a checkout of that branch, not as the same command,
// which would only say that the branch exists. (Not parallel: it sets the
// package's hook.)
func TestAddAfterAFailedAddMadeTheBranch(t *testing.T) {
	dir := gitRepo(t, map[string]string{"a.txt": "a\n"})
	ctx := context.Background()
	r, err := worktree.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := worktree.Branch("t", "alice")
	tries := 0
	worktree.SetBeforeAdd(func(top, branch string, try int) {
		if top != r.Top || branch != want {
			return
		}
		tries = try
		if try == 1 {
			// What the failed add leaves: the branch, no worktree.
			git(t, dir, "branch", want, "HEAD")
		}
	})
	t.Cleanup(func() { worktree.SetBeforeAdd(nil) })
	wt, err := r.Add(ctx, "t", "alice")
	if err != nil {
		t.Fatalf("Add after a failed try made the branch: %v", err)
	}
	if tries != 2 {
		t.Errorf("%d tries, want 2", tries)
	}
	if got := git(t, wt.Path, "symbolic-ref", "--short", "HEAD"); got != want {
		t.Fatalf("the worktree is on %q, want %s", got, want)
	}
}
