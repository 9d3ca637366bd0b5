package file

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
)

// Task files are replaced through a spare: tasks/.<id>.json.spare holds a
// task file's previous version. A change writes the new version into the
// spare, fsyncs it and swaps it with the file in one atomic rename
// (renameat2 with RENAME_EXCHANGE), so the old version becomes the next
// spare. A temporary file renamed over the file gives readers the
// same, but it makes an inode and frees one at every write. On ext4 without
// a journal (the bench machine's) the allocator then checks every recently
// freed inode of the group before it takes one: creating a file there cost
// 0.3-0.7 ms, and a third of the CPU of claims went to it. A file swapped
// with its spare makes no inode after its second write.
//
// The spare is the inode a reader may still be reading: a reader that
// opened the file just before it was swapped out reads the spare. So the
// spare is written only under an exclusive flock taken without waiting,
// and readers without the lock read under a shared one (readStable): a
// writer that finds the spare being read writes a temporary file instead,
// and a reader that finds its file being written, or no longer at its
// path once read, reads it again (or under the board lock). Every write of
// a task file is made under the board lock. (Inbox cursors are written in
// place instead: see cursorfile.go.)
//
// A crash leaves the file whole (the swap is atomic) and at most a spare
// with a version that never became the file's: a spare is never read.

// noExchange is set once the file system refuses RENAME_EXCHANGE: the spare
// is then renamed over the task file, and made again at the next write.
var noExchange atomic.Bool

// errExchangeUnsupported is exchange's answer where the system or the file
// system has no RENAME_EXCHANGE.
var errExchangeUnsupported = errors.New("rename exchange unsupported")

// errBusy is a read without the lock that met its file being replaced:
// read it again, or under the lock.
var errBusy = errors.New("file replaced while it was read")

func sparePath(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".spare")
}

// replacement is one file's new version, written and not yet in place.
type replacement struct {
	path string
	f    *os.File // the spare or a temporary file, holding the new version
	temp bool
}

// stage writes data for path into its spare, or into a temporary file
// while a reader holds the spare.
func stage(path string, data []byte) (*replacement, error) {
	f, err := openFile(sparePath(path), os.O_RDWR|os.O_CREATE, 0o600) // as os.CreateTemp made them
	if err != nil {
		return nil, err
	}
	r := &replacement{path: path, f: f}
	if err := flockFD(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		if r.f, err = os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*"); err != nil {
			return nil, err
		}
		r.temp = true
	}
	if _, err := r.f.WriteAt(data, 0); err != nil {
		r.abort()
		return nil, err
	}
	if err := r.f.Truncate(int64(len(data))); err != nil {
		r.abort()
		return nil, err
	}
	return r, nil
}

func (r *replacement) sync() error { return r.f.Sync() }

// commit puts the new version in place; the directory still needs an
// fsync for the change to be durable.
func (r *replacement) commit() error {
	defer r.f.Close() // after the exchange: the lock kept readers out until then
	from := r.f.Name()
	if !r.temp && !noExchange.Load() {
		err := exchange(from, r.path)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, fs.ErrNotExist):
			// A new file: the spare becomes it (the next write makes a
			// spare again).
		case errors.Is(err, errExchangeUnsupported):
			noExchange.Store(true)
		default:
			return err
		}
	}
	// A raw rename: os.Rename first looks the target up (to refuse a
	// directory), one more system call per task a creation makes.
	if err := syscall.Rename(from, r.path); err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: r.path, Err: err}
	}
	return nil
}

// makeSpare gives the file at path an empty spare, so that its first
// change makes no inode: a task's first change is its claim, under the
// board lock that every claimer of the team waits for, while its creation
// happens once, by one member. It runs without the lock: a writer that
// finds the spare made meanwhile writes into it, and one that made it
// first keeps it. A file removed meanwhile loses the spare made for it
// (the check comes after the spare is made, so every order of the two
// ends without one). Best effort: without a spare the first change makes
// one, as before.
func makeSpare(path string) {
	spare := sparePath(path)
	fd, err := openFD(spare, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return
	}
	syscall.Close(fd)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		os.Remove(spare)
	}
}

// spareLater makes the spares of new task files (makeSpare) in the
// background, in order, once the creating call has returned: a creation
// (the lead's, before any teammate can work) does not wait for a second
// inode per task, and a claim that comes before its task's spare makes one
// itself. Close waits for them.
func (s *Store) spareLater(team string, paths []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return // best effort: the first change makes the spare
	}
	s.sparing[team]++
	go func() {
		for _, p := range paths {
			makeSpare(p)
		}
		s.mu.Lock()
		if s.sparing[team]--; s.sparing[team] == 0 {
			delete(s.sparing, team)
		}
		s.spared.Broadcast()
		s.mu.Unlock()
	}()
}

