package file

import (
	"errors"
	"io/fs"
	"os"

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
