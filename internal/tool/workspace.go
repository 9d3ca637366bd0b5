package tool

import (
	"os"
	"path/filepath"
)

// Workspace is the directory an agent works in. Every file tool goes through
// it: paths are resolved with os.Root, so absolute paths outside the
// directory, ".." and symlinks that lead out are refused.
type Workspace struct {
	dir  string
	root *os.Root
}

// OpenWorkspace opens dir as a workspace.
func OpenWorkspace(dir string) (*Workspace, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, err
	}
	return &Workspace{dir: abs, root: root}, nil
}

// Dir is the workspace's absolute directory.
func (w *Workspace) Dir() string { return w.dir }

// Root is the os.Root confining access to the workspace.
func (w *Workspace) Root() *os.Root { return w.root }

// Close releases the workspace's root handle.
func (w *Workspace) Close() error { return w.root.Close() }
