package tool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Workspace is the directory an agent works in. Every file tool goes through
// it: paths are resolved with os.Root, so absolute paths outside the
// directory, ".." and symlinks that lead out are refused.
type Workspace struct {
	dir   string // absolute, symlinks resolved
	given string // absolute as given, before resolving symlinks
	root  *os.Root
}

// OpenWorkspace opens dir as a workspace.
func OpenWorkspace(dir string) (*Workspace, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	given := abs
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, err
	}
	return &Workspace{dir: abs, given: given, root: root}, nil
}

// Dir is the workspace's absolute directory.
func (w *Workspace) Dir() string { return w.dir }

// Root is the os.Root confining access to the workspace.
func (w *Workspace) Root() *os.Root { return w.root }

// Close releases the workspace's root handle.
func (w *Workspace) Close() error { return w.root.Close() }

// Resolve maps a path a model gave (relative to the workspace, or absolute
// inside it) to a clean path relative to the workspace root, "." for the
// root itself. It refuses, with an error naming the path and the
// workspace, paths that lead out lexically (an absolute path elsewhere,
// ".." past the root, /proc/self/root/...), NUL bytes and "~" (no shell
// expands it here). Symbolic links are not followed here: os.Root refuses
// those that lead out when the path is opened, and Explain turns that
// refusal into the same message.
//
// Everything else is taken literally: "%2e%2e" and "a\b" are names inside
// the workspace.
func (w *Workspace) Resolve(path string) (string, error) {
	switch {
	case path == "":
		return "", fmt.Errorf("%w: the path is empty", ErrBadPath)
	case strings.IndexByte(path, 0) >= 0:
		return "", fmt.Errorf("%w %q: it contains a NUL byte", ErrBadPath, path)
	case strings.HasPrefix(path, "~"):
		return "", fmt.Errorf("%w %q: ~ is not expanded here; give a path inside the workspace %s", ErrBadPath, path, w.dir)
	}
	if filepath.IsAbs(path) {
		clean := filepath.Clean(path)
		for _, base := range []string{w.dir, w.given} {
			if rel, ok := within(base, clean); ok {
				return rel, nil
			}
		}
		return "", w.outside(path)
	}
	clean := filepath.Clean(path)
	if clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", w.outside(path)
	}
	return clean, nil
}

// within returns path relative to base when path is base or below it.
func within(base, path string) (string, bool) {
	if path == base {
		return ".", true
	}
	prefix := base
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	if rel, ok := strings.CutPrefix(path, prefix); ok {
		return rel, true
	}
	return "", false
}

func (w *Workspace) outside(path string) error {
	return fmt.Errorf("path %q is %w %s", path, ErrOutsideWorkspace, w.dir)
}

// Explain rewrites an error from an os.Root operation on path for the
// model: an escape through a symbolic link becomes ErrOutsideWorkspace,
// and the usual failures say what is wrong with the path as it was given.
func (w *Workspace) Explain(path string, err error) error {
	if err == nil {
		return nil
	}
	var named *namedError
	switch {
	case errors.Is(err, ErrOutsideWorkspace), errors.Is(err, ErrBadPath), errors.As(err, &named):
		return err
	case isEscape(err):
		return fmt.Errorf("path %q is %w %s (through a symbolic link)", path, ErrOutsideWorkspace, w.dir)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s does not exist", quote(path))
	case errors.Is(err, syscall.ELOOP):
		return fmt.Errorf("%s: too many levels of symbolic links", quote(path))
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%s: a component of the path is not a directory", quote(path))
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s: permission denied", quote(path))
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %s %v", quote(path), pe.Op, pe.Err)
	}
	return fmt.Errorf("%s: %v", quote(path), err)
}

func quote(path string) string { return fmt.Sprintf("%q", path) }

// isEscape recognises os.Root's refusal of a path that leaves the root. The
// standard library does not export that error, so its text is matched.
func isEscape(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}

// namedError is an error whose message already names the path; Explain
// leaves it as it is.
type namedError struct{ msg string }

func (e *namedError) Error() string { return e.msg }

func namedErrorf(format string, args ...any) error {
	return &namedError{fmt.Sprintf(format, args...)}
}
