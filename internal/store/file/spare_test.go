package file

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/store"
)

// spareTeam is a team on a fresh store with task #1, and the path of its file.
func spareTeam(t *testing.T) (store.Team, string) {
	t.Helper()
	tm := newTestTeam(t, t.TempDir())
	if _, err := tm.Tasks().Create(context.Background(), store.Task{Subject: "one"}); err != nil {
		t.Fatal(err)
	}
	return tm, tm.path("tasks", "1.json")
}

func setSubject(t *testing.T, tm store.Team, subject string) {
	t.Helper()
	if _, err := tm.Tasks().Update(context.Background(), "1", func(x *store.Task) error { x.Subject = subject; return nil }); err != nil {
		t.Fatal(err)
	}
}

func ino(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestSpareIsReused: a task's changes swap two files, its own and a spare
// of the board's pool, instead of making a file and freeing one each time.
func TestSpareIsReused(t *testing.T) {
	tm, path := spareTeam(t)
	spare := filepath.Join(filepath.Dir(path), spareName(0))
	setSubject(t, tm, "two") // makes the spare
	a := ino(t, path)
	setSubject(t, tm, "three")
	if noExchange.Load() {
		t.Skip("this file system refuses RENAME_EXCHANGE: every change renames a new file")
	}
	b := ino(t, path)
	if ino(t, spare) != a {
		t.Fatal("the version replaced did not become the spare")
	}
	setSubject(t, tm, "four")
	if got := ino(t, path); got != a || ino(t, spare) != b {
		t.Fatalf("the task file is inode %d after three changes, want %d (the spare's)", got, a)
	}
	got, err := tm.Tasks().Get(context.Background(), "1")
	if err != nil || got.Subject != "four" {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	for _, p := range []string{path, spare} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: mode %v, %v; want it private to its owner, as before the spares", p, fi.Mode(), err)
		}
	}
}

// boardFiles returns the names of the files in a board's directory that
// hold a task's version: task files and spares.
func boardFiles(t *testing.T, dir string) (tasks, spares []string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		switch n := e.Name(); {
		case strings.HasPrefix(n, ".spare."), strings.Contains(n, ".tmp"), strings.HasSuffix(n, ".spare"):
			spares = append(spares, n)
		case strings.HasSuffix(n, ".json"):
			tasks = append(tasks, n)
		}
	}
	return tasks, spares
}

