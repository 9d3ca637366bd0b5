//go:build unix

package permission

import (
	"io/fs"
	"syscall"
)

// nlink is a file's hard link count (1 when the system does not say).
func nlink(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// fileKey identifies a file across its names.
func fileKey(fi fs.FileInfo) (inode, bool) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return inode{dev: uint64(st.Dev), ino: uint64(st.Ino)}, true
	}
	return inode{}, false
}
