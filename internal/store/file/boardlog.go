package file

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/troupe-dev/troupe/internal/store"
)

// The board's redo log, tasks/.log. A group commit of changes that write
// one task file each (claims, most updates: boardbatch.go) appends their
// new versions to it as one line and fdatasyncs it: that is the commit
// point. Only then are the versions written into their files, through the
// spares as before, with no fsync of the files or of the directory. A
// batch of k changes then costs one fsync where it cost k+1, all of them
// under the board lock. On the bench machine's disk the board's fsyncs
// were 63 % of the time the lock was held, and the lock was held for 90 %
// of a 50-teammate run.
//
// What a reader sees is always durable: a version is in its file only
// after its line is. The files lag behind the log only in the page cache,
// which two things can lose:
//
//   - a process killed between the log's fsync and the files (the page
//     cache is intact, the files were never written): tasks/.log.applied
//     says how much of the log the files hold, written (without an fsync)
//     after each batch;
//   - the machine going down (the files' writes were never written back):
//     the marker holds the boot id it was written in, and a marker of
//     another boot, or none, says nothing about the files.
//
// Whoever takes the board lock next, in any process, first compares the
// two (recoverLog): a log longer than the marker's size, or a marker of
// another boot, is replayed (each task's last version in the log, written
// durably), and the log is emptied (a checkpoint). A line cut short by a
// crash during its append was never acknowledged, and is dropped.
//
// The log holds the newest version of a task only until a write that
// bypasses it (a change of several files through the intent, a batch of
// creations, a removal): such a write first checkpoints the log (the files
// it names fsynced, the directory fsynced, the log emptied), so a replay
// never puts back a version older than one written since. The log is also
// checkpointed once it passes boardLogMax.
//
// Where the boot id cannot be read (no /proc), there is no log: every
// version is fsynced in its file, as before.

// boardLogMax is the size past which a batch checkpoints the log (set by
// tests).
var boardLogMax atomic.Int64

func init() { boardLogMax.Store(1 << 20) }

// bootID is this boot's id ("" where unknown: no log).
func bootID() string {
	if p := testBootID.Load(); p != nil {
		return *p
	}
	return systemBootID()
}

var systemBootID = sync.OnceValue(func() string {
	data, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
})

// testBootID stands for the boot id in tests (a reboot, or no /proc).
var testBootID atomic.Pointer[string]

// logLine is one batch in the log.
type logLine struct {
	Tasks []store.Task `json:"tasks"`
}

// logState is what this process last knew of a board's log: a log of
// this identity and size is applied.
type logState struct {
	mu      sync.Mutex
	fi      fs.FileInfo
	size    int64
	settled bool   // this process has held the board lock once
	board   *tasks // the board, once this process wrote to its log
}

// settle takes the board lock once in this process before its first read
// without it: after a crash of the machine a task file may hold less than
// its log, and only a holder of the lock brings it up to date. A board
// whose lock cannot be taken (a read-only .troupe) is read as it is.
func (b *tasks) settle(ctx context.Context) error {
	st := b.t.s.logs.get(b.t.key)
	st.mu.Lock()
	done := st.settled
	st.mu.Unlock()
	if done {
		return nil
	}
	err := b.locked(ctx, func(*tx) error { return nil })
	if err != nil && !lockUnavailable(err) {
		return err
	}
	st.mu.Lock()
	st.settled = true
	st.mu.Unlock()
	return nil
}

func (b *tasks) logPath() string    { return b.t.path("tasks", ".log") }
func (b *tasks) markerPath() string { return b.t.path("tasks", ".log.applied") }

// logOn reports whether the board uses its log.
func logOn() bool { return bootID() != "" }

// readMarker returns the marker's boot id and size ("" when there is none).
func (b *tasks) readMarker() (boot string, size int64, err error) {
	data, err := os.ReadFile(b.markerPath())
	if errors.Is(err, fs.ErrNotExist) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, err
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return "", 0, nil // torn, or by hand: says nothing
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || n < 0 {
		return "", 0, nil
	}
	return f[0], n, nil
}