// waitSpares waits until no spare of team ("": of any team) is being
// made: a team's directory removed or moved while a spare is made in it
// failed to go ("directory not empty") or kept the spare.
func (s *Store) waitSpares(team string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for (team == "" && len(s.sparing) > 0) || s.sparing[team] > 0 {
		s.spared.Wait()
	}
}

// removeTeamDir removes the directory of team n once its spares are made.
// A file made in it meanwhile by a writer that opened the team before it
// was deleted fails the removal with ENOTEMPTY; it is tried again a few
// times.
func (s *Store) removeTeamDir(n, dir string) error {
	var err error
	for range 5 {
		s.waitSpares(n)
		if err = os.RemoveAll(dir); !errors.Is(err, syscall.ENOTEMPTY) {
			return err
		}
	}
	return err
}

// abort drops a replacement that will not be committed. A spare keeps what
// was written into it: it is never read.
func (r *replacement) abort() {
	r.f.Close()
	if r.temp {
		os.Remove(r.f.Name())
	}
}

// syncAll makes every staged version durable, the fsyncs of several
// files at once (at most syncWorkers: a lead's batch of 500 creations made
// a thread per fsync): a group commit of the board writes a file per task
// it changes, and one fsync after another made its time under the board
// lock the sum of them. It returns the identity of each file written (the
// inode becomes the file: a rename changes no size or mtime).
func syncAll(rs []*replacement) ([]fs.FileInfo, error) {
	fis := make([]fs.FileInfo, len(rs))
	errs := make([]error, len(rs))
	one := func(i int) {
		r := rs[i]
		if errs[i] = r.sync(); errs[i] == nil {
			fis[i], errs[i] = r.f.Stat()
		}
		if errs[i] != nil {
			errs[i] = fmt.Errorf("write %s: %w", r.path, errs[i])
		}
	}
	if len(rs) == 1 {
		one(0)
	} else {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range min(len(rs), syncWorkers) {
			wg.Go(func() {
				for i := int(next.Add(1)) - 1; i < len(rs); i = int(next.Add(1)) - 1 {
					one(i)
				}
			})
		}
		wg.Wait()
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return fis, nil
}

// syncWorkers is how many fsyncs syncAll runs at once.
const syncWorkers = 16

// replaceFiles gives each path its data, durably (see above): every new
// version written and fsynced, then each put in place, then the directory
// fsynced once. A failure before the first commit leaves every file as it
// was; one after it leaves the files before it changed and the others not.
// It returns the identity of each new file (what a stat of its path now
// gives).
func replaceFiles(dir string, paths []string, data [][]byte) ([]fs.FileInfo, error) {
	rs := make([]*replacement, 0, len(paths))
	done := 0
	defer func() {
		for _, r := range rs[done:] {
			r.abort()
		}
	}()
	for i, path := range paths {
		r, err := stage(path, data[i])
		if err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
		rs = append(rs, r)
	}
	fis, err := syncAll(rs)
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		err := r.commit()
		done++
		if err != nil {
			return nil, errors.Join(fmt.Errorf("write %s: %w", r.path, err), syncDir(dir))
		}
	}
	return fis, syncDir(dir)
}

// readMode is how readStable reads a file that writers replace.
type readMode int

const (
	// readLocked: under the lock every writer takes, so nothing replaces
	// the file meanwhile: a plain read.
	readLocked readMode = iota
	// readWait: without the lock, waiting out a writer and reading again
	// a file replaced meanwhile.
	readWait
	// readNoWait: without the lock, errBusy for a file being written or
	// replaced meanwhile (the caller reads under the lock instead).
	readNoWait
)

// readStable reads the file at path. Without the lock it reads under a
// shared flock (no writer rewrites it meanwhile), and only if it is still
// the file at path once read. fi is the identity of the file read.
func readStable(path string, how readMode) (data []byte, fi fs.FileInfo, err error) {
	for range maxRereads {
		data, fi, err = readOnce(path, how)
		if how != readWait || !errors.Is(err, errBusy) {
			break
		}
	}
	return data, fi, err
}

// maxRereads bounds the reads of a file replaced again and again while it
// is read (each replacement is a write and an fsync: it cannot go on).
const maxRereads = 100

func readOnce(path string, how readMode) ([]byte, fs.FileInfo, error) {
	f, err := openFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if how != readLocked {
		lock := syscall.LOCK_SH
		if how == readNoWait {
			lock |= syscall.LOCK_NB
		}
		if err := flockFD(int(f.Fd()), lock); err != nil {
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, nil, errBusy
			}
			return nil, nil, err
		}
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil || how == readLocked {
		return data, fi, err
	}
	if afterRead != nil {
		afterRead(path)
	}
	now, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) && how == readWait {
		return nil, nil, err // removed since
	}
	if err != nil || !os.SameFile(fi, now) {
		return nil, nil, errBusy
	}
	return data, fi, nil
}

// afterRead, when set (by tests), runs between a read and the check that
// the file is still at its path.
var afterRead func(path string)
