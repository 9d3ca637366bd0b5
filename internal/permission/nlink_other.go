//go:build !unix

package permission

import "io/fs"

// nlink is 1 where the system gives no link count: hard links go unseen.
func nlink(fs.FileInfo) uint64 { return 1 }

func fileKey(fs.FileInfo) (inode, bool) { return inode{}, false }
