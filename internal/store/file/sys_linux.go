package file

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// exchange swaps the files at a and b atomically.
func exchange(a, b string) error {
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP):
		return errExchangeUnsupported
	case errors.Is(err, unix.ENOENT):
		return fs.ErrNotExist
	}
	return &os.LinkError{Op: "exchange", Old: a, New: b, Err: err}
}

// fdatasync makes f's data (and the size that reaches it) durable, without
// its times.
func fdatasync(f *os.File) error {
	_, err := retryEINTR(func() (int, error) { return 0, unix.Fdatasync(int(f.Fd())) })
	return err
}

// fileInstance names one file for good: its device, inode and birth time.
// A file made after another was removed may get its inode, never its birth
// time. ok is false where the file system does not report birth times.
type fileInstance struct {
	dev, ino   uint64
	bsec, nsec int64
}

// instanceOf returns the instance of the file at path and its size; ok is
// false when there is no birth time to tell instances apart.
func instanceOf(path string) (id fileInstance, size int64, ok bool, err error) {
	var st unix.Statx_t
	err = unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO|unix.STATX_SIZE|unix.STATX_BTIME, &st)
	if errors.Is(err, unix.ENOENT) {
		return fileInstance{}, 0, false, fs.ErrNotExist
	}
	if err != nil {
		return fileInstance{}, 0, false, &fs.PathError{Op: "statx", Path: path, Err: err}
	}
	if st.Mask&unix.STATX_BTIME == 0 || st.Mask&unix.STATX_INO == 0 {
		return fileInstance{}, 0, false, nil
	}
	id = fileInstance{dev: unix.Mkdev(st.Dev_major, st.Dev_minor), ino: st.Ino, bsec: st.Btime.Sec, nsec: int64(st.Btime.Nsec)}
	return id, int64(st.Size), true, nil
}

// sameInode reports whether fi (from a stat) is the file id names.
func sameInode(fi fs.FileInfo, id fileInstance) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && uint64(st.Dev) == id.dev && st.Ino == id.ino
}

// noUnnamed is set once the file system refuses O_TMPFILE.
var noUnnamed atomic.Bool

// procFDs says whether /proc/self/fd is there, the way linkUnnamed names
// an unnamed file (linkat with AT_EMPTY_PATH needs a capability).
var procFDs = sync.OnceValue(func() bool {
	_, err := os.Stat("/proc/self/fd")
	return err == nil
})

// createUnnamed makes a file in dir with no name (O_TMPFILE), for
// linkUnnamed to give it one; nil where the file system cannot.
func createUnnamed(dir string, perm uint32) (*os.File, error) {
	if noUnnamed.Load() || !procFDs() {
		return nil, nil
	}
	fd, err := retryEINTR(func() (int, error) {
		return unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, perm)
	})
	switch {
	case err == nil:
		return os.NewFile(uintptr(fd), dir), nil
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EISDIR), errors.Is(err, unix.EINVAL):
		// EISDIR: a kernel older than O_TMPFILE took it for O_DIRECTORY.
		noUnnamed.Store(true)
		return nil, nil
	}
	return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
}

// linkUnnamed gives f, made by createUnnamed, the name path, which must
// not exist.
func linkUnnamed(f *os.File, path string) error {
	err := unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(f.Fd())), unix.AT_FDCWD, path, unix.AT_SYMLINK_FOLLOW)
	if err != nil {
		return &os.LinkError{Op: "link", Old: f.Name(), New: path, Err: err}
	}
	return nil
}
