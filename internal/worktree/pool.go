package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// SpareDir is the folder, inside a team's worktree folder, where a Pool
// keeps its spare worktrees. Member names cannot start with a dot, so it
// never meets a teammate's worktree.
const SpareDir = ".spare"

// DefaultPoolSize is how many spare worktrees a Pool keeps ready at the
// least unless told otherwise: enough for a lead that spawns a few
// teammates in one turn, without doubling a large repository's disk use.
const DefaultPoolSize = 2

// DefaultPoolMax is how many spares a Pool keeps at the most unless told
// otherwise: a lead that spawned a larger burst finds that many ready for
// its next one (each spare is a whole checkout on disk).
const DefaultPoolMax = 8

// BurstGap is the pause between two takes that ends a burst of spawns: a
// lead's spawns in one turn are apart by the spawns' own time, its turns
// by a model call.
const BurstGap = 5 * time.Second

// bursts is how many past bursts size the pool.
const bursts = 3

// Pool keeps spare worktrees of one team ready in the background, detached
// at the base's HEAD, so that a spawn takes one instead of waiting for
// `git worktree add` to write every file of the repository. Taking one moves
// it to the teammate's path and branches it at the base's current HEAD:
// when HEAD moved since the spare was made, git rewrites only the files
// that differ.
//
// The pool keeps as many spares as the largest of the last bursts of
// takes asked for, between its size and its max, and makes up to one per
// two cores (at least two) at once. A take that finds a spare ready starts
// the next ones once its own git commands are done; one that finds none
// waits for one being made rather than start a checkout of its own that
// would compete with it.
//
// A spare's index is refreshed once the clock has left the second its
// files were written in, so that git no longer takes them for "racily
// clean" and re-reads every file at the teammate's first commit. A take
// that cannot wait for that gets the spare as `git worktree add` left it.
//
// Spares are plain worktrees under SpareDir: after a crash they are still
// registered with git and on disk; the next Pool of the team, or Clean,
// removes them, and `git worktree prune` drops any record left behind.
type Pool struct {
	repo     *Repo
	team     string
	dir      string
	size     int
	max      int
	parallel int

	mu         sync.Mutex
	spares     []spare // ready or raw, oldest first
	made       []time.Duration
	making     int // spares being added
	refreshing int // spares whose index is being refreshed
	started    bool
	closed     bool
	hold       bool // making failed: wait for the next take to try again
	lastErr    error
	filled     chan struct{} // closed and replaced each time a spare is added or refreshed, or making one fails
	burst      int           // takes in the current burst
	lastTake   time.Time     // when the last take ended
	past       []int         // sizes of the last bursts before the current
	quiet      *time.Timer   // starts making spares once takes pause

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	wg     sync.WaitGroup
	seq    int
}

// spare is a worktree detached at head; raw until its index is refreshed.
type spare struct {
	path, head string
	raw        bool
	written    time.Time // when its files were checked out (racy git)
}

// NewPool starts keeping at least size spare worktrees for team
// (DefaultPoolSize when size < 1) and at most DefaultPoolMax (or size, if
// larger). Leftovers of an earlier pool of the team (a crash) are removed
// first, in the background. Close stops it and removes its spares.
func NewPool(repo *Repo, team string, size int) *Pool {
	return NewPoolMax(repo, team, size, 0)
}

// NewPoolMax is NewPool with the most spares kept after bursts of spawns
// (DefaultPoolMax when max < 1; never below size).
func NewPoolMax(repo *Repo, team string, size, max int) *Pool {
	if size < 1 {
		size = DefaultPoolSize
	}
	if max < 1 {
		max = DefaultPoolMax
	}
	max = maxInt(max, size)
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{repo: repo, team: team, size: size, max: max, parallel: maxInt(2, runtime.NumCPU()/2),
		dir: filepath.Join(repo.Top, filepath.FromSlash(Dir), team, SpareDir),
		ctx: ctx, cancel: cancel, done: make(chan struct{}), filled: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.removeLeftovers(ctx)
		p.mu.Lock()
		p.started = true
		p.launchLocked()
		p.mu.Unlock()
	}()
	return p
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// Size is how many spares the pool keeps ready at the least.
func (p *Pool) Size() int { return p.size }

// Max is how many spares the pool keeps at the most.
func (p *Pool) Max() int { return p.max }

// Target is how many spares the pool keeps now: the largest recent burst
// of takes, between Size and Max.
func (p *Pool) Target() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.targetLocked()
}

func (p *Pool) targetLocked() int {
	t := maxInt(p.size, p.burst)
	for _, b := range p.past {
		t = maxInt(t, b)
	}
	return min(t, p.max)
}

