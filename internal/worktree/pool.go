package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// SpareDir is the folder, inside a team's worktree folder, where a Pool
// keeps its spare worktrees. Member names cannot start with a dot, so it
// never meets a teammate's worktree.
const SpareDir = ".spare"

// DefaultPoolSize is how many spare worktrees a Pool keeps ready unless
// told otherwise: enough for a lead that spawns a few teammates in one
// turn, without doubling a large repository's disk use.
const DefaultPoolSize = 2

// Pool keeps spare worktrees of one team ready in the background, detached
// at the base's HEAD, so that a spawn takes one instead of waiting for
// `git worktree add` to write every file of the repository. Taking one moves
// it to the teammate's path and branches it at the base's current HEAD:
// when HEAD moved since the spare was made, git rewrites only the files
// that differ.
//
// A spare's index is refreshed once the clock has left the second its
// files were written in, so that git no longer takes them for "racily
// clean" and re-reads every file at the teammate's first commit.
//
// Spares are plain worktrees under SpareDir: after a crash they are still
// registered with git and on disk; the next Pool of the team, or Clean,
// removes them, and `git worktree prune` drops any record left behind.
type Pool struct {
	repo *Repo
	team string
	dir  string
	size int

	mu      sync.Mutex
	spares  []spare // ready, oldest first
	made    []time.Duration
	making  bool
	closed  bool
	lastErr error
	filled  chan struct{} // closed and replaced each time a spare is ready or making one fails

	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	seq    int
}

// spare is a ready worktree and the commit it is detached at.
type spare struct{ path, head string }

// NewPool starts keeping size spare worktrees for team (DefaultPoolSize
// when size < 1). Leftovers of an earlier pool of the team (a crash) are
// removed first, in the background. Close stops it and removes its spares.
func NewPool(repo *Repo, team string, size int) *Pool {
	if size < 1 {
		size = DefaultPoolSize
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{repo: repo, team: team, size: size,
		dir:  filepath.Join(repo.Top, filepath.FromSlash(Dir), team, SpareDir),
		kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{}), filled: make(chan struct{})}
	go p.loop(ctx)
	return p
}

// Size is how many spares the pool keeps ready.
func (p *Pool) Size() int { return p.size }

// Ready is how many spares are ready now.
func (p *Pool) Ready() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.spares)
}