// writeMarker records that the files hold the log up to size, in this
// boot. No fsync: after a crash of the machine the marker's boot id is
// another's anyway. The line is of one length within a boot (the size in
// 20 digits), so after each batch it is written over in place: a file cut
// to nothing and written again (os.WriteFile) cost as much as the log's
// own fdatasync. A checkpoint writes it whole, in case the one there is of
// another length.
func (b *tasks) writeMarker(size int64, whole bool) error {
	line := fmt.Appendf(nil, "%s %020d\n", bootID(), size)
	if whole {
		return os.WriteFile(b.markerPath(), line, 0o644)
	}
	fd, err := openFD(b.markerPath(), syscall.O_WRONLY|syscall.O_CREAT|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	_, err = retryEINTR(func() (int, error) { return syscall.Pwrite(fd, line, 0) })
	if cerr := syscall.Close(fd); err == nil {
		err = cerr
	}
	return err
}

// noteLog remembers that the log, as it is now, is applied.
func (b *tasks) noteLog(fi fs.FileInfo, size int64) {
	st := b.t.s.logs.get(b.t.key)
	st.mu.Lock()
	st.fi, st.size = fi, size
	st.mu.Unlock()
}

// checkpointLogs empties the logs this process wrote (Store.Close): a
// board no process works on is then its task files alone, and a file
// edited by hand afterwards is not written over by a replay after the
// next boot.
func (s *Store) checkpointLogs() {
	s.logs.mu.Lock()
	var boards []*tasks
	for _, st := range s.logs.m {
		st.mu.Lock()
		if st.board != nil {
			boards = append(boards, st.board)
		}
		st.mu.Unlock()
	}
	s.logs.mu.Unlock()
	for _, b := range boards {
		// Lines another process left unapplied are replayed first: only
		// a log the files hold is emptied by fsyncs alone.
		err := s.locks.withLock(context.Background(), b.t.path("tasks", ".lock"), func() error {
			if err := b.recoverLog(); err != nil {
				return err
			}
			return b.checkpointIfAny()
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.opts.Logger.Warn("checkpoint the task board's log", "team", b.t.name, "err", err)
		}
	}
}

// recoverLog brings the files up to the log (see above); the board lock
// is held.
func (b *tasks) recoverLog() error {
	fi, err := os.Stat(b.logPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	st := b.t.s.logs.get(b.t.key)
	st.mu.Lock()
	known := st.fi != nil && os.SameFile(st.fi, fi) && st.size == fi.Size()
	st.mu.Unlock()
	if known {
		return nil
	}
	boot, size, err := b.readMarker()
	if err != nil {
		return err
	}
	if boot == bootID() && boot != "" && size == fi.Size() {
		b.noteLog(fi, size)
		return nil
	}
	return b.checkpoint(true)
}

// readLog returns each task's last version in the log, in the order of
// their first appearance; a last line cut short is left out.
func (b *tasks) readLog() ([]*store.Task, error) {
	f, err := os.Open(b.logPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	last := map[string]*store.Task{}
	var order []string
	r := bufio.NewReader(f)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			break // a line without its newline was cut short: never acknowledged
		}
		if err != nil {
			return nil, err
		}
		var l logLine
		if err := json.Unmarshal(bytes.TrimSpace(line), &l); err != nil {
			return nil, fmt.Errorf("task board of team %s: %s line %d unreadable: %w", b.t.name, b.logPath(), n, err)
		}
		for i := range l.Tasks {
			t := l.Tasks[i]
			if _, ok := last[t.ID]; !ok {
				order = append(order, t.ID)
			}
			last[t.ID] = &t
		}
	}
	out := make([]*store.Task, len(order))
	for i, id := range order {
		out[i] = last[id]
	}
	return out, nil
}

// checkpoint makes every version in the log durable in its file and
// empties the log; the board lock is held. With replay (a crash left the
// files behind the log, or a boot came between) the files are written
// again from the log: a file the page cache holds cannot be told from one
// a crash of the machine reverted. Otherwise the files hold the log's
// versions already (the marker says so), and each is fsynced where it is.
func (b *tasks) checkpoint(replay bool) error {
	ts, err := b.readLog()
	if err != nil {
		return err
	}
	switch {
	case len(ts) == 0:
	case replay:
		ids := make([]string, len(ts))
		for i, t := range ts {
			ids[i] = t.ID
		}
		if err := b.logChange(ids); err != nil {
			return err
		}
		if err := b.writeTasks(ts, true); err != nil {
			return err
		}
	default:
		errs := make([]error, len(ts))
		atOnce(len(ts), syncWorkers, func(i int) {
			// A file gone (removed by hand) needs nothing.
			if err := syncFile(b.file(ts[i].ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs[i] = err
			}
		})
		if err := firstError(errs); err != nil {
			return err
		}
		if err := syncDir(b.dir()); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(b.logPath(), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	err = fdatasync(f)
	fi, serr := f.Stat()
	f.Close()
	if err == nil {
		err = serr
	}
	if err == nil && logOn() {
		if err = b.writeMarker(0, true); err == nil {
			b.noteLog(fi, 0)
		}
	}
	if err != nil {
		return fmt.Errorf("task board of team %s: checkpoint %s: %w", b.t.name, b.logPath(), err)
	}
	return nil
}

// checkpointIfAny checkpoints a log that holds anything, before a write
// that bypasses it; the board lock is held, and recover has run.
func (b *tasks) checkpointIfAny() error {
	fi, err := os.Stat(b.logPath())
	if errors.Is(err, fs.ErrNotExist) || (err == nil && fi.Size() == 0) {
		return nil
	}
	if err != nil {
		return err
	}
	return b.checkpoint(false)
}

// logBatch writes ts through the log: appended and fdatasynced, then
// written into their files without an fsync. A failure before the line is
// durable takes it back out of the log; the board lock is held.
func (b *tasks) logBatch(ts []*store.Task) error {
	var buf bytes.Buffer
	l := logLine{Tasks: make([]store.Task, len(ts))}
	for i, t := range ts {
		l.Tasks[i] = *t
	}
	if err := json.NewEncoder(&buf).Encode(&l); err != nil {
		return err
	}
	f, err := openFile(b.logPath(), os.O_WRONLY|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	at := fi.Size()
	if at == 0 {
		// A new log: its entry must be durable for its lines to be.
		if err := syncDir(b.dir()); err != nil {
			return err
		}
	}
	undo := func(err error) error {
		if terr := f.Truncate(at); terr != nil {
			return errors.Join(err, terr)
		}
		return errors.Join(err, fdatasync(f))
	}
	if _, err := f.WriteAt(buf.Bytes(), at); err != nil {
		return undo(err)
	}
	if err := timedSync(func() error { return fdatasync(f) }); err != nil {
		return undo(err)
	}
	if err := b.writeTasks(ts, false); err != nil {
		// The line is durable, so the batch is committed, and some of its
		// files may hold it already: taking the line back out would leave
		// them with a change its callers were told failed. The files are
		// written again from the log instead (a replay), here, or, where
		// that fails too, by the next holder of the lock, which finds the
		// marker behind the log. The callers then hear of the failure, and
		// their change is made all the same, as an intent's is.
		if rerr := b.checkpoint(true); rerr != nil {
			return errors.Join(err, rerr)
		}
		return nil
	}
	end := at + int64(buf.Len())
	if err := b.writeMarker(end, false); err != nil {
		// The files hold the batch; the next holder of the lock finds no
		// marker for it and checkpoints.
		b.t.s.opts.Logger.Warn("task board log marker", "team", b.t.name, "err", err)
		return nil
	}
	// fi is still the log's identity; its size is now end.
	st := b.t.s.logs.get(b.t.key)
	st.mu.Lock()
	st.fi, st.size = fi, end
	st.board = b // checkpointed at Close
	st.mu.Unlock()
	if end > boardLogMax.Load() {
		// The batch is committed whatever the checkpoint does: a failed
		// one is tried again at the next batch or at Close.
		if err := b.checkpoint(false); err != nil {
			b.t.s.opts.Logger.Warn("task board log checkpoint", "team", b.t.name, "err", err)
		}
	}
	return nil
}
