package worktree_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/troupe-dev/troupe/internal/worktree"
)

// bareRemote makes a bare repository with one commit on main, and a lead's
// clone of it.
func bareRemote(t *testing.T) (remote, lead string) {
	t.Helper()
	src := gitRepo(t, map[string]string{"a.txt": "one\n"})
	remote = filepath.Join(t.TempDir(), "remote.git")
	git(t, src, "clone", "--quiet", "--bare", src, remote)
	lead = filepath.Join(t.TempDir(), "lead")
	git(t, src, "clone", "--quiet", remote, lead)
	return remote, lead
}

// TestCloneCommitPushFetchMerge: a teammate on another machine clones the
// remote onto its branch, commits and pushes; the lead fetches the branch
// into its checkout and merges it; a second Clone of the same folder (a
// restart) keeps the branch and its commits.
func TestCloneCommitPushFetchMerge(t *testing.T) {
	ctx := context.Background()
	remote, lead := bareRemote(t)
	dir := filepath.Join(t.TempDir(), "machine", "alice")
	branch := worktree.Branch("t", "alice")
	r, err := worktree.Clone(ctx, remote, dir, "main", branch)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.BaseBranch(ctx); got != branch {
		t.Fatalf("clone is on %q, want %q", got, branch)
	}
	write(t, filepath.Join(dir, "b.txt"), "alice\n")
	// troupe's own folder in the clone is never committed.
	write(t, filepath.Join(dir, ".troupe", "log"), "x\n")
	commit, err := r.Commit(ctx, dir, "Alice adds b")
	if err != nil || commit == "" {
		t.Fatalf("Commit = %q, %v", commit, err)
	}
	if err := r.Push(ctx, worktree.Remote, branch); err != nil {
		t.Fatal(err)
	}

	l, err := worktree.Open(ctx, lead)
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Fetch(ctx, remote, branch)
	if err != nil || got != commit {
		t.Fatalf("Fetch = %q, %v; want %q", got, err, commit)
	}
	m, err := l.Merge(ctx, branch, "merge alice", worktree.FastForward)
	if err != nil || m.How != "fast-forward" {
		t.Fatalf("Merge = %+v, %v", m, err)
	}
	if b, _ := os.ReadFile(filepath.Join(lead, "b.txt")); string(b) != "alice\n" {
		t.Fatalf("lead's b.txt = %q", b)
	}
	if _, err := os.Stat(filepath.Join(lead, ".troupe")); err == nil {
		t.Fatal(".troupe was committed and merged")
	}
	if err := l.Push(ctx, remote, "main"); err != nil {
		t.Fatal(err)
	}
	if u := l.RemoteURL(ctx, worktree.Remote); u != remote {
		t.Errorf("RemoteURL = %q, want %q", u, remote)
	}

	// A restart: the same folder is fetched, the branch kept, and the
	// clone sees the base the lead pushed.
	write(t, filepath.Join(dir, "c.txt"), "uncommitted\n")
	r2, err := worktree.Clone(ctx, "file://"+remote, dir, "main", branch)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := r2.Head(ctx); h != commit {
		t.Errorf("after a restart the clone is at %s, want %s", h, commit)
	}
	if _, err := os.Stat(filepath.Join(dir, "c.txt")); err != nil {
		t.Errorf("uncommitted work lost on restart: %v", err)
	}
	if err := r2.FetchRemote(ctx, worktree.Remote); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "merge-base", "--is-ancestor", commit, "origin/main")
}

// TestCloneRefuses: a folder that holds something else is never taken.
func TestCloneRefuses(t *testing.T) {
	ctx := context.Background()
	remote, lead := bareRemote(t)
	other, _ := bareRemote(t)
	full := t.TempDir()
	write(t, filepath.Join(full, "notes.txt"), "mine\n")
	for _, tc := range []struct {
		name, remote, dir, base string
		want                    error
	}{
		{"not empty, not a clone", remote, full, "main", worktree.ErrNotClone},
		{"a clone of another remote", other, lead, "main", worktree.ErrNotClone},
		{"no such base", remote, filepath.Join(t.TempDir(), "x"), "nope", nil},
		{"no remote", "", filepath.Join(t.TempDir(), "y"), "main", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := worktree.Clone(ctx, tc.remote, tc.dir, tc.base, "troupe/t/bob")
			if err == nil {
				t.Fatal("Clone = nil error; want one")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("Clone = %v; want %v", err, tc.want)
			}
		})
	}
}
