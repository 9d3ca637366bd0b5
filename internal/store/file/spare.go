package file

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
)

// Task files are replaced through spares: tasks/.spare.<n>, a pool kept
// by the board. A change writes the new version into a spare, fsyncs it
// (unless the board's log holds it: boardlog.go) and swaps it with the
// task file in one atomic rename (renameat2 with RENAME_EXCHANGE), so the
// old version becomes that spare. A temporary file
// renamed over the task file gives readers the same, but it makes an inode
// and frees one at every write. On ext4 without a journal (the bench
// machine's) the allocator then checks every recently freed inode of the
// group before it takes one: creating a file there cost 0.3-0.7 ms, and a
// third of the CPU of claims went to it. Swapped with a spare, a change
// makes no inode and frees none.
//
// The pool is shared by every task of the board: a group commit that writes
// k task files uses spares 0..k-1 (the pool grows to the largest batch, at
// most maxSpares; past it a change writes a temporary file). A new task file
// is its one inode: it takes no spare, so a creation makes one inode where
// a spare per task made two. Where the system has O_TMPFILE it is made
// unnamed, written, fsynced (as above) and linked at its path, and several
// are made at once: creations in one directory take turns on its lock,
// unnamed ones do not, and on that machine's ext4 making a lead's 500
// tasks took 0.37 s of the board lock one after another. A crash before
// the link leaves no file. Elsewhere it is a temporary file renamed into
// place.
//
// A spare is the inode a reader may still be reading: a reader that opened
// a task file just before it was swapped out reads a spare. So a spare is
// written only under an exclusive flock taken without waiting, and readers
// without the lock read under a shared one (readStable): a writer that
// finds a spare being read takes the next one, and a reader that finds its
// file being written, or no longer at its path once read, reads it again
// (or under the board lock). Every write of a task file is made under the
// board lock, so the writers of the pool take turns. (Inbox cursors are
// written in place instead: see cursorfile.go.)
//
// A crash leaves the task file whole (the swap is atomic) and spares with
// versions that never became, or no longer are, their task's: a spare is
// never read. Boards written before the pool have a spare per task
// (.<id>.json.spare): it is never used again, and goes with its task or
// its team.

// noExchange is set once the file system refuses RENAME_EXCHANGE: the spare
// is then renamed over the task file, and made again at its next use.
var noExchange atomic.Bool

// errExchangeUnsupported is exchange's answer where the system or the file
// system has no RENAME_EXCHANGE.
var errExchangeUnsupported = errors.New("rename exchange unsupported")

// errBusy is a read without the lock that met its file being replaced:
// read it again, or under the lock.
var errBusy = errors.New("file replaced while it was read")

// maxSpares bounds a board's pool of spares.
const maxSpares = 256

// spareName is the name of spare n of a board.
func spareName(n int) string { return ".spare." + strconv.Itoa(n) }

// legacySparePath is the per-task spare a board written before the pool
// may hold for the task file at path.
func legacySparePath(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".spare")
}

// replacement is one file's new version, written and not yet in place.
type replacement struct {
	path    string
	f       *os.File // a spare or a temporary file, holding the new version
	temp    bool     // f is a temporary file: named, or unnamed
	unnamed bool     // f has no name yet (O_TMPFILE)
	data    []byte   // the new version
}

// stager hands out the spares of one directory to the files of one batch
// of writes, each its own.
type stager struct {
	dir  string
	mu   sync.Mutex // guards next: files are staged at once
	next int        // the spare to try next
}

