package teamkey_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"

	"github.com/troupe-dev/troupe/internal/teamkey"
)

func newKeys(t *testing.T, state string) (*teamkey.Keys, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "keys")
	k, err := teamkey.New(teamkey.Options{StateDir: state, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return k, dir
}

func TestCreateLoadDelete(t *testing.T) {
	k, dir := newKeys(t, "/work/project/.troupe")
	key, err := k.Create("alpha")
	if err != nil {
		t.Fatal(err)
	}
	if len(key) != teamkey.Size {
		t.Fatalf("key has %d bytes", len(key))
	}
	path, _ := k.Path("alpha")
	if filepath.Dir(path) != dir {
		t.Errorf("key file %s is not in %s", path, dir)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", p, st.Mode().Perm(), want)
		}
	}
	got, err := k.Load("alpha")
	if err != nil || !bytes.Equal(got, key) {
		t.Fatalf("Load = %x, %v; want %x", got, err, key)
	}
	again, err := k.Create("alpha")
	if err != nil || bytes.Equal(again, key) {
		t.Fatalf("a second Create gave the same key or failed: %v", err)
	}
	if err := k.Delete("alpha"); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Load("alpha"); !errors.Is(err, teamkey.ErrNoKey) {
		t.Errorf("Load after Delete: %v, want ErrNoKey", err)
	}
	if err := k.Delete("alpha"); err != nil {
		t.Errorf("deleting a missing key: %v", err)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 0 {
		t.Errorf("files left in the key directory: %v", left)
	}
}

func TestPathsDifferByStateDirAndTeam(t *testing.T) {
	dir := t.TempDir()
	a, _ := teamkey.New(teamkey.Options{StateDir: "/a/.troupe", Dir: dir})
	b, _ := teamkey.New(teamkey.Options{StateDir: "/b/.troupe", Dir: dir})
	pa, _ := a.Path("t")
	pb, _ := b.Path("t")
	pa2, _ := a.Path("u")
	if pa == pb || pa == pa2 {
		t.Errorf("paths collide: %s %s %s", pa, pb, pa2)
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}\.key$`).MatchString(filepath.Base(pa)) {
		t.Errorf("key file %s is not named by a hash", pa)
	}
}

func TestEnsure(t *testing.T) {
	k, _ := newKeys(t, t.TempDir())
	key, created, err := k.Ensure("old")
	if err != nil || !created {
		t.Fatalf("Ensure on a team without key: created=%v err=%v", created, err)
	}
	again, created, err := k.Ensure("old")
	if err != nil || created || !bytes.Equal(again, key) {
		t.Fatalf("Ensure on a team with a key: created=%v err=%v same=%v", created, err, bytes.Equal(again, key))
	}
}

func TestLoadRefusesBadFiles(t *testing.T) {
	k, _ := newKeys(t, t.TempDir())
	if _, err := k.Create("x"); err != nil {
		t.Fatal(err)
	}
	path, _ := k.Path("x")
	tests := []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{"readable by others", bytes.Repeat([]byte{1}, teamkey.Size), 0o644},
		{"short", []byte("short"), 0o600},
		{"long", bytes.Repeat([]byte{1}, teamkey.Size+1), 0o600},
		{"empty", nil, 0o600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(path, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.mode); err != nil {
				t.Fatal(err)
			}
			if _, err := k.Load("x"); !errors.Is(err, teamkey.ErrBadKey) {
				t.Errorf("Load: %v, want ErrBadKey", err)
			}
		})
	}
}

func TestDefaultDir(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/state")
	if d, err := teamkey.DefaultDir(); err != nil || d != "/state/troupe/keys" {
		t.Errorf("with XDG_STATE_HOME: %q, %v", d, err)
	}
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "/home/u")
	if d, err := teamkey.DefaultDir(); err != nil || d != "/home/u/.local/state/troupe/keys" {
		t.Errorf("with HOME: %q, %v", d, err)
	}
	t.Setenv("HOME", "")
	k, err := teamkey.New(teamkey.Options{StateDir: "/s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Create("t"); !errors.Is(err, teamkey.ErrNoDir) {
		t.Errorf("Create without a home: %v, want ErrNoDir", err)
	}
}

func TestPipeReadFD(t *testing.T) {
	key := bytes.Repeat([]byte{7}, teamkey.Size)
	r, err := teamkey.Pipe(key)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fd, err := syscall.Dup(int(r.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	got, err := teamkey.ReadFD(fd)
	if err != nil || !bytes.Equal(got, key) {
		t.Fatalf("ReadFD = %x, %v", got, err)
	}
	if _, err := teamkey.Pipe([]byte("short")); !errors.Is(err, teamkey.ErrBadKey) {
		t.Errorf("Pipe of a short key: %v", err)
	}
	if _, err := teamkey.ReadFD(1); !errors.Is(err, teamkey.ErrBadKey) {
		t.Errorf("ReadFD(1): %v", err)
	}
}