// Wait blocks until n spares are ready (at most Size), making one fails, or
// ctx ends.
func (p *Pool) Wait(ctx context.Context, n int) error {
	n = min(n, p.size)
	for {
		p.mu.Lock()
		have, err, ch := len(p.spares), p.lastErr, p.filled
		p.mu.Unlock()
		if have >= n {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

func (p *Pool) loop(ctx context.Context) {
	defer close(p.done)
	p.removeLeftovers(ctx)
	for {
		p.mu.Lock()
		need := !p.closed && len(p.spares) < p.size
		p.making = need
		p.mu.Unlock()
		if need {
			t0 := time.Now()
			sp, err := p.make(ctx)
			p.mu.Lock()
			if err == nil {
				p.spares = append(p.spares, sp)
				p.made = append(p.made, time.Since(t0))
				p.lastErr = nil
			} else if ctx.Err() == nil {
				p.lastErr = err
			}
			close(p.filled)
			p.filled = make(chan struct{})
			p.making = false
			p.mu.Unlock()
			if err == nil {
				continue
			}
			if ctx.Err() != nil {
				return
			}
			// A spare that cannot be made (disk full, a locked index) is
			// tried again on the next take, not in a loop.
		}
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		}
	}
}

// removeLeftovers removes spares an earlier process of the team left
// behind: nothing knows whether they were finished.
func (p *Pool) removeLeftovers(ctx context.Context) { _ = p.repo.RemoveSpares(ctx, p.team) }

// RemoveSpares removes the spare worktrees a Pool of team left on disk (a
// crash, a kill), then prunes git's records. A live Pool of the team must
// not run meanwhile.
func (r *Repo) RemoveSpares(ctx context.Context, team string) error {
	dir := filepath.Join(r.Top, filepath.FromSlash(Dir), team, SpareDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, e := range ents {
		_, _ = r.run(ctx, r.Top, "worktree", "remove", "--force", "--force", filepath.Join(dir, e.Name()))
		_ = os.RemoveAll(filepath.Join(dir, e.Name()))
	}
	_ = os.Remove(dir)
	_ = os.Remove(filepath.Dir(dir))
	return r.Prune(ctx)
}

// Made returns how long each spare made so far took to prepare (`git
// worktree add`, the racy-git wait, the refresh), in order.
func (p *Pool) Made() []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Duration(nil), p.made...)
}

// make prepares one spare: a detached worktree at the base's HEAD whose
// index is refreshed after the racy-git window.
func (p *Pool) make(ctx context.Context) (spare, error) {
	head, err := p.repo.Head(ctx)
	if err != nil {
		return spare{}, err
	}
	if err := p.repo.exclude(ctx); err != nil {
		return spare{}, err
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return spare{}, err
	}
	p.seq++
	path := filepath.Join(p.dir, fmt.Sprintf("%d-%d", os.Getpid(), p.seq))
	// No queue lock: git marks a worktree being added as locked, so a
	// prune meanwhile leaves it alone, and merges can go on.
	if _, err := p.repo.run(ctx, p.repo.Top, "worktree", "add", "--quiet", "--detach", path, head); err != nil {
		p.discard(path)
		return spare{}, err
	}
	written := time.Now()
	// Git takes a file whose mtime is not older than the index's as
	// racily clean and re-reads it at every status and commit until an
	// index written later records it: wait for the clock to leave the
	// second the checkout wrote in (git without nanosecond stamps compares
	// seconds), then let git refresh the index.
	wait := written.Truncate(time.Second).Add(time.Second + 20*time.Millisecond).Sub(time.Now())
	select {
	case <-ctx.Done():
		p.discard(path)
		return spare{}, ctx.Err()
	case <-time.After(wait):
	}
	if err := p.refresh(ctx, path); err != nil {
		p.discard(path)
		return spare{}, err
	}
	return spare{path, head}, nil
}

// refresh lets git re-check the spare's files and write its index anew,
// stamped later than every file.
func (p *Pool) refresh(ctx context.Context, path string) error {
	_, err := p.repo.run(ctx, path, "update-index", "-q", "--refresh")
	return err
}

func (p *Pool) discard(path string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _ = p.repo.run(ctx, p.repo.Top, "worktree", "remove", "--force", "--force", path)
	_ = os.RemoveAll(path)
}

// ErrPoolEmpty says the pool had no spare ready.
var ErrPoolEmpty = errors.New("no spare worktree ready")

// Take makes a teammate's worktree out of a spare: the spare is moved to
// the member's path and put on its branch at head (the base's HEAD, which
// the caller has checked). It returns ErrPoolEmpty when no spare is ready
// and the member's path or branch exists already (a resume), for Add to
// handle. The pool starts making a new spare once it is done.
func (p *Pool) Take(ctx context.Context, member, head string) (Worktree, error) {
	wt := Worktree{Path: p.repo.Path(p.team, member), Branch: Branch(p.team, member)}
	if _, err := os.Lstat(wt.Path); err == nil {
		return wt, ErrPoolEmpty
	}
	p.mu.Lock()
	if p.closed || len(p.spares) == 0 {
		p.mu.Unlock()
		return wt, ErrPoolEmpty
	}
	sp := p.spares[0]
	p.spares = p.spares[1:]
	p.mu.Unlock()
	// The next spare is started once this spawn's git commands are done,
	// not while they run.
	defer p.refill()

	unlock, err := p.repo.lock(ctx)
	if err != nil {
		p.giveBack(sp)
		return wt, err
	}
	defer unlock()
	// Prune may not drop the spare between the rename and git's record of
	// it: both run under the queue lock.
	if _, err := p.repo.run(ctx, p.repo.Top, "worktree", "move", sp.path, wt.Path); err != nil {
		p.giveBack(sp)
		return wt, err
	}
	fail := func(err error) (Worktree, error) {
		_, _ = p.repo.run(ctx, p.repo.Top, "worktree", "remove", "--force", wt.Path)
		return wt, err
	}
	if sp.head == head {
		// HEAD has not moved since the spare was made: its files are
		// right, so the branch is made and checked out as refs alone,
		// without git comparing every file as checkout would. The empty
		// old value refuses a branch that exists already.
		_, err := p.repo.run(ctx, wt.Path, "update-ref", "-m", "troupe: branch for "+member, "refs/heads/"+wt.Branch, head, "")
		if err == nil {
			if _, err := p.repo.run(ctx, wt.Path, "symbolic-ref", "HEAD", "refs/heads/"+wt.Branch); err != nil {
				return fail(err)
			}
			return wt, nil
		}
	} else if _, err := p.repo.run(ctx, wt.Path, "checkout", "--quiet", "-b", wt.Branch, head); err == nil {
		// HEAD moved: git rewrites the files that differ.
		return wt, nil
	} else if !strings.Contains(err.Error(), "already exists") {
		return fail(err)
	}
	// The branch outlived an earlier worktree of the member: it is
	// checked out as it is, its commits kept.
	if _, err := p.repo.run(ctx, wt.Path, "checkout", "--quiet", wt.Branch); err != nil {
		return fail(err)
	}
	return wt, nil
}

func (p *Pool) giveBack(sp spare) {
	p.mu.Lock()
	closed := p.closed
	if !closed {
		p.spares = append(p.spares, sp)
	}
	p.mu.Unlock()
	if closed {
		p.discard(sp.path)
	}
}

func (p *Pool) refill() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Close stops making spares and removes the ready ones, then prunes git's
// records. It waits for a spare being made to stop.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.done
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	<-p.done
	p.mu.Lock()
	spares := p.spares
	p.spares = nil
	p.mu.Unlock()
	for _, sp := range spares {
		p.discard(sp.path)
	}
	_ = os.Remove(p.dir)
	_ = os.Remove(filepath.Dir(p.dir))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return p.repo.Prune(ctx)
}
