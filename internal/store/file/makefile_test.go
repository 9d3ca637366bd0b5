package file

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// TestMakeFile: makeFile makes an empty file with its mode, and of several
// makers of one path at once exactly one makes it; the others find it.
func TestMakeFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "inbox.jsonl")
	exists, err := makeFile(path, 0o640)
	if err != nil || exists {
		t.Fatalf("makeFile = %v, %v; want made", exists, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 0 || fi.Mode().Perm()&^0o640 != 0 || !fi.Mode().IsRegular() {
		t.Fatalf("made %v, size %d", fi.Mode(), fi.Size())
	}
	if err := os.WriteFile(path, []byte("kept\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if exists, err := makeFile(path, 0o640); err != nil || !exists {
		t.Fatalf("makeFile of an existing file = %v, %v; want exists", exists, err)
	}
	if got, _ := os.ReadFile(path); string(got) != "kept\n" {
		t.Fatalf("an existing file was changed: %q", got)
	}

	var made atomic.Int64
	var wg sync.WaitGroup
	shared := filepath.Join(dir, "shared")
	for range 16 {
		wg.Go(func() {
			exists, err := makeFile(shared, 0o600)
			if err != nil {
				t.Error(err)
			}
			if !exists {
				made.Add(1)
			}
		})
	}
	wg.Wait()
	if made.Load() != 1 {
		t.Fatalf("%d makers made the file, want 1", made.Load())
	}
	if _, err := makeFile(filepath.Join(dir, "no", "such"), 0o600); err == nil {
		t.Fatal("makeFile in a missing directory succeeded")
	}
	if names := dirNames(t, dir); len(names) != 2 {
		t.Fatalf("the directory holds %v, want two files", names)
	}
}

// dirNames lists dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}