// stage writes data for path into the next spare that no reader holds, or
// into a temporary file when path is new (exists false) or the pool is
// exhausted.
func (g *stager) stage(path string, data []byte, exists bool) (*replacement, error) {
	r := &replacement{path: path, data: data}
	var err error
	if exists {
		g.mu.Lock()
		r.f, err = g.spare()
		g.mu.Unlock()
		if err != nil {
			return nil, err
		}
	} else {
		if r.f, err = createUnnamed(filepath.Dir(path), 0o600); err != nil { // as os.CreateTemp makes them
			return nil, err
		}
		r.temp, r.unnamed = r.f != nil, r.f != nil
	}
	if r.f == nil {
		f, err := tempFor(path)
		if err != nil {
			return nil, err
		}
		r.f, r.temp = f, true
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

// spare opens and locks the next free spare of the pool, making it if it
// does not exist; nil when no spare up to maxSpares can be had. A spare
// that cannot be opened (a directory or a symlink put in its place) is
// passed over like one a reader holds; where nothing can be created at all, the
// temporary file that follows reports why.
func (g *stager) spare() (*os.File, error) {
	for ; g.next < maxSpares; g.next++ {
		// Not through a symlink: a spare is written over, and one put in
		// its place would have the write land where it points.
		f, err := openFile(filepath.Join(g.dir, spareName(g.next)), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600) // as os.CreateTemp made them
		if err != nil {
			continue
		}
		if err := flockFD(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if !errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
			}
			continue // a reader holds it: the version it reads stays
		}
		g.next++
		return f, nil
	}
	return nil, nil
}

func (r *replacement) sync() error { return timedSync(r.f.Sync) }

// commit puts the new version in place; the directory still needs an
// fsync for the change to be durable. The caller closes r.f after it: its
// lock keeps readers out of a spare until then.
func (r *replacement) commit() error {
	if r.unnamed {
		err := linkUnnamed(r.f, r.path)
		if err == nil {
			return nil
		}
		// Where /proc is missing, or a file was put at the path by hand
		// meanwhile: the version goes through a named temporary file, as
		// where unnamed files cannot be made.
		if err := r.named(); err != nil {
			return err
		}
	}
	from := r.f.Name()
	if !r.temp && !noExchange.Load() {
		err := exchange(from, r.path)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, fs.ErrNotExist):
			// The file went (a hand removal): the spare becomes it, and
			// is made again at its next use.
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

// named moves an unnamed version that could not be linked into a named
// temporary file, written and fsynced.
func (r *replacement) named() error {
	f, err := tempFor(r.path)
	if err != nil {
		return err
	}
	if _, err := f.Write(r.data); err != nil {
		return errors.Join(err, f.Close(), os.Remove(f.Name()))
	}
	if err := f.Sync(); err != nil {
		return errors.Join(err, f.Close(), os.Remove(f.Name()))
	}
	r.f.Close()
	r.f, r.unnamed = f, false
	return nil
}

// abort drops a replacement that will not be committed. A spare keeps what
// was written into it: it is never read. An unnamed file goes with its
// descriptor.
func (r *replacement) abort() {
	r.f.Close()
	if r.temp && !r.unnamed {
		os.Remove(r.f.Name())
	}
}

// syncAll makes every staged version durable, the fsyncs of several
// files at once (at most syncWorkers: a lead's batch of 500 creations made
// a thread per fsync): a group commit of the board writes a file per task
// it changes, and one fsync after another made its time under the board
// lock the sum of them.
func syncAll(rs []*replacement) error {
	errs := make([]error, len(rs))
	atOnce(len(rs), syncWorkers, func(i int) {
		if err := rs[i].sync(); err != nil {
			errs[i] = fmt.Errorf("write %s: %w", rs[i].path, err)
		}
	})
	return firstError(errs)
}

// firstError is the first of errs that is not nil: a batch that fails
// for one file mostly fails for all (a full disk), and one is enough to
// say why.
func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// syncWorkers is how many fsyncs syncAll runs at once.
const syncWorkers = 16

// atOnce calls fn for every i below n, on up to workers goroutines (on
// this one when there is one call).
func atOnce(n, workers int, fn func(i int)) {
	if n == 1 || workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, workers) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				fn(i)
			}
		})
	}
	wg.Wait()
}

// replaceFiles gives each path its data, durably unless durable is false
// (see above): every new version written and fsynced, then each put in
// place, then the directory fsynced once. A failure before the first
// commit leaves every file as it was; one after it leaves the files before
// it changed and the others not.
// It returns the identity of each new file (what a stat of its path now
// gives: a rename or a link changes no size or mtime).
//
// The versions are staged at once, on as many goroutines as there are Ps:
// making a file is work for the CPU, most of it in the kernel.
//
// With durable false nothing is fsynced: the board's log holds the
// versions already (boardlog.go).
func replaceFiles(dir string, paths []string, data [][]byte, durable bool) ([]fs.FileInfo, error) {
	rs := make([]*replacement, len(paths))
	errs := make([]error, len(paths))
	done := 0
	defer func() {
		for _, r := range rs[done:] {
			if r != nil {
				r.abort()
			}
		}
	}()
	g := &stager{dir: dir}
	exists := make([]bool, len(paths))
	made := 0
	for i, p := range paths {
		_, err := os.Lstat(p)
		switch {
		case err == nil:
			exists[i] = true
		case errors.Is(err, fs.ErrNotExist):
			made++
		default:
			return nil, fmt.Errorf("write %s: %w", p, err)
		}
	}
	// Without fsyncs a change of a file is a few system calls: goroutines
	// of its own would wait their turn for a P behind every member's, the
	// board lock held meanwhile. Making files is not: most of a creation
	// is the kernel's search for a free inode, and on the bench machine
	// BenchmarkCreateAll (a lead's 500 tasks) took 27.7 ms on two Ps
	// against 35.4 ms on one goroutine.
	workers := 1
	if durable || made > 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	atOnce(len(paths), workers, func(i int) {
		if rs[i], errs[i] = g.stage(paths[i], data[i], exists[i]); errs[i] != nil {
			errs[i] = fmt.Errorf("write %s: %w", paths[i], errs[i])
		}
	})
	if err := firstError(errs); err != nil {
		return nil, err
	}
	if durable {
		if err := syncAll(rs); err != nil {
			return nil, err
		}
	}
	// The directory's fsync makes the renames and links durable.
	settle := func() error {
		if !durable {
			return nil
		}
		return syncDir(dir)
	}
	fis := make([]fs.FileInfo, len(rs))
	for i, r := range rs {
		err := r.commit()
		if err == nil {
			fis[i], err = r.f.Stat()
		}
		r.f.Close() // after the exchange: the lock kept readers out until then
		done++
		if err != nil {
			return nil, errors.Join(fmt.Errorf("write %s: %w", r.path, err), settle())
		}
	}
	return fis, settle()
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
