package worktree_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/worktree"
)

func TestHunks(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []worktree.Hunk
	}{
		{"none", "a\nb\n", nil},
		{"one", "a\n<<<<<<< HEAD\nx\n=======\ny\n>>>>>>> b\nz\n", []worktree.Hunk{{Line: 2, Ours: "x\n", Theirs: "y\n"}}},
		{"diff3", "<<<<<<< HEAD\nx\n||||||| base\nw\n=======\ny\n>>>>>>> b\n", []worktree.Hunk{{Line: 1, Ours: "x\n", Theirs: "y\n"}}},
		{"unclosed", "<<<<<<< HEAD\nx\n", []worktree.Hunk{{Line: 1, Ours: "x\n"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, worktree.Hunks(tc.text)); d != "" {
				t.Errorf("Hunks (-want +got):\n%s", d)
			}
		})
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]worktree.Mode{"": worktree.FastForward, "ff": worktree.FastForward, "merge": worktree.MergeCommit, "no-ff": worktree.MergeCommit} {
		if got, err := worktree.ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := worktree.ParseMode("squash"); err == nil {
		t.Error("ParseMode(squash) = nil error; want one")
	}
}

// gitRepo makes a repository with one commit of the given files.
func gitRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed (.ci/run installs it)")
	}
	dir := t.TempDir()
	git(t, dir, "init", "--quiet", "-b", "main")
	for f, c := range files {
		write(t, filepath.Join(dir, f), c)
	}
	git(t, dir, "add", "-A")
	git(t, dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "start")
	return dir
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func write(t *testing.T, p, c string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLifecycle: two worktrees from HEAD, a clean merge of each (the
// first fast-forwards, the second makes a merge commit), a conflict that
// leaves the base untouched and names the hunk, removal and prune.
func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	dir := gitRepo(t, map[string]string{"a.txt": "one\n", "b.txt": "two\n"})
	r, err := worktree.Open(ctx, filepath.Join(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	alice, err := r.Add(ctx, "t", "alice")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := r.Add(ctx, "t", "bob")
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, alice.Path, "branch", "--show-current"); got != "troupe/t/alice" {
		t.Errorf("alice's branch = %q", got)
	}
	if st := git(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("base status after adding worktrees = %q, want clean (.troupe excluded)", st)
	}
	again, err := r.Add(ctx, "t", "alice")
	if err != nil || !again.Reused {
		t.Errorf("Add again = %+v, %v; want the same worktree reused", again, err)
	}

	write(t, filepath.Join(alice.Path, "a.txt"), "ONE\n")
	write(t, filepath.Join(bob.Path, "b.txt"), "TWO\n")
	if c, err := r.Commit(ctx, alice.Path, "alice's task"); err != nil || c == "" {
		t.Fatalf("Commit alice = %q, %v", c, err)
	}
	if c, err := r.Commit(ctx, bob.Path, "bob's task"); err != nil || c == "" {
		t.Fatalf("Commit bob = %q, %v", c, err)
	}
	if c, err := r.Commit(ctx, bob.Path, "nothing"); err != nil || c != "" {
		t.Errorf("Commit with no change = %q, %v; want no commit", c, err)
	}
	m, err := r.Merge(ctx, alice.Branch, "merge alice", worktree.FastForward)
	if err != nil || m.How != "fast-forward" {
		t.Fatalf("Merge alice = %+v, %v; want fast-forward", m, err)
	}
	m, err = r.Merge(ctx, bob.Branch, "merge bob", worktree.FastForward)
	if err != nil || m.How != "merge commit" {
		t.Fatalf("Merge bob = %+v, %v; want a merge commit", m, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "b.txt")); string(b) != "TWO\n" {
		t.Errorf("b.txt in base = %q", b)
	}

	// Both change a.txt's line from what each saw: bob's branch still has "one".
	write(t, filepath.Join(bob.Path, "a.txt"), "uno\n")
	if _, err := r.Commit(ctx, bob.Path, "bob renames"); err != nil {
		t.Fatal(err)
	}
	head := git(t, dir, "rev-parse", "HEAD")
	m, err = r.Merge(ctx, bob.Branch, "merge bob", worktree.FastForward)
	if !errors.Is(err, worktree.ErrConflict) {
		t.Fatalf("Merge conflicting = %v; want ErrConflict", err)
	}
	want := []worktree.Conflict{{File: "a.txt", Hunks: []worktree.Hunk{{Line: 1, Ours: "ONE\n", Theirs: "uno\n"}}}}
	if d := cmp.Diff(want, m.Conflicts); d != "" {
		t.Errorf("conflicts (-want +got):\n%s", d)
	}
	if got := git(t, dir, "rev-parse", "HEAD"); got != head {
		t.Errorf("base moved on a conflict: %s -> %s", head, got)
	}
	if st := git(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("base after an aborted merge = %q, want clean", st)
	}

	if err := r.Remove(ctx, bob, false); err == nil {
		t.Error("Remove of an unmerged branch = nil; want refused")
	}
	if err := r.Remove(ctx, alice, false); err != nil {
		t.Errorf("Remove merged alice: %v", err)
	}
	if err := r.Remove(ctx, bob, true); err != nil {
		t.Errorf("Remove forced bob: %v", err)
	}
	if ps, err := r.Registered(ctx); err != nil || len(ps) != 0 {
		t.Errorf("worktrees left = %v, %v; want none", ps, err)
	}
	if got := git(t, dir, "branch", "--list", "troupe/*"); got != "" {
		t.Errorf("branches left: %q", got)
	}
}

func TestReadyRefuses(t *testing.T) {
	ctx := context.Background()
	dir := gitRepo(t, map[string]string{"a.txt": "one\n"})
	r, err := worktree.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "a.txt"), "changed\n")
	if err := r.Ready(ctx); !errors.Is(err, worktree.ErrDirty) || !strings.Contains(err.Error(), "a.txt") {
		t.Errorf("Ready on a dirty checkout = %v; want ErrDirty naming a.txt", err)
	}
	if _, err := worktree.Open(ctx, t.TempDir()); !errors.Is(err, worktree.ErrNotRepo) {
		t.Errorf("Open outside a repository = %v; want ErrNotRepo", err)
	}
	empty := t.TempDir()
	git(t, empty, "init", "--quiet")
	r, err = worktree.Open(ctx, empty)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Ready(ctx); !errors.Is(err, worktree.ErrNoCommit) {
		t.Errorf("Ready with no commit = %v; want ErrNoCommit", err)
	}
}

// TestReadyHead: one status gives HEAD and the tracked changes, whatever
// their kind; untracked files do not count.
func TestReadyHead(t *testing.T) {
	ctx := context.Background()
	dir := gitRepo(t, map[string]string{"a.txt": "one\n", "my file.txt": "two\n", "c.txt": "three\n"})
	r, err := worktree.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	head, err := r.ReadyHead(ctx)
	if err != nil || head != git(t, dir, "rev-parse", "HEAD") {
		t.Fatalf("ReadyHead = %q, %v; want HEAD", head, err)
	}
	write(t, filepath.Join(dir, "new.txt"), "untracked\n")
	if _, err := r.ReadyHead(ctx); err != nil {
		t.Errorf("ReadyHead with an untracked file: %v", err)
	}
	write(t, filepath.Join(dir, "my file.txt"), "changed\n")
	git(t, dir, "mv", "c.txt", "d.txt")
	_, err = r.ReadyHead(ctx)
	if !errors.Is(err, worktree.ErrDirty) || !strings.Contains(err.Error(), "my file.txt") || !strings.Contains(err.Error(), "d.txt") {
		t.Errorf("ReadyHead with changes = %v; want ErrDirty naming my file.txt and d.txt", err)
	}
}
