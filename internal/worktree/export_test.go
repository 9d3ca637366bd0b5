package worktree

import (
	"context"
	"path/filepath"

	"github.com/gofrs/flock"
)

// SetBeforeAdd sets the hook Add runs before each try of its git worktree
// add (nil: none).
func SetBeforeAdd(f func(top, branch string, try int)) { beforeAdd = f }

// SetBeforeSpare sets the hook run before each spare a Pool adds; its
// error fails the add (nil: none).
func SetBeforeSpare(f func(seq int) error) { beforeSpare = f }

// ReadyAtLeast blocks until n spares are ready, whatever failed meanwhile,
// or ctx ends.
func (p *Pool) ReadyAtLeast(ctx context.Context, n int) error {
	for {
		p.mu.Lock()
		have, ch := p.readyLocked(), p.filled
		p.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// SetRipenMissed sets the hook told of a raw spare its ripen found taken
// (nil: none).
func SetRipenMissed(f func(path string)) { ripenMissed = f }

// HoldQueue takes the repository's merge-queue lock as another process
// would, until release.
func (r *Repo) HoldQueue(ctx context.Context) (release func(), err error) {
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	fl := flock.New(filepath.Join(r.commonDir, "troupe-merge.lock"))
	if err := fl.Lock(); err != nil {
		return nil, err
	}
	return func() { _ = fl.Unlock() }, nil
}
