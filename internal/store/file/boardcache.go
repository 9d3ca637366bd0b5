package file

import (
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
)

// The board's version is the size of tasks/.version: every commit appends
// one byte to it under the board lock before it changes any task file. A
// List is then served from the last scan of the board while the version
// (and the tasks directory) are what they were at that scan: one stat of
// each instead of a stat (or a parse) per task and the exclusive board
// lock, for every idle member after every change.
//
// The bump comes before the change, so a reader that still sees the old
// version reads before a change that has not returned yet; a writer killed
// between the bump and its change leaves the caches invalid, never stale,
// and whoever takes the lock next finishes or drops the change before it
// scans. The file only grows (a byte per change); it carries no state a
// crash could lose: the caches it guards live in memory.
//
// A task file edited in place by hand changes neither; the cache is
// therefore trusted for at most boardCacheTTL, after which the next List
// scans again (cheaply: unchanged files keep their parse, see taskCache).
const boardCacheTTL = time.Second

// boardStamp identifies one version of a board.
type boardStamp struct {
	ver fs.FileInfo // tasks/.version, nil while there is none
	dir fs.FileInfo // the tasks directory: files made or removed by hand
}

func (a boardStamp) same(b boardStamp) bool {
	if (a.ver == nil) != (b.ver == nil) || a.dir == nil || b.dir == nil {
		return false
	}
	if a.ver != nil && !sameVersion(a.ver, b.ver) {
		return false
	}
	return sameVersion(a.dir, b.dir)
}

// boardSnap is one scan of a board: its tasks, as List returns them.
type boardSnap struct {
	stamp boardStamp
	at    time.Time
	tasks []store.Task
}

func (b *tasks) versionFile() string { return b.t.path("tasks", ".version") }

// stamp returns the board's current version, ok false when it cannot be
// told (no tasks directory).
func (b *tasks) stamp() (boardStamp, bool) {
	var st boardStamp
	dir, err := os.Stat(b.dir())
	if err != nil {
		return st, false
	}
	st.dir = dir
	ver, err := os.Stat(b.versionFile())
	switch {
	case err == nil:
		st.ver = ver
	case !errors.Is(err, fs.ErrNotExist):
		return st, false
	}
	return st, true
}

// bump moves the board to a new version; the caller holds the board lock
// and is about to change the board.
func (b *tasks) bump() error {
	f, err := os.OpenFile(b.versionFile(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte{'\n'})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// cached returns a copy of the board as last scanned, if st is still its
// version and the scan is recent enough.
func (b *tasks) cached(st boardStamp) ([]store.Task, bool) {
	s := b.t.s
	s.mu.Lock()
	c := s.boards[b.t.key]
	s.mu.Unlock()
	if c == nil || !c.stamp.same(st) || time.Since(c.at) > boardCacheTTL {
		return nil, false
	}
	out := make([]store.Task, len(c.tasks))
	for i := range c.tasks {
		out[i] = copyTask(c.tasks[i])
	}
	return out, true
}

// keep records tasks (which the caller keeps using) as the board at st.
func (b *tasks) keep(st boardStamp, tasks []store.Task) {
	c := &boardSnap{stamp: st, at: time.Now(), tasks: make([]store.Task, len(tasks))}
	for i := range tasks {
		c.tasks[i] = copyTask(tasks[i])
	}
	s := b.t.s
	s.mu.Lock()
	s.boards[b.t.key] = c
	s.mu.Unlock()
}

// forget drops the board's cached scan.
func (b *tasks) forget() {
	s := b.t.s
	s.mu.Lock()
	delete(s.boards, b.t.key)
	s.mu.Unlock()
}
