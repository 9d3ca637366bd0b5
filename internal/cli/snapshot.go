package cli

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Workspace snapshots let a replay start from the files a recorded run
// started from. When the recorded workspace is a git checkout, the cassette
// keeps the commit its tracked files were at, uncommitted changes included
// (git stash create makes that commit without touching the checkout or the
// stash list); the replay extracts it with git archive into its fresh
// workspace. Untracked files are not part of it: the replay says so.

// snapshotMeta returns what the cassette header keeps of dir's git state:
// "git_repo" (the checkout), "git_path" (dir within it), "git_snapshot"
// and "git_untracked"; nothing when dir is not in a git checkout (or git
// is missing).
func snapshotMeta(ctx context.Context, dir string) map[string]string {
	top, err := gitOut(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil
	}
	if real, rerr := filepath.EvalSymlinks(dir); rerr == nil {
		dir = real
	}
	rel, err := filepath.Rel(top, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil
	}
	head, err := gitOut(ctx, dir, "rev-parse", "--verify", "HEAD")
	if err != nil {
		return nil // no commit yet
	}
	snap := head
	if dirty, err := gitOut(ctx, dir, "stash", "create"); err == nil && dirty != "" {
		snap = dirty
	}
	meta := map[string]string{"git_repo": top, "git_snapshot": snap}
	if rel != "." {
		meta["git_path"] = filepath.ToSlash(rel)
	}
	if untracked, err := gitOut(ctx, dir, "ls-files", "--others", "--exclude-standard", "."); err == nil && untracked != "" {
		meta["git_untracked"] = fmt.Sprint(len(strings.Split(untracked, "\n")))
	}
	return meta
}

// restoreSnapshot extracts the recorded snapshot into dest. It returns a
// note for the user (what could not be restored), or an error.
func restoreSnapshot(ctx context.Context, meta map[string]string, dest string) (string, error) {
	repo, snap := meta["git_repo"], meta["git_snapshot"]
	if repo == "" || snap == "" {
		return "", nil
	}
	tree := snap
	if p := meta["git_path"]; p != "" {
		tree += ":" + p // the workspace's folder alone, at the top
	}
	archive := exec.CommandContext(ctx, "git", "-C", repo, "archive", "--format=tar", tree)
	var tarball, stderr bytes.Buffer
	archive.Stdout, archive.Stderr = &tarball, &stderr
	if err := archive.Run(); err != nil {
		return "", fmt.Errorf("restore the recorded workspace (git archive %s in %s): %v: %s", short(snap), repo, err, strings.TrimSpace(stderr.String()))
	}
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", dest)
	untar.Stdin, untar.Stderr = &tarball, &stderr
	if err := untar.Run(); err != nil {
		return "", fmt.Errorf("restore the recorded workspace into %s: %v: %s", dest, err, strings.TrimSpace(stderr.String()))
	}
	where := repo
	if p := meta["git_path"]; p != "" {
		where = repo + "/" + p
	}
	note := fmt.Sprintf("the workspace starts as %s was at %s", where, short(snap))
	if n := meta["git_untracked"]; n != "" {
		note += fmt.Sprintf(" (its %s untracked files are not part of the snapshot)", n)
	}
	return note, nil
}

func gitOut(ctx context.Context, dir string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}
