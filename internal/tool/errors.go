package tool

import "errors"

// Errors the workspace and the jobs return; match them with errors.Is.
var (
	// ErrOutsideWorkspace is returned for a path that leads out of the
	// workspace: absolute elsewhere, ".." past the root, or through a
	// symbolic link.
	ErrOutsideWorkspace = errors.New("outside the workspace")
	// ErrBadPath is returned for a path the workspace will not interpret:
	// a NUL byte, a "~" that a shell would expand, an empty path.
	ErrBadPath = errors.New("bad path")
	// ErrNoJob is returned for a job id that is not known.
	ErrNoJob = errors.New("no such background job")
)
