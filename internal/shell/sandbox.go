package shell

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Sandbox confines a command with bubblewrap: the bwrap binary of the
// Debian package of that name, run, not reimplemented. Inside it the whole
// filesystem is read-only except the Writable directories; the Protected
// paths stay read-only within them; the Hidden paths show as empty; /tmp is
// a private, empty tmpfs; the command has its own process, IPC and, unless
// Network is set, network namespaces; and every process it starts dies
// with it, including one that called setsid, since they all live in its
// pid namespace.
//
// It follows Claude Code's sandbox: writes go to the working directory
// only, reads reach the whole machine except denied paths. Claude Code
// filters the network by domain through a proxy; here the network is on
// or off.
type Sandbox struct {
	// Writable are the directories the command may write (the workspace
	// or a teammate's worktree); empty means the command's Dir.
	Writable []string
	// Protected are paths kept read-only even inside a Writable directory:
	// ProtectedPaths lists troupe's own, callers add the hook scripts and
	// settings files they read. A missing path is protected through its
	// closest existing parent when that parent is below a Writable
	// directory; a missing path right in a Writable directory (a
	// workspace without .mcp.json) cannot be, short of leaving an empty
	// file behind, and is left to the after-the-fact check.
	Protected []string
	// Hidden are paths the command cannot read: an empty directory or an
	// empty file stands in their place (HiddenPaths lists the usual ones).
	// Missing ones need nothing.
	Hidden []string
	// Network lets the command reach the network.
	Network bool
	// Bwrap is the bubblewrap binary; empty means bwrap on PATH.
	Bwrap string
}

// ProtectedPaths are troupe's own files under a workspace or worktree
// root, which no sandboxed command may write: the state directory, the
// project settings, git's hooks and configuration, the MCP servers' file.
func ProtectedPaths(root string) []string {
	return []string{
		filepath.Join(root, ".troupe"),
		filepath.Join(root, ".claude", "settings.json"),
		filepath.Join(root, ".claude", "settings.local.json"),
		filepath.Join(root, ".git", "hooks"),
		filepath.Join(root, ".git", "config"),
		filepath.Join(root, ".mcp.json"),
	}
}

// HiddenPaths are the places under home that hold credentials or troupe's
// and Claude Code's own configuration: a sandboxed command never reads
// them. Callers add the directory of the team keys.
func HiddenPaths(home string) []string {
	if home == "" {
		return nil
	}
	var out []string
	for _, p := range []string{
		".config/troupe", ".claude", ".claude.json", ".ssh", ".aws", ".gnupg", ".netrc",
		".git-credentials", ".config/gh", ".config/gcloud", ".docker/config.json", ".kube",
	} {
		out = append(out, filepath.Join(home, p))
	}
	return out
}

// ErrNoSandbox is why a sandbox was asked for and cannot be had.
var ErrNoSandbox = errors.New("sandbox unavailable")

var sandboxChecks sync.Map // bwrap path -> error (nil when it works)

// CheckSandbox reports whether commands can run in s here: bwrap must be
// installed and able to create its namespaces (unprivileged user
// namespaces, or root). The answer is kept for the process.
func CheckSandbox(ctx context.Context, s *Sandbox) error {
	bwrap, err := s.binary()
	if err != nil {
		return err
	}
	if v, ok := sandboxChecks.Load(bwrap); ok {
		if v == nil {
			return nil
		}
		return v.(error)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-net",
		"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--", "true")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled) {
			return ctx.Err() // not an answer about bwrap
		}
		err = fmt.Errorf("%w: %s cannot create its namespaces here (user namespaces disabled?): %v: %s",
			ErrNoSandbox, bwrap, err, strings.TrimSpace(stderr.String()))
		sandboxChecks.Store(bwrap, err)
		return err
	}
	sandboxChecks.Store(bwrap, nil)
	return nil
}

func (s *Sandbox) binary() (string, error) {
	name := s.Bwrap
	if name == "" {
		name = "bwrap"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%w: bubblewrap is not installed (%v); install the bubblewrap package, or run without the sandbox", ErrNoSandbox, err)
	}
	return p, nil
}

// argv is the bwrap command line that runs command in dir inside s.
func (s *Sandbox) argv(bwrap, dir, command string) []string {
	a := []string{bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc"}
	if !s.Network {
		a = append(a, "--unshare-net")
	}
	// Later mounts cover earlier ones: the read-only root first, then the
	// writable directories (which may lie in /tmp), then the protected
	// and hidden paths within them.
	a = append(a, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp")
	writable := s.Writable
	if len(writable) == 0 && dir != "" {
		writable = []string{dir}
	}
	var roots []string
	for _, w := range writable {
		if r, err := filepath.EvalSymlinks(w); err == nil {
			roots = append(roots, r)
			a = append(a, "--bind", r, r)
		}
	}
	for _, p := range s.Protected {
		if r, ok := protectTarget(p, roots); ok {
			a = append(a, "--ro-bind", r, r)
		}
	}
	for _, h := range s.Hidden {
		r, err := filepath.EvalSymlinks(h)
		if err != nil {
			continue
		}
		fi, err := os.Stat(r)
		switch {
		case err != nil:
		case fi.IsDir():
			a = append(a, "--tmpfs", r)
		default:
			// The data of fd 3, an empty pipe (see emptyFD); binding
			// /dev/null would not do, as binds are mounted nodev.
			a = append(a, "--ro-bind-data", "3", r)
		}
	}
	if dir != "" {
		a = append(a, "--chdir", dir)
	}
	return append(a, "--", "bash", "-c", command)
}

// emptyFD returns the read end of a pipe whose write end is closed: every
// read of it is an empty file, which bwrap puts in place of a hidden file.
func emptyFD() (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	w.Close()
	return r, nil
}

// protectTarget is what to bind read-only to protect p: p itself when it
// exists, else its closest existing parent when that lies strictly below
// one of the writable roots. Outside the roots everything is read-only
// already.
func protectTarget(p string, roots []string) (string, bool) {
	p = filepath.Clean(p)
	for cur := p; ; cur = filepath.Dir(cur) {
		r, err := filepath.EvalSymlinks(cur)
		if err == nil {
			for _, root := range roots {
				if r == root {
					return "", false // cannot protect the root itself
				}
				if strings.HasPrefix(r, root+string(filepath.Separator)) {
					return r, true
				}
			}
			return "", false
		}
		if cur == filepath.Dir(cur) {
			return "", false
		}
	}
}
