//go:build !linux

package file

import "os"

// exchange is not available here: the spare is renamed over the file.
func exchange(a, b string) error { return errExchangeUnsupported }

// fdatasync is fsync where there is no fdatasync.
func fdatasync(f *os.File) error { return f.Sync() }
