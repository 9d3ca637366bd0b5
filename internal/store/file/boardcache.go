package file

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
)

// tasks/.version is the board's change log: every commit appends one line
// naming the tasks it writes or removes ("3 7\n"), under the board lock and
// before it changes any task file. Its size is the board's version. List
// keeps the last board it read with the version it read it at:
//
//   - same version (and the tasks directory unchanged): the board is handed
//     out again, for the cost of two stats, without the board lock;
//   - a version that grew: under the lock, only the tasks the new lines
//     name are read again, so a change costs its readers O(tasks changed),
//     not a stat or a parse of every task file;
//   - anything else (no cache, another .version, an old cache): a full
//     scan.
//
// The line comes before the change, so a reader that still sees the old
// version reads before a change that has not returned yet; a writer killed
// between the line and its change leaves the caches behind, never stale,
// and whoever takes the lock next finishes or drops the change before it
// reads. The log carries nothing a crash could lose (the caches it guards
// live in memory), so it is not fsynced; it is started again when it grows
// past versionLogMax.
//
// A task file edited in place by hand changes neither the log nor the
// directory; a board read by a full scan is therefore trusted for at most
// boardCacheTTL, after which the next List scans again (cheaply: unchanged
// files keep their parse, see taskCache).
const (
	boardCacheTTL = time.Second
	versionLogMax = 1 << 20
)

// boardSnap is the board as List last returned it.
type boardSnap struct {
	ver    fs.FileInfo // tasks/.version read up to off; nil: there was none
	off    int64
	dir    fs.FileInfo // the tasks directory: files made or removed by hand
	fullAt time.Time   // when the board was last read whole
	tasks  []store.Task
}

func (b *tasks) versionFile() string { return b.t.path("tasks", ".version") }

// stat returns the version log (nil if absent) and the tasks directory.
func (b *tasks) stat() (ver, dir fs.FileInfo, err error) {
	if dir, err = os.Stat(b.dir()); err != nil {
		return nil, nil, err
	}
	ver, err = os.Stat(b.versionFile())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, dir, nil
	}
	return ver, dir, err
}

// logChange appends the ids a commit is about to change to the version
// log; the caller holds the board lock.
//
// Raw system calls: every group commit of the board appends here, and an
// os.File would set and clear its descriptor's flags and try the
// netpoller each time.
func (b *tasks) logChange(ids []string) error {
	path := b.versionFile()
	const flags = syscall.O_WRONLY | syscall.O_APPEND | syscall.O_CREAT
	fd, err := openFD(path, flags, 0o644)
	if err != nil {
		return err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err == nil && st.Size > versionLogMax {
		syscall.Close(fd)
		if err := os.Remove(path); err != nil {
			return err
		}
		if fd, err = openFD(path, flags, 0o644); err != nil {
			return err
		}
	}
	_, err = retryEINTR(func() (int, error) { return syscall.Write(fd, []byte(strings.Join(ids, " ")+"\n")) })
	if cerr := syscall.Close(fd); err == nil {
		err = cerr
	}
	return err
}

// current returns the cached board if nothing changed since it was read.
func (b *tasks) current() (*boardSnap, bool) {
	ver, dir, err := b.stat()
	if err != nil {
		return nil, false
	}
	c := b.snap()
	if c == nil || time.Since(c.fullAt) > boardCacheTTL || !sameVersion(c.dir, dir) {
		return c, false
	}
	if ver == nil || c.ver == nil {
		return c, ver == nil && c.ver == nil
	}
	return c, os.SameFile(c.ver, ver) && ver.Size() == c.off
}

func (b *tasks) snap() *boardSnap {
	b.t.s.mu.Lock()
	defer b.t.s.mu.Unlock()
	return b.t.s.boards[b.t.key]
}

// board returns the board as List returns it (shared: callers copy), read
// through x, which holds the board lock, and caches it.
func (b *tasks) board(x *tx) ([]store.Task, error) {
	c, ok := b.current()
	if ok {
		return c.tasks, nil
	}
	ver, dir, err := b.stat()
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			_, err = x.b.ids() // the team's error
		}
		return nil, err
	}
	next := &boardSnap{ver: ver, dir: dir}
	if ver != nil {
		next.off = ver.Size()
	}
	if c != nil && ver != nil && c.ver != nil && os.SameFile(c.ver, ver) && ver.Size() >= c.off && time.Since(c.fullAt) <= boardCacheTTL {
		changed, err := readRange(b.versionFile(), c.off, int(ver.Size()-c.off))
		if err == nil && int64(len(changed)) == ver.Size()-c.off {
			next.fullAt = c.fullAt
			next.tasks = b.patch(x, c.tasks, changed)
			if len(x.staged) == 0 {
				b.keep(next)
			}
			return next.tasks, nil
		}
	}
	tasks, err := x.all()
	if err != nil {
		return nil, err
	}
	for i := range tasks {
		tasks[i] = emptyLists(tasks[i])
	}
	next.fullAt, next.tasks = time.Now(), tasks
	if len(x.staged) == 0 {
		// A group commit's staged tasks are not on the board yet.
		b.keep(next)
	}
	return tasks, nil
}

// patch returns tasks with the tasks the version log lines of changed name
// read again through x.
func (b *tasks) patch(x *tx, tasks []store.Task, changed []byte) []store.Task {
	out := slices.Clone(tasks)
	seen := map[string]bool{}
	for _, f := range bytes.Fields(changed) {
		id := string(f)
		if seen[id] || !store.ValidTaskID(id) {
			continue
		}
		seen[id] = true
		i, found := slices.BinarySearchFunc(out, id, func(t store.Task, id string) int { return store.CompareTaskIDs(t.ID, id) })
		t, err := x.Get(id)
		switch {
		case err == nil && found:
			out[i] = emptyLists(t)
		case err == nil:
			out = slices.Insert(out, i, emptyLists(t))
		case found:
			out = slices.Delete(out, i, i+1)
		}
		if err != nil && !errors.Is(err, store.ErrTaskNotFound) {
			b.t.s.opts.Logger.Warn("skipping unreadable task", "team", b.t.name, "id", id, "file", b.file(id), "err", err)
		}
	}
	return out
}

// keep records c as the board's last read.
func (b *tasks) keep(c *boardSnap) {
	s := b.t.s
	s.mu.Lock()
	s.boards[b.t.key] = c
	s.mu.Unlock()
}

// copyTasks is a deep copy of tasks, for a caller that may change them.
func copyTasks(tasks []store.Task) []store.Task {
	out := make([]store.Task, len(tasks))
	for i := range tasks {
		out[i] = copyTask(tasks[i])
	}
	return out
}
