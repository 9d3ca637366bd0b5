package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrNotClone says a joining teammate's workspace folder holds something
// that is not a clone of the team's remote.
var ErrNotClone = errors.New("the folder is not a clone of the team's remote")

// Remote is the name a teammate's clone gives the team's remote.
const Remote = "origin"

// Clone makes dir a checkout of remote on branch, for a teammate on
// another machine: it clones remote into dir (empty or absent), or fetches
// into the clone dir already holds (a restart), and checks out branch.
// branch is taken, in this order, from the clone's own branch (its
// commits and uncommitted work kept), the remote's branch of that name (a
// restart on a fresh machine), or base on the remote (a new teammate).
func Clone(ctx context.Context, remote, dir, base, branch string) (*Repo, error) {
	if remote == "" || base == "" || branch == "" {
		return nil, fmt.Errorf("clone into %s: the remote, base branch and branch are all needed (got %q, %q, %q)", dir, remote, base, branch)
	}
	exe, err := findGit(ctx)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	tmp := &Repo{git: exe, Top: abs}
	if _, err := os.Stat(filepath.Join(abs, ".git")); err == nil {
		url, err := tmp.run(ctx, abs, "remote", "get-url", Remote)
		if err != nil || !sameRemote(strings.TrimSpace(url), remote) {
			return nil, fmt.Errorf("%w: %s has remote %s %q, want %q", ErrNotClone, abs, Remote, strings.TrimSpace(url), remote)
		}
		if _, err := tmp.run(ctx, abs, "fetch", "--quiet", Remote); err != nil {
			return nil, err
		}
	} else {
		if ents, err := os.ReadDir(abs); err == nil && len(ents) > 0 {
			return nil, fmt.Errorf("%w: %s is not empty and has no .git; give another --workspace", ErrNotClone, abs)
		}
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			return nil, err
		}
		if _, err := tmp.run(ctx, filepath.Dir(abs), "clone", "--quiet", "--origin", Remote, "--", remote, abs); err != nil {
			return nil, err
		}
	}
	r, err := Open(ctx, abs)
	if err != nil {
		return nil, err
	}
	if err := r.exclude(ctx); err != nil {
		return nil, err
	}
	switch {
	case r.hasRef(ctx, "refs/heads/"+branch):
		if cur := r.BaseBranch(ctx); cur != branch {
			if _, err := r.run(ctx, r.Top, "checkout", "--quiet", branch); err != nil {
				return nil, err
			}
		}
	case r.hasRef(ctx, "refs/remotes/"+Remote+"/"+branch):
		if _, err := r.run(ctx, r.Top, "checkout", "--quiet", "-b", branch, "--track", Remote+"/"+branch); err != nil {
			return nil, err
		}
	case r.hasRef(ctx, "refs/remotes/"+Remote+"/"+base):
		if _, err := r.run(ctx, r.Top, "checkout", "--quiet", "--no-track", "-b", branch, Remote+"/"+base); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("clone of %s in %s: the remote has no branch %s to start %s from", remote, r.Top, base, branch)
	}
	return r, nil
}

// sameRemote compares two spellings of a remote: a path and its file://
// URL are the same remote.
func sameRemote(a, b string) bool {
	norm := func(s string) string {
		s = strings.TrimSuffix(strings.TrimPrefix(s, "file://"), "/")
		if filepath.IsAbs(s) {
			s = filepath.Clean(s)
		}
		return s
	}
	return norm(a) == norm(b)
}

func (r *Repo) hasRef(ctx context.Context, ref string) bool {
	_, err := r.run(ctx, r.Top, "rev-parse", "--verify", "--quiet", ref)
	return err == nil
}

// Push pushes branch of the checkout to remote (a URL, a path or a remote's
// name), on the branch of the same name there. It never forces: a remote
// branch that moved on is an error to report, not to overwrite.
func (r *Repo) Push(ctx context.Context, remote, branch string) error {
	_, err := r.run(ctx, r.Top, "push", "--quiet", remote, "refs/heads/"+branch+":refs/heads/"+branch)
	return err
}

// Fetch copies branch of remote (a URL or a path) into the checkout's
// branch of the same name, replacing it (the remote is its owner's, the
// local copy only a mirror to merge from), and returns its commit. The
// merge queue's lock is held, so a merge never reads a branch half
// fetched.
func (r *Repo) Fetch(ctx context.Context, remote, branch string) (string, error) {
	unlock, err := r.lock(ctx)
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := r.run(ctx, r.Top, "fetch", "--quiet", "--no-tags", remote, "+refs/heads/"+branch+":refs/heads/"+branch); err != nil {
		return "", err
	}
	out, err := r.run(ctx, r.Top, "rev-parse", "refs/heads/"+branch)
	return strings.TrimSpace(out), err
}

// RemoteURL returns the URL of the checkout's remote name ("" when it has
// none).
func (r *Repo) RemoteURL(ctx context.Context, name string) string {
	out, err := r.run(ctx, r.Top, "remote", "get-url", name)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

// FetchRemote updates the checkout's remote-tracking branches of remote
// name (a teammate's clone: the base as the lead last pushed it).
func (r *Repo) FetchRemote(ctx context.Context, name string) error {
	_, err := r.run(ctx, r.Top, "fetch", "--quiet", name)
	return err
}
