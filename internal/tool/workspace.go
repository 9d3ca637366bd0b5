package tool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// Workspace is the directory an agent works in, plus the additional
// directories it was given (settings' additionalDirectories, --add-dir).
// Every file tool goes through it: paths are resolved with os.Root, so
// absolute paths outside every directory, ".." and symlinks that lead out
// are refused.
type Workspace struct {
	main  dirRoot
	mu    sync.RWMutex
	extra []*dirRoot // additional directories, in the order added
}

// dirRoot is one directory a workspace reaches and the os.Root confining
// access to it.
type dirRoot struct {
	dir   string // absolute, symlinks resolved
	given string // absolute as given, before resolving symlinks
	root  *os.Root
}

func openDirRoot(dir string) (*dirRoot, error) {
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
	return &dirRoot{dir: abs, given: given, root: root}, nil
}

// OpenWorkspace opens dir as a workspace.
func OpenWorkspace(dir string) (*Workspace, error) {
	d, err := openDirRoot(dir)
	if err != nil {
		return nil, err
	}
	return &Workspace{main: *d}, nil
}

// AddDir opens dir as an additional directory: the file tools reach it
// through absolute paths, confined by its own os.Root, as Claude Code's
// additionalDirectories and --add-dir widen what its tools reach. A
// directory already reached (the workspace, one added before, or one
// inside either) adds nothing.
func (w *Workspace) AddDir(dir string) error {
	d, err := openDirRoot(dir)
	if err != nil {
		return fmt.Errorf("additional directory %s: %w", dir, err)
	}
	if fi, err := d.root.Stat("."); err != nil || !fi.IsDir() {
		d.root.Close()
		return fmt.Errorf("additional directory %s: not a directory", dir)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, have := range append([]*dirRoot{&w.main}, w.extra...) {
		if _, ok := within(have.dir, d.dir); ok {
			d.root.Close()
			return nil
		}
	}
	w.extra = append(w.extra, d)
	return nil
}

// Dir is the workspace's absolute directory.
func (w *Workspace) Dir() string { return w.main.dir }

// Dirs are the additional directories, absolute with symlinks resolved,
// in the order they were added.
func (w *Workspace) Dirs() []string {
	w.mu.RLock()
	defer w.mu.RUnlock()
	out := make([]string, len(w.extra))
	for i, d := range w.extra {
		out[i] = d.dir
	}
	return out
}

// Root is the os.Root confining access to the workspace directory (not
// the additional ones: see Locate).
func (w *Workspace) Root() *os.Root { return w.main.root }

// Close releases the workspace's root handles.
func (w *Workspace) Close() error {
	err := w.main.root.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, d := range w.extra {
		d.root.Close()
	}
	w.extra = nil
	return err
}

// Place is where a path a model gave lies: the directory that holds it
// (the workspace or an additional directory) and the path below it.
type Place struct {
	// Rel is the clean path relative to the directory, "." for the
	// directory itself.
	Rel string
	d   *dirRoot
	// Extra is true in an additional directory.
	Extra bool
}

// Root is the os.Root confining access to the place's directory.
func (p Place) Root() *os.Root { return p.d.root }

// Dir is the absolute directory the place lies in.
func (p Place) Dir() string { return p.d.dir }

// Abs is the place's absolute path.
func (p Place) Abs() string { return filepath.Join(p.d.dir, p.Rel) }

// Show is how a path below the place's directory (relative to it, as a
// walk gives it) is shown to the model and to permission rules: relative
// in the workspace, absolute in an additional directory, so that it can
// be given back to any tool.
func (p Place) Show(rel string) string {
	if !p.Extra {
		return rel
	}
	return filepath.Join(p.d.dir, filepath.FromSlash(rel))
}

// Locate maps a path a model gave to the directory that holds it: a
// relative path is below the workspace, an absolute one below the
// workspace or an additional directory. It refuses what Resolve refuses,
// except absolute paths inside an additional directory.
func (w *Workspace) Locate(path string) (Place, error) {
	if err := w.checkPath(path); err != nil {
		return Place{}, err
	}
	if !filepath.IsAbs(path) {
		rel, err := w.Resolve(path)
		return Place{Rel: rel, d: &w.main}, err
	}
	clean := filepath.Clean(path)
	if rel, ok := w.main.holds(clean); ok {
		return Place{Rel: rel, d: &w.main}, nil
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	for _, d := range w.extra {
		if rel, ok := d.holds(clean); ok {
			return Place{Rel: rel, d: d, Extra: true}, nil
		}
	}
	return Place{}, w.outside(path)
}

// holds returns clean, an absolute clean path, relative to d when it is
// d or below it, as written or as given.
func (d *dirRoot) holds(clean string) (string, bool) {
	for _, base := range []string{d.dir, d.given} {
		if rel, ok := within(base, clean); ok {
			return rel, true
		}
	}
	return "", false
}

func (w *Workspace) checkPath(path string) error {
	switch {
	case path == "":
		return fmt.Errorf("%w: the path is empty", ErrBadPath)
	case strings.IndexByte(path, 0) >= 0:
		return fmt.Errorf("%w %q: it contains a NUL byte", ErrBadPath, path)
	case strings.HasPrefix(path, "~"):
		return fmt.Errorf("%w %q: ~ is not expanded here; give a path inside the workspace %s", ErrBadPath, path, w.main.dir)
	}
	return nil
}

// Resolve maps a path a model gave (relative to the workspace, or absolute
// inside it) to a clean path relative to the workspace root, "." for the
// root itself. It refuses, with an error naming the path and the
// workspace, paths that lead out lexically (an absolute path elsewhere,
// ".." past the root, /proc/self/root/...), NUL bytes and "~" (no shell
// expands it here). Symbolic links are not followed here: os.Root refuses
// those that lead out when the path is opened, and Explain turns that
// refusal into the same message. Paths in an additional directory are
// outside for Resolve: Locate reaches them.
//
// Everything else is taken literally: "%2e%2e" and "a\b" are names inside
// the workspace.
func (w *Workspace) Resolve(path string) (string, error) {
	if err := w.checkPath(path); err != nil {
		return "", err
	}
	if filepath.IsAbs(path) {
		if rel, ok := w.main.holds(filepath.Clean(path)); ok {
			return rel, nil
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
	if dirs := w.Dirs(); len(dirs) > 0 {
		return fmt.Errorf("path %q is %w %s and the additional directories %s", path, ErrOutsideWorkspace, w.main.dir, strings.Join(dirs, ", "))
	}
	return fmt.Errorf("path %q is %w %s", path, ErrOutsideWorkspace, w.main.dir)
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
		return fmt.Errorf("path %q is %w %s (through a symbolic link)", path, ErrOutsideWorkspace, w.around(path))
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

// around names the directory a path was confined to, for an escape's
// message.
func (w *Workspace) around(path string) string {
	if p, err := w.Locate(path); err == nil && p.Extra {
		return p.Dir()
	}
	return w.main.dir
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
