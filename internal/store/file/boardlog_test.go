package file

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
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

// createFour makes tasks 1-4 in one CreateAll, task 2 blocked by task 1.
func createFour(t *testing.T, b store.Tasks) error {
	t.Helper()
	_, err := b.(store.TaskBatch).CreateAll(context.Background(), []store.Task{
		{Subject: "a"}, {Subject: "b", BlockedBy: []string{"1"}}, {Subject: "c"}, {Subject: "d"},
	})
	return err
}

// wantFour fails the test unless the board is the four tasks of
// createFour, linked both ways.
func wantFour(t *testing.T, b store.Tasks, after string) {
	t.Helper()
	list, err := b.List(context.Background())
	if err != nil || len(list) != 4 {
		t.Fatalf("board after %s = %+v, %v; want 4 tasks", after, list, err)
	}
	if len(list[0].Blocks) != 1 || list[0].Blocks[0] != "2" || len(list[1].BlockedBy) != 1 {
		t.Fatalf("board after %s: task 1 blocks %v, task 2 blocked by %v; want 1 -> 2", after, list[0].Blocks, list[1].BlockedBy)
	}
}

// A batch of creations is one line of the log, not an intent and a fsync
// per file: a reboot that lost some of the new files gets them back.
func TestBoardLogCreationBatch(t *testing.T) {
	dir := t.TempDir()
	s, b := logBoard(t, dir)
	if err := createFour(t, b); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(tasksDir(s), ".log"))
	var line logLine
	if err == nil {
		err = json.Unmarshal(data, &line)
	}
	if err != nil || len(line.Tasks) != 4 {
		t.Fatalf("the log is %q (%v); want one line of the batch's 4 tasks", data, err)
	}
	// The links of 3.json and 4.json never reached the disk.
	for _, id := range []string{"3", "4"} {
		if err := os.Remove(filepath.Join(tasksDir(s), id+".json")); err != nil {
			t.Fatal(err)
		}
	}
	rebootAs(t, "another-boot")
	_, b2 := logBoard(t, dir)
	wantFour(t, b2, "the reboot")
}

// A creation that also changes a task already on the board is a change of
// several existing files: it goes past the log, which is emptied first.
func TestBoardLogCreationOfDependentBypasses(t *testing.T) {
	s, b := logBoard(t, t.TempDir())
	claimOne(t, b)
	if _, err := b.Create(context.Background(), store.Task{Subject: "two", BlockedBy: []string{"1"}}); err != nil {
		t.Fatal(err)
	}
	wantLogEmpty(t, s, "a creation blocked by a task on the board")
}

// failTaskFiles makes the writes of task files fail: after writing the
// first half of a batch, fails times, then as before.
func failTaskFiles(t *testing.T, fails int) {
	old := replaceTaskFiles
	replaceTaskFiles = func(dir string, paths []string, data [][]byte, durable bool) ([]fs.FileInfo, error) {
		if fails == 0 {
			return old(dir, paths, data, durable)
		}
		fails--
		half := len(paths) / 2
		if _, err := old(dir, paths[:half], data[:half], durable); err != nil {
			return nil, err
		}
		return nil, errors.New("no space left on device (injected)")
	}
	t.Cleanup(func() { replaceTaskFiles = old })
}

// A batch whose line is durable is committed: a failure while its files
// are written is mended from the log at once, not taken back (which would
// leave half of them holding a change reported as failed).
func TestBoardLogFailedFilesReplayed(t *testing.T) {
	s, b := logBoard(t, t.TempDir())
	failTaskFiles(t, 1)
	if err := createFour(t, b); err != nil {
		t.Fatalf("a batch mended from its log failed: %v", err)
	}
	wantFour(t, b, "a failed write")
	wantLogEmpty(t, s, "the replay")
}

// Where the replay fails too, the caller hears of it, and the next holder
// of the lock (another process here) makes the change from the log.
func TestBoardLogFailedReplayLeftForNext(t *testing.T) {
	dir := t.TempDir()
	s, b := logBoard(t, dir)
	failTaskFiles(t, 2)
	if err := createFour(t, b); err == nil {
		t.Fatal("a batch whose files and replay failed reported success")
	}
	if logSize(t, s) == 0 {
		t.Fatal("the committed line was taken out of the log")
	}
	_, b2 := logBoard(t, dir)
	wantFour(t, b2, "the next holder of the lock")
}