// TestOneFilePerTask: a new task is one file, and the tasks' changes share
// the board's spares: 20 tasks created, claimed and completed one after
// another leave 20 task files and one spare, where a spare per task made
// two inodes per task.
func TestOneFilePerTask(t *testing.T) {
	tm, path := spareTeam(t)
	dir := filepath.Dir(path)
	if tasks, spares := boardFiles(t, dir); len(tasks) != 1 || len(spares) != 0 {
		t.Fatalf("after Create: task files %v, spares %v; want one task file and no spare", tasks, spares)
	}
	ctx := context.Background()
	var ts []store.Task
	for i := range 19 {
		ts = append(ts, store.Task{Subject: fmt.Sprint("task ", i)})
	}
	if _, err := tm.Tasks().(store.TaskBatch).CreateAll(ctx, ts); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 20; i++ {
		id := strconv.Itoa(i)
		if _, err := tm.Tasks().Claim(ctx, id, "alice"); err != nil {
			t.Fatal(err)
		}
		if _, err := tm.Tasks().Update(ctx, id, func(x *store.Task) error { x.Status = store.TaskCompleted; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	tasks, spares := boardFiles(t, dir)
	if len(tasks) != 20 || len(spares) != 1 || spares[0] != spareName(0) {
		t.Fatalf("task files %v, spares %v; want 20 task files and %s", tasks, spares, spareName(0))
	}
	if got, err := tm.Tasks().Get(ctx, "20"); err != nil || got.Owner != "alice" || got.Status != store.TaskCompleted {
		t.Fatalf("Get = %+v, %v", got, err)
	}
}

// TestUnusableSparePassedOver: a spare that cannot be opened (a directory
// in its place) or must not be (a symlink, whose target the write would
// replace) is passed over, and the change goes through the next one.
func TestUnusableSparePassedOver(t *testing.T) {
	tm, path := spareTeam(t)
	dir := filepath.Dir(path)
	if err := os.Mkdir(filepath.Join(dir, spareName(0)), 0o700); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, spareName(1))); err != nil {
		t.Fatal(err)
	}
	setSubject(t, tm, "two")
	if got, err := tm.Tasks().Get(context.Background(), "1"); err != nil || got.Subject != "two" {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if data, err := os.ReadFile(outside); err != nil || string(data) != "keep" {
		t.Fatalf("the symlink's target = %q, %v; want it untouched", data, err)
	}
	if fi, err := os.Lstat(filepath.Join(dir, spareName(2))); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the change did not go through the next spare: %v, %v", fi, err)
	}
}

// TestSparesAllHeld: a change whose every spare is held by a reader writes
// a temporary file instead, and the readers keep the versions they read.
func TestSparesAllHeld(t *testing.T) {
	tm, path := spareTeam(t)
	dir := filepath.Dir(path)
	var held []*os.File
	t.Cleanup(func() {
		for _, f := range held {
			f.Close()
		}
	})
	for n := range maxSpares {
		p := filepath.Join(dir, spareName(n))
		if err := os.WriteFile(p, []byte(fmt.Sprint(n)), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, f)
		if err := flockFD(int(f.Fd()), syscall.LOCK_SH); err != nil { // as readStable does
			t.Fatal(err)
		}
	}
	setSubject(t, tm, "two")
	if got, err := tm.Tasks().Get(context.Background(), "1"); err != nil || got.Subject != "two" {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	for n, f := range held {
		if data, err := os.ReadFile(f.Name()); err != nil || string(data) != fmt.Sprint(n) {
			t.Fatalf("%s = %q, %v: a held spare was written", f.Name(), data, err)
		}
	}
	if _, spares := boardFiles(t, dir); len(spares) != maxSpares {
		t.Fatalf("%d spares, want %d (no temporary file left)", len(spares), maxSpares)
	}
}

// TestSpareReadByReaderIsNotOverwritten: a reader that opened the task file
// before it was replaced keeps reading the version it opened, although
// that file is now the spare the next change would write into.
func TestSpareReadByReaderIsNotOverwritten(t *testing.T) {
	tm, path := spareTeam(t)
	setSubject(t, tm, "two")
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := flockFD(int(f.Fd()), syscall.LOCK_SH); err != nil { // as readStable does
		t.Fatal(err)
	}
	setSubject(t, tm, "three") // f is now the spare
	setSubject(t, tm, "four")  // must not write into f
	got := make([]byte, len(want)+100)
	n, _ := f.ReadAt(got, 0)
	if string(got[:n]) != string(want) {
		t.Fatalf("the reader's file changed under it:\n got %s\nwant %s", got[:n], want)
	}
	if cur, err := tm.Tasks().Get(context.Background(), "1"); err != nil || cur.Subject != "four" {
		t.Fatalf("Get = %+v, %v", cur, err)
	}
}

// TestReadStable: a read without the lock gives up on a file being written
// (or waits for it), and on one replaced while it was read.
func TestReadStable(t *testing.T) {
	tm, path := spareTeam(t)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := flockFD(int(f.Fd()), syscall.LOCK_EX); err != nil { // a writer's lock
		t.Fatal(err)
	}
	if _, _, err := readStable(path, readNoWait); !errors.Is(err, errBusy) {
		t.Fatalf("read of a file being written: %v, want errBusy", err)
	}
	f.Close()
	if _, _, err := readStable(path, readNoWait); err != nil {
		t.Fatal(err)
	}

	// Replaced between the read and the check: busy, or read again.
	replaced, busy := 0, false
	afterRead = func(string) {
		if replaced < 2 && !busy { // not for the update's own reads
			busy = true
			setSubject(t, tm, "changed")
			busy = false
			replaced++
		}
	}
	t.Cleanup(func() { afterRead = nil })
	if _, _, err := readStable(path, readNoWait); !errors.Is(err, errBusy) {
		t.Fatalf("read of a file replaced meanwhile: %v, want errBusy", err)
	}
	data, _, err := readStable(path, readWait)
	if err != nil {
		t.Fatal(err)
	}
	if task, err := store.ParseTask(data); err != nil || task.Subject != "changed" {
		t.Fatalf("read again: %+v, %v", task, err)
	}
	if replaced != 2 {
		t.Fatalf("%d replacements, want 2", replaced)
	}
}

// TestSpareNeverRead: a spare holding anything (a change that crashed
// before its exchange) is neither read nor reported, and the next change
// writes over it; removing the task removes a spare of its own that a
// board written before the pool left.
func TestSpareNeverRead(t *testing.T) {
	tm, path := spareTeam(t)
	// A spare of the pool, and one of a board written before the pool.
	spares := []string{filepath.Join(filepath.Dir(path), spareName(0)), legacySparePath(path)}
	for _, p := range spares {
		if err := os.WriteFile(p, []byte(`{"id": "1", "subj`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	b, err := tm.Tasks().Board(ctx)
	if err != nil || len(b.Tasks) != 1 || len(b.Corrupt) != 0 || b.Tasks[0].Subject != "one" {
		t.Fatalf("Board = %+v, %v", b, err)
	}
	setSubject(t, tm, "two")
	if got, err := tm.Tasks().Get(ctx, "1"); err != nil || got.Subject != "two" {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if _, err := tm.Tasks().Update(ctx, "1", func(x *store.Task) error { x.Status = store.TaskDeleted; return nil }); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, spares[1]} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after the task was removed: %v", p, err)
		}
	}
}

// TestOwnWriteServesReads: a task file the store has just written is read
// from what it wrote while it is young: the claim's check without the lock
// and a Get after it open no task file.
func TestOwnWriteServesReads(t *testing.T) {
	tm, path := spareTeam(t)
	var reads atomic.Int64
	afterRead = func(p string) {
		if p == path {
			reads.Add(1)
		}
	}
	t.Cleanup(func() { afterRead = nil })
	ctx := context.Background()
	if _, err := tm.Tasks().Claim(ctx, "1", "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Tasks().Claim(ctx, "1", "bob"); err == nil {
		t.Fatal("bob claimed alice's task")
	}
	got, err := tm.Tasks().Get(ctx, "1")
	if err != nil || got.Owner != "alice" {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if n := reads.Load(); n != 0 {
		t.Errorf("the task file was read %d times without the lock, want 0 (the store wrote it)", n)
	}
}

// TestOwnEntryTrustedWhileYoung: an entry of the store's own write stands
// for its file only while the file is younger than racyWindow; then the
// file is read again.
func TestOwnEntryTrustedWhileYoung(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "1.json")
	if err := os.WriteFile(path, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	var c taskCache
	c.wrote("k", fi, store.Task{ID: "1", Subject: "written"})
	if got, ok := c.get("k", fi); !ok || got.Subject != "written" {
		t.Fatalf("young own entry: %+v, %v; want it served", got, ok)
	}
	old := time.Now().Add(-2 * racyWindow)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	if fi, err = os.Stat(path); err != nil {
		t.Fatal(err)
	}
	c.wrote("k", fi, store.Task{ID: "1", Subject: "written"})
	if _, ok := c.get("k", fi); ok {
		t.Fatal("an own entry of a file older than racyWindow was served")
	}
	c.put("k", fi, store.Task{ID: "1", Subject: "read"})
	if got, ok := c.get("k", fi); !ok || got.Subject != "read" {
		t.Fatalf("entry read after the window: %+v, %v", got, ok)
	}
}

// TestReplaceFilesIdentities: several files replaced at once (staged and
// fsynced together) each hold their data, the identity replaceFiles gives
// for each is what a stat of its path gives, as the task cache needs, and
// nothing is left beside them but spares.
func TestReplaceFilesIdentities(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	var data [][]byte
	for i := range 40 {
		p := filepath.Join(dir, fmt.Sprintf("%d.json", i+1))
		if i%2 == 0 { // half of them exist already
			if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		paths = append(paths, p)
		data = append(data, []byte(fmt.Sprintf(`{"n":%d}`, i)))
	}
	if err := os.WriteFile(filepath.Join(dir, spareName(0)), []byte("a spare"), 0o600); err != nil {
		t.Fatal(err)
	}
	fis, err := replaceFiles(dir, paths, data, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(fis) != len(paths) {
		t.Fatalf("%d identities for %d files", len(fis), len(paths))
	}
	for i, p := range paths {
		got, err := os.ReadFile(p)
		if err != nil || string(got) != string(data[i]) {
			t.Errorf("%s = %q, %v; want %q", p, got, err, data[i])
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if !sameVersion(fi, fis[i]) {
			t.Errorf("%s: replaceFiles said %v %d %v, the path is %v %d %v", p, fis[i].Name(), fis[i].Size(), fis[i].ModTime(), fi.Name(), fi.Size(), fi.ModTime())
		}
	}
	for _, name := range dirNames(t, dir) {
		if !slices.Contains(paths, filepath.Join(dir, name)) && !strings.HasPrefix(name, ".spare.") {
			t.Errorf("left in the directory: %s", name)
		}
	}
}

// TestSnapshotShared: Snapshot is List's board without the copy: the same
// tasks, one backing array for two reads at one version, and a snapshot
// handed out stays as it was after a change.
func TestSnapshotShared(t *testing.T) {
	tm, _ := spareTeam(t)
	ctx := context.Background()
	ts := tm.Tasks().(store.TaskSnapshot)
	if _, err := ts.Create(ctx, store.Task{Subject: "two", Metadata: map[string]any{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	list, err := ts.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s1, err := ts.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := ts.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(list, s1); diff != "" {
		t.Fatalf("Snapshot differs from List (-list +snapshot):\n%s", diff)
	}
	if len(s1) != 2 || &s1[0] != &s2[0] {
		t.Fatalf("two snapshots at one version are not one board (%d tasks)", len(s1))
	}
	if _, err := ts.Claim(ctx, "1", "alice"); err != nil {
		t.Fatal(err)
	}
	s3, err := ts.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s1[0].Owner != "" || s3[0].Owner != "alice" {
		t.Errorf("after the claim: old snapshot owner %q, new %q; want \"\" and alice", s1[0].Owner, s3[0].Owner)
	}
}

// TestDeleteTeamRightAfterCreate: nothing a Create did lands after it
// returned. When a task's spare was made in the background, a team deleted
// meanwhile failed with "directory not empty" when the spare landed while
// its directory was being removed (in every run of 300 rounds).
func TestDeleteTeamRightAfterCreate(t *testing.T) {
	ctx := context.Background()
	for i := range 300 {
		s, err := Open(t.TempDir(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		tm, err := s.CreateTeam(ctx, store.Roster{Name: "t1", Members: []store.Member{{Name: "alice"}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tm.Tasks().(store.TaskBatch).CreateAll(ctx, []store.Task{{Subject: "x"}, {Subject: "y"}}); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteTeam(ctx, "t1"); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