// Ready is how many spares are ready now (refreshed).
func (p *Pool) Ready() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.readyLocked()
}

func (p *Pool) readyLocked() int {
	n := 0
	for _, sp := range p.spares {
		if !sp.raw {
			n++
		}
	}
	return n
}

// Wait blocks until n spares are ready (at most Target), making one fails, or
// ctx ends.
func (p *Pool) Wait(ctx context.Context, n int) error {
	for {
		p.mu.Lock()
		have, err, ch := p.readyLocked(), p.lastErr, p.filled
		want := min(n, p.targetLocked())
		p.mu.Unlock()
		if have >= want {
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

// signalLocked wakes whoever waits for a spare.
func (p *Pool) signalLocked() {
	close(p.filled)
	p.filled = make(chan struct{})
}

// launchLocked starts making spares until the pool has, or is making, as
// many as its target, a few at once.
func (p *Pool) launchLocked() {
	for p.started && !p.closed && !p.hold &&
		len(p.spares)+p.making+p.refreshing < p.targetLocked() && p.making < p.parallel {
		p.making++
		p.seq++
		seq := p.seq
		p.wg.Add(1)
		go p.makeOne(seq)
	}
}

// makeOne makes one spare: a detached worktree at the base's HEAD, offered
// raw at once, then refreshed after the racy-git window.
func (p *Pool) makeOne(seq int) {
	defer p.wg.Done()
	ctx := p.ctx
	t0 := time.Now()
	sp, err := p.add(ctx, seq)
	p.mu.Lock()
	p.making--
	if err != nil {
		if ctx.Err() == nil {
			// A spare that cannot be made (disk full, a locked index) is
			// tried again on the next take, not in a loop.
			p.lastErr, p.hold = err, true
		}
		p.signalLocked()
		p.mu.Unlock()
		return
	}
	p.spares = append(p.spares, sp)
	p.signalLocked()
	p.launchLocked()
	p.mu.Unlock()
	p.ripen(sp, t0)
}

// ripen refreshes a raw spare's index once the racy-git window its files
// were written in has passed, unless it is taken meanwhile. t0, when
// set, is when making it began (Made).
func (p *Pool) ripen(sp spare, t0 time.Time) {
	ctx := p.ctx
	// Git takes a file whose mtime is not older than the index's as
	// racily clean and re-reads it at every status and commit until an
	// index written later records it: wait for the clock to leave the
	// second the checkout wrote in (git without nanosecond stamps compares
	// seconds), then let git refresh the index.
	wait := sp.written.Truncate(time.Second).Add(time.Second + 20*time.Millisecond).Sub(time.Now())
	select {
	case <-ctx.Done():
		return // Close removes the spares still listed
	case <-time.After(wait):
	}
	p.mu.Lock()
	i := p.index(sp.path)
	if i < 0 || p.closed || !p.spares[i].raw {
		p.mu.Unlock()
		if i < 0 && ripenMissed != nil {
			ripenMissed(sp.path)
		}
		return // taken raw, refreshed by another ripen, or Close removes it
	}
	p.spares = append(p.spares[:i], p.spares[i+1:]...)
	p.refreshing++
	p.mu.Unlock()
	err := p.refresh(ctx, sp.path)
	p.mu.Lock()
	p.refreshing--
	if err != nil || p.closed {
		if err != nil && ctx.Err() == nil {
			p.lastErr, p.hold = err, true
		}
		p.signalLocked()
		p.mu.Unlock()
		p.discard(sp.path)
		return
	}
	sp.raw = false
	p.spares = append(p.spares, sp)
	if !t0.IsZero() {
		p.made = append(p.made, time.Since(t0))
	}
	if !p.hold {
		// While making another failed, Wait reports that failure: the
		// pool makes no more until the next take.
		p.lastErr = nil
	}
	p.signalLocked()
	p.launchLocked()
	p.mu.Unlock()
}

func (p *Pool) index(path string) int {
	for i, sp := range p.spares {
		if sp.path == path {
			return i
		}
	}
	return -1
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

// ripenMissed, when set (by tests), is told of a raw spare its ripen
// found taken.
var ripenMissed func(path string)

// beforeSpare, when set (by tests), runs before each spare is added; an
// error is the add's.
var beforeSpare func(seq int) error

// add checks out one spare, detached at the base's HEAD.
func (p *Pool) add(ctx context.Context, seq int) (spare, error) {
	if beforeSpare != nil {
		if err := beforeSpare(seq); err != nil {
			return spare{}, err
		}
	}
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
	path := filepath.Join(p.dir, fmt.Sprintf("%d-%d", os.Getpid(), seq))
	// No queue lock: git marks a worktree being added as locked, so a
	// prune meanwhile leaves it alone, and merges can go on.
	if _, err := p.repo.run(ctx, p.repo.Top, "worktree", "add", "--quiet", "--detach", path, head); err != nil {
		p.discard(path)
		return spare{}, err
	}
	return spare{path: path, head: head, raw: true, written: time.Now()}, nil
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

// get takes a spare for a spawn: a ready one, else a raw one, else the
// next one being made; ok is false when none is coming. It counts the
// take towards the current burst and starts making more.
func (p *Pool) get(ctx context.Context) (spare, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.lastTake.IsZero() && time.Since(p.lastTake) > BurstGap {
		p.past = append(p.past, p.burst)
		if len(p.past) > bursts {
			p.past = p.past[1:]
		}
		p.burst = 0
	}
	p.burst++
	p.hold = false
	for {
		if p.closed {
			return spare{}, false
		}
		i := -1
		for j, sp := range p.spares {
			if !sp.raw {
				i = j
				break
			}
			if i < 0 {
				i = j
			}
		}
		if i >= 0 {
			// took starts the next spares, once this take's git
			// commands no longer compete with them.
			sp := p.spares[i]
			p.spares = append(p.spares[:i], p.spares[i+1:]...)
			return sp, true
		}
		p.launchLocked()
		if p.making+p.refreshing == 0 {
			return spare{}, false
		}
		ch := p.filled
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			p.mu.Lock()
			return spare{}, false
		case <-ch:
		}
		p.mu.Lock()
	}
}

// QuietPeriod is how long a pool with spares still ready waits after a
// take before it makes more: the spawns of a burst come one after another,
// and a checkout made meanwhile would compete with them for the CPU.
const QuietPeriod = 500 * time.Millisecond

// lowWater is how few ready spares make a take start the next ones at
// once: the burst's next spawns would find none otherwise.
const lowWater = 2

// took ends a take: the burst's clock runs from here, and the pool makes
// spares up to its target, at once when few are left, else once the
// takes pause.
func (p *Pool) took() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastTake = time.Now()
	if p.readyLocked() < lowWater {
		p.launchLocked()
		return
	}
	if p.quiet == nil {
		p.quiet = time.AfterFunc(QuietPeriod, func() {
			p.mu.Lock()
			p.launchLocked()
			p.mu.Unlock()
		})
		return
	}
	p.quiet.Reset(QuietPeriod)
}

// Take makes a teammate's worktree out of a spare: the spare is moved to
// the member's path and put on its branch at head (the base's HEAD, which
// the caller has checked). It returns ErrPoolEmpty when no spare is ready
// or coming, and when the member's path exists already (a resume), for
// Add to handle. The pool makes more spares meanwhile.
func (p *Pool) Take(ctx context.Context, member, head string) (Worktree, error) {
	wt := Worktree{Path: p.repo.Path(p.team, member), Branch: Branch(p.team, member)}
	if _, err := os.Lstat(wt.Path); err == nil {
		return wt, ErrPoolEmpty
	}
	defer p.took()
	sp, ok := p.get(ctx)
	if !ok {
		return wt, ErrPoolEmpty
	}
	created, err := p.place(ctx, member, wt, sp)
	if err != nil {
		return wt, err
	}
	if created && sp.head != head {
		return wt, p.moveTo(ctx, wt, head)
	}
	return wt, nil
}

// TakeReady is a spawn from the pool: it checks that the base can be
// branched (Repo.ReadyHead) while it moves a spare to the member's path
// and branches it, so that a spawn waits for the longer of the two, not
// their sum. A base that cannot be branched is the check's error, and
// what the take did is undone. ErrPoolEmpty (the check passed) says no
// spare was ready or coming, or the member's path exists: Add makes it.
func (p *Pool) TakeReady(ctx context.Context, member string) (Worktree, error) {
	wt := Worktree{Path: p.repo.Path(p.team, member), Branch: Branch(p.team, member)}
	type checked struct {
		head string
		err  error
	}
	ch := make(chan checked, 1)
	go func() {
		h, err := p.repo.ReadyHead(ctx)
		ch <- checked{h, err}
	}()
	if _, err := os.Lstat(wt.Path); err == nil {
		if c := <-ch; c.err != nil {
			return wt, c.err
		}
		return wt, ErrPoolEmpty
	}
	defer p.took()
	sp, ok := p.get(ctx)
	if !ok {
		if c := <-ch; c.err != nil {
			return wt, c.err
		}
		return wt, ErrPoolEmpty
	}
	created, err := p.place(ctx, member, wt, sp)
	c := <-ch
	switch {
	case c.err != nil && err == nil:
		p.undo(wt, created)
		return wt, c.err
	case c.err != nil:
		return wt, c.err
	case err != nil:
		// A spare that cannot be used costs nothing but the slow path.
		return wt, fmt.Errorf("%w: %v", ErrPoolEmpty, err)
	case created && sp.head != c.head:
		if err := p.moveTo(ctx, wt, c.head); err != nil {
			p.undo(wt, created)
			return wt, fmt.Errorf("%w: %v", ErrPoolEmpty, err)
		}
	}
	return wt, nil
}

// place moves spare sp to wt's path and puts it on wt's branch: a new
// branch at the spare's commit (created), or the member's branch as it is
// when it outlived an earlier worktree. On an error the spare is given
// back or removed.
func (p *Pool) place(ctx context.Context, member string, wt Worktree, sp spare) (created bool, err error) {
	unlock, err := p.repo.lock(ctx)
	if err != nil {
		p.giveBack(sp)
		return false, err
	}
	defer unlock()
	// Prune may not drop the spare between the rename and git's record of
	// it: both run under the queue lock.
	if _, err := p.repo.run(ctx, p.repo.Top, "worktree", "move", sp.path, wt.Path); err != nil {
		p.giveBack(sp)
		return false, err
	}
	fail := func(err error) (bool, error) {
		_, _ = p.repo.run(ctx, p.repo.Top, "worktree", "remove", "--force", "--force", wt.Path)
		return false, err
	}
	// The spare's files are its commit's: the branch is made and checked
	// out as refs alone, without git comparing every file as checkout
	// would. The empty old value refuses a branch that exists already.
	_, err = p.repo.run(ctx, wt.Path, "update-ref", "-m", "troupe: branch for "+member, "refs/heads/"+wt.Branch, sp.head, "")
	if err == nil {
		if _, err := p.repo.run(ctx, wt.Path, "symbolic-ref", "HEAD", "refs/heads/"+wt.Branch); err != nil {
			_, _ = p.repo.run(ctx, p.repo.Top, "update-ref", "-d", "refs/heads/"+wt.Branch, sp.head)
			return fail(err)
		}
		return true, nil
	}
	if !strings.Contains(err.Error(), "exists") {
		return fail(err)
	}
	// The branch outlived an earlier worktree of the member: it is
	// checked out as it is, its commits kept.
	if _, err := p.repo.run(ctx, wt.Path, "checkout", "--quiet", wt.Branch); err != nil {
		return fail(err)
	}
	return false, nil
}

// moveTo puts a branch just made at a spare's commit on head instead (the
// base's HEAD moved since the spare was made): git rewrites only the files
// that differ.
func (p *Pool) moveTo(ctx context.Context, wt Worktree, head string) error {
	_, err := p.repo.run(ctx, wt.Path, "checkout", "--quiet", "-B", wt.Branch, head)
	return err
}

// undo removes a worktree a take made, and its branch when the take made
// it.
func (p *Pool) undo(wt Worktree, created bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	unlock, err := p.repo.lock(ctx)
	if err == nil {
		defer unlock()
	}
	_, _ = p.repo.run(ctx, p.repo.Top, "worktree", "remove", "--force", "--force", wt.Path)
	_ = os.RemoveAll(wt.Path)
	if created {
		_, _ = p.repo.run(ctx, p.repo.Top, "branch", "-D", wt.Branch)
	}
	_, _ = p.repo.run(ctx, p.repo.Top, "worktree", "prune")
	_ = os.Remove(filepath.Dir(wt.Path))
}

// giveBack returns a spare a take could not use. A raw one is ripened
// again: the goroutine that made it stopped when it was taken, and a
// spare left raw would never count as ready.
func (p *Pool) giveBack(sp spare) {
	p.mu.Lock()
	closed := p.closed
	if !closed {
		p.spares = append(p.spares, sp)
		p.signalLocked()
		if sp.raw {
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.ripen(sp, time.Time{})
			}()
		}
	}
	p.mu.Unlock()
	if closed {
		p.discard(sp.path)
	}
}

// Close stops making spares and removes the ready ones, then prunes git's
// records. It waits for the spares being made to stop.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.done
		p.wg.Wait()
		return nil
	}
	p.closed = true
	if p.quiet != nil {
		p.quiet.Stop()
	}
	p.mu.Unlock()
	p.cancel()
	<-p.done
	p.wg.Wait()
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
