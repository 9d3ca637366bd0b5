package file

import (
	"errors"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestTeamsDirIsTopDir: Open marks the teams directory as the top of a
// hierarchy, so that ext4 places each team's directory in a block group of
// its own; opening again leaves the mark as it is.
func TestTeamsDirIsTopDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := isTopDir(dir); errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
		t.Skipf("the file system of %s keeps no inode flags (%v)", dir, err)
	}
	for range 2 {
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		top, err := isTopDir(filepath.Join(dir, "teams"))
		if err != nil {
			t.Fatal(err)
		}
		if !top {
			t.Fatal("teams has no top-directory flag after Open")
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
