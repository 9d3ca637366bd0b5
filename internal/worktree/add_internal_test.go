package worktree

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAddAfterAFailedAddMadeTheBranch: a `git worktree add -b` that failed
// after it made the branch (another git was writing its worktree record)
// is tried again as a checkout of that branch, not as the same command,
// which would only say that the branch exists. (Not parallel: it sets
// beforeAdd.)
func TestAddAfterAFailedAddMadeTheBranch(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed (.ci/run installs it)")
	}
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "--quiet", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "-A")
	git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "start")
	ctx := context.Background()
	r, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := Branch("t", "alice")
	tries := 0
	beforeAdd = func(top, branch string, try int) {
		if top != r.Top || branch != want {
			return
		}
		tries = try
		if try == 1 {
			// What the failed add leaves: the branch, no worktree.
			git("branch", want, "HEAD")
		}
	}
	t.Cleanup(func() { beforeAdd = nil })
	wt, err := r.Add(ctx, "t", "alice")
	if err != nil {
		t.Fatalf("Add after a failed try made the branch: %v", err)
	}
	if tries != 2 {
		t.Errorf("%d tries, want 2", tries)
	}
	out, err := exec.Command("git", "-C", wt.Path, "symbolic-ref", "--short", "HEAD").Output()
	if err != nil || strings.TrimSpace(string(out)) != want {
		t.Fatalf("the worktree is on %q (%v), want %s", out, err, want)
	}
}
