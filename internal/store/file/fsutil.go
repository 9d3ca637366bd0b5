package file

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// tempFor makes a named temporary file beside path, for a new version of
// it (.<name>.tmp<random>: the sweep removes those a crash left).
func tempFor(path string) (*os.File, error) {
	return os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
}

// writeFileAtomic replaces path with data: temp file in the same directory,
// fsync, rename, fsync of the directory. Readers see the old or the new
// content, never a mix, and a crash leaves one of the two.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := tempFor(path)
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

// makeFile makes an empty file at path unless there is one (exists), with
// perm; the caller fsyncs the directory when the file must stay. Where the
// system has them it is made unnamed and linked at path: makers of files in
// one directory then run at once, where creations take turns on the
// directory's lock (a spawn of fifty teammates makes an inbox, a
// transcript, a cursor and a heartbeat file for each, and on the bench
// machine's disk a creation costs up to 0.7 ms; see spare.go).
func makeFile(path string, perm uint32) (exists bool, err error) {
	f, err := createUnnamed(filepath.Dir(path), perm)
	if err != nil {
		return false, err
	}
	if f != nil {
		defer f.Close()
		err := linkUnnamed(f, path)
		if err == nil || errors.Is(err, fs.ErrExist) {
			return err != nil, nil
		}
		// The link was refused for another reason: an ordinary creation
		// makes the file, or says why it cannot.
	}
	fd, err := openFD(path, syscall.O_CREAT|syscall.O_EXCL|syscall.O_RDWR, perm)
	if errors.Is(err, fs.ErrExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return false, syscall.Close(fd)
}

// syncDir makes a directory's entries (creations, renames, removals)
// durable. The fsyncs of one directory are a group commit (dirSyncer).
func syncDir(dir string) error { return dirSyncs.sync(dir) }

// dirSyncs is the group commit of this process's directory fsyncs.
var dirSyncs = dirSyncer{fsync: syncDirNow}

// dirSyncer groups the fsyncs of each directory: the callers that queue
// while one runs share the next, which begins after all of them made their
// change. A spawn of fifty teammates makes two files each, in two
// directories, at once: one fsync of a directory after another took 80 ms
// of it on the bench machine's disk, 55 ms together.
type dirSyncer struct {
	groups perKey[batcher[chan error]]
	fsync  func(dir string) error
}

func (d *dirSyncer) sync(dir string) error {
	done := make(chan error, 1)
	d.groups.get(dir).submit(done, func(batch []chan error) {
		err := d.fsync(dir)
		for _, c := range batch {
			c <- err
		}
	})
	return <-done
}

// syncDirNow fsyncs dir.
func syncDirNow(dir string) error {
	d, err := openFile(dir, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// fileLock is an exclusive lock held across goroutines of this process (the
// mutex) and across processes (flock(2) on the lock file). flock alone is
// not enough in-process: it is per open file, and a second goroutine would
// need its own descriptor.
//
// The lock file is opened for each hold and closed to release it, with
// raw system calls: an os.File would try to register the descriptor with
// the netpoller and set its flags each time (six more calls; every store
// change takes a lock, and a team of 1000 took ~36 of them per member to
// spawn one). A descriptor kept open across holds would save the open, but
// it would lock a file gone from the path once the team's directory is
// archived, while another process locks the new one.
type fileLock struct {
	mu   sync.Mutex
	path string
	fd   int
}

func (l *fileLock) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	if err := l.acquire(syscall.LOCK_EX); err != nil {
		l.mu.Unlock()
		return err
	}
	return nil
}

// tryLock takes the lock only if nobody, in this process or another, holds
// it now.
func (l *fileLock) tryLock() (bool, error) {
	if !l.mu.TryLock() {
		return false, nil
	}
	err := l.acquire(syscall.LOCK_EX | syscall.LOCK_NB)
	if err == nil {
		return true, nil
	}
	l.mu.Unlock()
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return false, err
}

// acquire opens the lock file and flocks it with how; l.mu is held. A
// lock file it has to make is made durable with its directory: some lock
// files hold data of their own (an inbox's cursor, a transcript).
func (l *fileLock) acquire(how int) error {
	fd, err := openFD(l.path, syscall.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		var exists bool
		if exists, err = makeFile(l.path, 0o600); err == nil && !exists {
			err = syncDir(filepath.Dir(l.path))
		}
		if err == nil {
			fd, err = openFD(l.path, syscall.O_RDWR, 0)
		}
	}
	if err != nil {
		return fmt.Errorf("lock %s: %w", l.path, err)
	}
	if err := flockFD(fd, how); err != nil {
		syscall.Close(fd)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		return fmt.Errorf("lock %s: %w", l.path, err)
	}
	l.fd = fd
	return nil
}

// openFile is os.OpenFile for a file the store reads or writes with
// blocking calls (all of them): os.OpenFile would try to register each
// descriptor with the netpoller, and fail for a regular file, at every
// append, lock and fsync of a directory.
func openFile(path string, flag int, perm uint32) (*os.File, error) {
	fd, err := openFD(path, flag, perm)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// openFD opens path close-on-exec with a raw open(2).
func openFD(path string, flag int, perm uint32) (int, error) {
	fd, err := retryEINTR(func() (int, error) { return syscall.Open(path, flag|syscall.O_CLOEXEC, perm) })
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, nil
}

// flockFD is flock(2) on fd, retried when a signal interrupts it.
func flockFD(fd, how int) error {
	_, err := retryEINTR(func() (int, error) { return 0, syscall.Flock(fd, how) })
	return err
}

func retryEINTR(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if !errors.Is(err, syscall.EINTR) {
			return n, err
		}
	}
}

// lockUnavailable reports whether err says a lock file cannot be created or
// opened for writing: a read-only .troupe (a read-only mount, or files of
// another user). Readers then read without the lock; writers fail.
func lockUnavailable(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)
}

// unlock releases the flock before it closes the descriptor: closing
// releases it only when no copy of the descriptor is left, and a fork in
// flight elsewhere in the process (a tool's bash, a teammate's process)
// holds a copy until its exec closes it. Until then, another process or
// Store would find the lock taken.
func (l *fileLock) unlock() {
	flockFD(l.fd, syscall.LOCK_UN)
	syscall.Close(l.fd)
	l.fd = -1
	l.mu.Unlock()
}

// locks hands out one fileLock per lock file path.
type locks struct {
	mu sync.Mutex
	m  map[string]*fileLock
}

func (ls *locks) get(path string) *fileLock {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.m == nil {
		ls.m = make(map[string]*fileLock)
	}
	l, ok := ls.m[path]
	if !ok {
		l = &fileLock{path: path, fd: -1}
		ls.m[path] = l
	}
	return l
}

// withLock runs fn holding the lock at path.
func (ls *locks) withLock(ctx context.Context, path string, fn func() error) error {
	l := ls.get(path)
	if err := l.lock(ctx); err != nil {
		return err
	}
	defer l.unlock()
	return fn()
}

// appendLine appends line (which ends in a newline) to path with one write
// and fsyncs it. The caller holds the file's lock. check, if not nil, sees
// the current size first and may refuse the append. If the file ends in a
// torn line (a writer died mid-line), that line is terminated first so the
// new one is not glued to it: the torn line then reads as malformed and is
// set aside, and the new line stays intact.
func appendLine(path string, line []byte, check func(size int64) error) error {
	var checks []func(int64) error
	if check != nil {
		checks = []func(int64) error{check}
	}
	errs, err := appendLines(path, [][]byte{line}, checks)
	if err != nil {
		return err
	}
	return errs[0]
}

// appendLines is appendLine for several lines at once: one write and one
// fsync. checks, when not nil, has one entry per line (nil: none), called
// with the size the file has before that line; a line it refuses is left
// out and gets its error in errs. err is the failure of the whole write
// (every line not refused shares it).
func appendLines(path string, lines [][]byte, checks []func(size int64) error) (errs []error, err error) {
	return appendLinesSync(path, lines, checks, true)
}

// appendLinesSync is appendLines, with the fsync left out when sync is
// false (a new file's directory entry is still made durable).
func appendLinesSync(path string, lines [][]byte, checks []func(size int64) error, sync bool) (errs []error, err error) {
	f, err := openFile(path, os.O_RDWR|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) {
		var exists bool
		if exists, err = makeFile(path, 0o644); err == nil && !exists {
			err = syncDir(filepath.Dir(path))
		}
		if err == nil {
			f, err = openFile(path, os.O_RDWR|os.O_APPEND, 0)
		}
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	var buf []byte
	if size > 0 {
		var last [1]byte
		if _, err := f.ReadAt(last[:], size-1); err != nil {
			return nil, err
		}
		if last[0] != '\n' {
			buf = append(buf, '\n')
		}
	}
	errs = make([]error, len(lines))
	if len(lines) == 1 && len(buf) == 0 && (checks == nil || checks[0] == nil) {
		buf = lines[0] // the common case: no copy
	} else {
		for i, line := range lines {
			if checks != nil && checks[i] != nil {
				if errs[i] = checks[i](size + int64(len(buf))); errs[i] != nil {
					continue
				}
			}
			buf = append(buf, line...)
		}
		if len(buf) == 0 || len(buf) == 1 && buf[0] == '\n' {
			return errs, nil // every line refused
		}
	}
	// A write or fsync that fails (disk full, file size limit, I/O error)
	// may have left part of the lines, or all of them, unsynced: cut the
	// file back to where it was, so that it ends in a whole line and a send
	// that reported failure is not delivered later.
	if _, err := appendWrite(f, buf); err != nil {
		return nil, errors.Join(err, truncateBack(f, size))
	}
	if !sync {
		return errs, nil
	}
	if err := syncAppended(f); err != nil {
		return nil, errors.Join(err, truncateBack(f, size))
	}
	return errs, nil
}

// syncAppended fsyncs a file appended to; a seam for tests that count
// fsyncs.
var syncAppended = func(f *os.File) error { return timedSync(f.Sync) }

// appendWrite writes an appended line; a seam for tests that inject a
// failed or short write.
var appendWrite = func(f *os.File, b []byte) (int, error) { return f.Write(b) }

// truncateBack cuts f back to size after a failed append.
func truncateBack(f *os.File, size int64) error {
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("cut %s back to its last whole line after a failed write: %w", f.Name(), err)
	}
	return f.Sync()
}

func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}

// jsonCompact appends src without insignificant space to dst, or returns
// nil if src is not exactly one JSON value.
func jsonCompact(dst, src []byte) []byte {
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, src); err != nil {
		return nil
	}
	return buf.Bytes()
}
