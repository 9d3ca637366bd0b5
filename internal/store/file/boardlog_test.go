package file

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/troupe-dev/troupe/internal/store"
)

// logBoard opens the store in dir (a process of its own: nothing shared
// with another Store) and its team t, made on first use.
func logBoard(t *testing.T, dir string) (*Store, store.Tasks) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	tm, err := s.Team(ctx, "t")
	if err != nil {
		if tm, err = s.CreateTeam(ctx, store.Roster{Name: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	return s, tm.Tasks()
}

func tasksDir(s *Store) string { return filepath.Join(s.Dir(), "teams", "t", "tasks") }

func logSize(t *testing.T, s *Store) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(tasksDir(s), ".log"))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// appendToLog writes data at the end of the board's log, as a writer
// that died after it would have left it.
func appendToLog(t *testing.T, s *Store, data []byte) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(tasksDir(s), ".log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
}

// wantLogEmpty fails the test unless the board's log is empty.
func wantLogEmpty(t *testing.T, s *Store, after string) {
	t.Helper()
	if n := logSize(t, s); n != 0 {
		t.Fatalf("the log holds %d bytes after %s", n, after)
	}
}

// rebootAs makes the store see another boot until the test ends.
func rebootAs(t *testing.T, id string) {
	testBootID.Store(&id)
	t.Cleanup(func() { testBootID.Store(nil) })
}

// claimOne makes task 1 and claims it for w1, through the log.
func claimOne(t *testing.T, b store.Tasks) store.Task {
	t.Helper()
	ctx := context.Background()
	if _, err := b.Create(ctx, store.Task{Subject: "one"}); err != nil {
		t.Fatal(err)
	}
	got, err := b.ClaimFirst(ctx, "w1", []string{"1"})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestBoardLogHoldsBatches(t *testing.T) {
	s, b := logBoard(t, t.TempDir())
	claimOne(t, b)
	if logSize(t, s) == 0 {
		t.Fatal("a claim left the log empty: it was not written through it")
	}
	data, err := os.ReadFile(filepath.Join(tasksDir(s), "1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var onDisk store.Task
	if err := json.Unmarshal(data, &onDisk); err != nil || onDisk.Owner != "w1" {
		t.Fatalf("1.json = %s (%v); want it claimed by w1", data, err)
	}
}

// A process killed between the log's fsync and the files leaves a line
// the files do not hold: the next holder of the lock writes it.
func TestBoardLogKilledBeforeFiles(t *testing.T) {
	dir := t.TempDir()
	s, b := logBoard(t, dir)
	task := claimOne(t, b)
	task.Status = store.TaskCompleted
	line, _ := json.Marshal(logLine{Tasks: []store.Task{task}})
	appendToLog(t, s, append(line, '\n'))

	s2, b2 := logBoard(t, dir)
	got, err := b2.Get(context.Background(), "1")
	if err != nil || got.Status != store.TaskCompleted {
		t.Fatalf("task 1 = %+v, %v; want the logged completion", got, err)
	}
	wantLogEmpty(t, s2, "recovery")
}

// After a crash of the machine a file may have lost the version the log
// holds: a marker of another boot replays the whole log.
func TestBoardLogMachineCrash(t *testing.T) {
	dir := t.TempDir()
	s, b := logBoard(t, dir)
	before, err := b.Create(context.Background(), store.Task{Subject: "one"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.ClaimFirst(context.Background(), "w1", []string{"1"}); err != nil {
		t.Fatal(err)
	}
	// The claim's write never reached the disk.
	old, _ := store.MarshalTask(&before)
	if err := os.WriteFile(filepath.Join(tasksDir(s), "1.json"), old, 0o600); err != nil {
		t.Fatal(err)
	}
	rebootAs(t, "another-boot")

	s2, b2 := logBoard(t, dir)
	list, err := b2.List(context.Background())
	if err != nil || len(list) != 1 || list[0].Owner != "w1" || list[0].Status != store.TaskInProgress {
		t.Fatalf("board after the reboot = %+v, %v; want task 1 claimed by w1", list, err)
	}
	wantLogEmpty(t, s2, "recovery")
}

// A line cut short by a crash during its append was never acknowledged.
func TestBoardLogTornTail(t *testing.T) {
	dir := t.TempDir()
	s, b := logBoard(t, dir)
	claimOne(t, b)
	appendToLog(t, s, []byte(`{"tasks":[{"id":"1","subject":"torn`))

	_, b2 := logBoard(t, dir)
	got, err := b2.Get(context.Background(), "1")
	if err != nil || got.Owner != "w1" || got.Subject != "one" {
		t.Fatalf("task 1 = %+v, %v; want the last whole version", got, err)
	}
}

// A line that is not cut short but unreadable is a hand edit: the board
// refuses to guess.
func TestBoardLogUnreadableLine(t *testing.T) {
	dir := t.TempDir()
	s, b := logBoard(t, dir)
	claimOne(t, b)
	appendToLog(t, s, []byte("not json\n"))

	_, b2 := logBoard(t, dir)
	if _, err := b2.Get(context.Background(), "1"); err == nil {
		t.Fatal("a board with an unreadable log line was read")
	}
}

// A write past the log (a removal here) empties it first: a replay after
// a reboot must not bring back what was removed since.
func TestBoardLogBypassCheckpoints(t *testing.T) {
	dir := t.TempDir()
	s, b := logBoard(t, dir)
	claimOne(t, b)
	ctx := context.Background()
	if _, err := b.Update(ctx, "1", func(t *store.Task) error { t.Status = store.TaskDeleted; return nil }); err != nil {
		t.Fatal(err)
	}
	wantLogEmpty(t, s, "a removal")
	rebootAs(t, "another-boot")
	_, b2 := logBoard(t, dir)
	if list, err := b2.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("board after the reboot = %+v, %v; want it empty", list, err)
	}
}

func TestBoardLogCheckpointsPastMax(t *testing.T) {
	boardLogMax.Store(1)
	t.Cleanup(func() { boardLogMax.Store(1 << 20) })
	s, b := logBoard(t, t.TempDir())
	claimOne(t, b)
	wantLogEmpty(t, s, "passing its bound")
}

// Without a boot id there is no log: every version is fsynced in place.
func TestBoardLogOffWithoutBootID(t *testing.T) {
	rebootAs(t, "")
	s, b := logBoard(t, t.TempDir())
	claimOne(t, b)
	if _, err := os.Stat(filepath.Join(tasksDir(s), ".log")); !os.IsNotExist(err) {
		t.Fatalf("a log was made without a boot id: %v", err)
	}
}

// Two stores on one board (two processes) write through one log: each
// finds the other's lines applied (the marker) and replays nothing, and
// both see every change.
func TestBoardLogTwoStores(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s1, b1 := logBoard(t, dir)
	_, b2 := logBoard(t, dir)
	for range 6 {
		if _, err := b1.Create(ctx, store.Task{Subject: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 6; i++ {
		b, owner := b1, "w1"
		if i%2 == 0 {
			b, owner = b2, "w2"
		}
		if _, err := b.ClaimFirst(ctx, owner, []string{strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if logSize(t, s1) == 0 {
		t.Fatal("the claims left the log empty")
	}
	for _, b := range []store.Tasks{b1, b2} {
		list, err := b.List(ctx)
		if err != nil || len(list) != 6 {
			t.Fatalf("board = %d tasks, %v", len(list), err)
		}
		for _, task := range list {
			want := "w1"
			if store.TaskNum(task.ID)%2 == 0 {
				want = "w2"
			}
			if task.Owner != want {
				t.Fatalf("task %s owned by %q, want %q", task.ID, task.Owner, want)
			}
		}
	}
}

// A clean close leaves the board its task files alone.
func TestBoardLogEmptiedAtClose(t *testing.T) {
	s, b := logBoard(t, t.TempDir())
	claimOne(t, b)
	if logSize(t, s) == 0 {
		t.Fatal("the claim left the log empty")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wantLogEmpty(t, s, "Close")
}

// Close empties the log only once the files hold it: a line another
// process left unapplied is replayed, not dropped.
func TestBoardLogCloseReplaysFirst(t *testing.T) {
	dir := t.TempDir()
	s, b := logBoard(t, dir)
	task := claimOne(t, b)
	task.Status = store.TaskCompleted
	line, _ := json.Marshal(logLine{Tasks: []store.Task{task}})
	appendToLog(t, s, append(line, '\n')) // another process, killed before its files
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wantLogEmpty(t, s, "Close")
	_, b2 := logBoard(t, dir)
	if got, err := b2.Get(context.Background(), "1"); err != nil || got.Status != store.TaskCompleted {
		t.Fatalf("task 1 = %+v, %v; want the completion the log held", got, err)
	}
}

// A log the files hold, by the marker, is left as it is by the next
// process: the marker is read, nothing is replayed.
func TestBoardLogAppliedNotReplayed(t *testing.T) {
	dir := t.TempDir()
	s, b := logBoard(t, dir)
	claimOne(t, b)
	if _, err := b.Create(context.Background(), store.Task{Subject: "two"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ClaimFirst(context.Background(), "w1", []string{"2"}); err != nil {
		t.Fatal(err)
	}
	n := logSize(t, s)
	_, b2 := logBoard(t, dir)
	if _, err := b2.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := logSize(t, s); got != n {
		t.Fatalf("the log went from %d to %d bytes when another store read the board", n, got)
	}
}
