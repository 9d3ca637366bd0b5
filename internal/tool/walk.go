package tool

import (
	"context"
	"io/fs"
	"os"
)

// skipDirs are never searched: version control internals and troupe's own
// state.
var skipDirs = map[string]bool{".git": true, ".troupe": true}

// walk calls fn for every entry under the root-relative directory base
// (base itself excluded), in lexical order. Symbolic links are reported
// but never followed, so that a link cannot lead the walk out of the
// workspace or around in a loop; base itself may be a link to a directory
// inside the root, which os.Root resolves and confines.
func walk(ctx context.Context, root *os.Root, base string, fn func(rel string, d fs.DirEntry) error) error {
	fsys := root.FS()
	return fs.WalkDir(fsys, base, func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			if rel == base {
				return err
			}
			return nil // an unreadable subdirectory is skipped, not fatal
		}
		if rel == base {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() && skipDirs[d.Name()] {
			return fs.SkipDir
		}
		return fn(rel, d)
	})
}
