package file

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// stageNew stages data for a path that does not exist yet, which must be
// made unnamed here.
func stageNew(t *testing.T, dir, name, data string) *replacement {
	t.Helper()
	g := &stager{dir: dir}
	r, err := g.stage(filepath.Join(dir, name), []byte(data), false)
	if err != nil {
		t.Fatal(err)
	}
	if !r.unnamed {
		r.abort()
		fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR, 0o600)
		if err != nil {
			t.Skipf("the file system of %s makes no unnamed files: %v", dir, err)
		}
		unix.Close(fd)
		t.Fatalf("%s can have unnamed files, and a new file was made with a name", dir)
	}
	return r
}

// TestNewFileUnnamedUntilLinked: a new file has no name in its directory
// until it is committed, and one dropped leaves nothing.
func TestNewFileUnnamedUntilLinked(t *testing.T) {
	dir := t.TempDir()
	r := stageNew(t, dir, "1.json", "one")
	if names := dirNames(t, dir); len(names) != 0 {
		t.Fatalf("staged, not committed: the directory holds %v", names)
	}
	if err := r.sync(); err != nil {
		t.Fatal(err)
	}
	if err := r.commit(); err != nil {
		t.Fatal(err)
	}
	r.f.Close()
	if got, err := os.ReadFile(filepath.Join(dir, "1.json")); err != nil || string(got) != "one" {
		t.Fatalf("1.json = %q, %v", got, err)
	}
	stageNew(t, dir, "2.json", "two").abort()
	if names := dirNames(t, dir); len(names) != 1 || names[0] != "1.json" {
		t.Fatalf("after an abort the directory holds %v", names)
	}
}

// TestNewFileLinkRefused: a file put at a new file's path by hand after it
// was staged makes the link fail; the version goes through a named
// temporary file and replaces it, as a rename always did.
func TestNewFileLinkRefused(t *testing.T) {
	dir := t.TempDir()
	r := stageNew(t, dir, "1.json", "staged")
	path := filepath.Join(dir, "1.json")
	if err := os.WriteFile(path, []byte("by hand"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.sync(); err != nil {
		t.Fatal(err)
	}
	if err := r.commit(); err != nil {
		t.Fatal(err)
	}
	fi, err := r.f.Stat()
	r.f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "staged" {
		t.Fatalf("1.json = %q, %v; want the staged version", got, err)
	}
	if now, err := os.Stat(path); err != nil || !sameVersion(now, fi) {
		t.Fatalf("the file at the path is not the one committed: %v", err)
	}
	if names := dirNames(t, dir); len(names) != 1 {
		t.Fatalf("the directory holds %v", names)
	}
}
