//go:build !linux

package file

import (
	"errors"
	"io/fs"
	"os"
)

// exchange is not available here: the spare is renamed over the file.
func exchange(a, b string) error { return errExchangeUnsupported }

// fdatasync is fsync where there is no fdatasync.
func fdatasync(f *os.File) error { return f.Sync() }

// fileInstance names one file for good where birth times are known.
type fileInstance struct{}

// instanceOf reports no birth time here: callers take their slower path.
func instanceOf(path string) (fileInstance, int64, bool, error) {
	_, err := os.Lstat(path)
	return fileInstance{}, 0, false, err
}

// sameInode is never known here.
func sameInode(fs.FileInfo, fileInstance) bool { return false }

// createUnnamed: no unnamed files here; a temporary file is made instead.
func createUnnamed(string, uint32) (*os.File, error) { return nil, nil }

// linkUnnamed is never called here: there are no unnamed files.
func linkUnnamed(*os.File, string) error { return errors.ErrUnsupported }
