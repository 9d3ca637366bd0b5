package file

// Broken state is loud: duplicate ids, failed appends, stray temporary
// files and read-only state directories.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gofrs/flock"
	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/store"
)

func openLogged(t *testing.T, dir string) (*Store, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	s, err := Open(dir, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, &logs
}

// A message reusing the id of one already handed out goes to .bad with a
// warning; the same line written twice (a retried append) is a repeat, not
// a duplicate, and is skipped quietly; a restarted reader handed the same
// unacked line again is a redelivery, not a duplicate.
func TestDuplicateIDSetAside(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	newTestTeam(t, dir, "alice")
	s, logs := openLogged(t, dir)
	ctx := context.Background()
	tm, err := s.OpenTeam("t1")
	if err != nil {
		t.Fatal(err)
	}
	mb := tm.Mailbox()
	first, err := mb.Send(ctx, store.Message{ID: "dup-1", From: "human", To: "alice", Content: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mb.Send(ctx, first); err != nil { // the same line again
		t.Fatal(err)
	}
	if got := contents(receiveNow(t, mb, "alice")); !cmp.Equal(got, []string{"first"}) {
		t.Fatalf("first Receive = %v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "teams/t1/inbox/alice.bad")); err == nil {
		t.Errorf("a repeated identical line was set aside")
	}
	if strings.Contains(logs.String(), "duplicate") {
		t.Errorf("a repeated identical line was warned about: %s", logs)
	}

	// A restarted reader gets the unacked line again: no warning.
	s2, logs2 := openLogged(t, dir)
	tm2, _ := s2.OpenTeam("t1")
	if got := contents(receiveNow(t, tm2.Mailbox(), "alice")); !cmp.Equal(got, []string{"first"}) {
		t.Fatalf("Receive after restart = %v", got)
	}
	if logs2.Len() != 0 {
		t.Errorf("redelivery after a restart logged: %s", logs2)
	}

	forged, err := tm2.Mailbox().Send(ctx, store.Message{ID: "dup-1", From: "human", To: "alice", Content: "forged"})
	if err != nil {
		t.Fatal(err)
	}
	if got := receiveNow(t, tm2.Mailbox(), "alice"); len(got) != 0 {
		t.Fatalf("a different message reusing an id was handed out: %v", contents(got))
	}
	bad := read(t, filepath.Join(dir, "teams/t1/inbox/alice.bad"))
	var m store.Message
	if err := json.Unmarshal([]byte(bad), &m); err != nil || m.Content != forged.Content {
		t.Errorf(".bad = %q (%v), want the forged line", bad, err)
	}
	if !strings.Contains(logs2.String(), "duplicate id dup-1") {
		t.Errorf("no warning naming the id: %s", logs2)
	}
}

func contents(ms []store.Message) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.Content)
	}
	return out
}

// failAfter makes appends write only n bytes and then fail, as a full disk
// does.
func failAfter(t *testing.T, n int) {
	t.Helper()
	old := appendWrite
	appendWrite = func(f *os.File, b []byte) (int, error) {
		w, err := f.Write(b[:min(n, len(b))])
		if err != nil {
			return w, err
		}
		return w, fmt.Errorf("write %s: no space left on device (injected)", f.Name())
	}
	t.Cleanup(func() { appendWrite = old })
}

// A failed append (disk full) leaves the inbox, the journal and a
// transcript as they were, ending in a whole line, and the next append
// after the fault is read normally.
func TestFailedAppendLeavesNoFragment(t *testing.T) {
	// Not parallel: it swaps appendWrite, which every store uses.
	dir := t.TempDir()
	tm := newTestTeam(t, dir, "alice")
	ctx := context.Background()
	team := filepath.Join(dir, "teams/t1")
	appends := []struct {
		name, file string
		do         func(content string) error
	}{
		{"inbox", "inbox/alice.jsonl", func(c string) error {
			_, err := tm.Mailbox().Send(ctx, store.Message{From: "human", To: "alice", Content: c})
			return err
		}},
		{"journal", "events.jsonl", func(c string) error {
			return tm.Journal().Append(ctx, store.Event{Type: "note", Fields: map[string]any{"c": c}})
		}},
		{"transcript", "transcripts/alice.jsonl", func(c string) error {
			return tm.AppendTranscript(ctx, "alice", json.RawMessage(fmt.Sprintf(`{"c":%q}`, c)))
		}},
	}
	for _, a := range appends {
		t.Run(a.name, func(t *testing.T) {
			path := filepath.Join(team, a.file)
			if err := a.do("before"); err != nil {
				t.Fatal(err)
			}
			before := read(t, path)
			for _, n := range []int{0, 1, 17, 40} {
				failAfter(t, n)
				if err := a.do(strings.Repeat("x", 100)); err == nil {
					t.Fatalf("append with a write failing after %d bytes reported no error", n)
				}
				appendWrite = func(f *os.File, b []byte) (int, error) { return f.Write(b) }
				if got := read(t, path); got != before {
					t.Fatalf("after a write failing at byte %d the file is\n%q\nwant\n%q", n, got, before)
				}
			}
			if err := a.do("after"); err != nil {
				t.Fatal(err)
			}
			got := read(t, path)
			lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
			if len(lines) != 2 || !strings.Contains(lines[1], "after") {
				t.Errorf("after the faults the file is %q", got)
			}
		})
	}
	if got := contents(receiveNow(t, tm.Mailbox(), "alice")); !cmp.Equal(got, []string{"before", "after"}) {
		t.Errorf("inbox after failed sends = %v", got)
	}
	if _, err := os.Stat(filepath.Join(team, "inbox/alice.bad")); err == nil {
		t.Errorf("failed sends left lines to set aside: %s", read(t, filepath.Join(team, "inbox/alice.bad")))
	}
}

// The same with the kernel's file size limit (RLIMIT_FSIZE) in a child
// process: a real short write followed by EFBIG.
func TestFileSizeLimitLeavesNoFragment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tm := newTestTeam(t, dir, "alice")
	ctx := context.Background()
	for _, c := range []string{"one", "two"} {
		if _, err := tm.Mailbox().Send(ctx, store.Message{From: "human", To: "alice", Content: c}); err != nil {
			t.Fatal(err)
		}
	}
	inbox := filepath.Join(dir, "teams/t1/inbox/alice.jsonl")
	before := read(t, inbox)
	cmd, out := child(t, dir, "fsize", 1, len(before)+60)
	data, _ := readAll(out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v (%s)", err, data)
	}
	if !strings.Contains(data, "file too large") {
		t.Fatalf("the child's send did not hit the size limit: %q", data)
	}
	if got := read(t, inbox); got != before {
		t.Errorf("inbox after a send over the size limit:\n%q\nwant\n%q", got, before)
	}
}

func readAll(r interface{ Read([]byte) (int, error) }) (string, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(r)
	return b.String(), err
}

// Temporary files left by writers killed before their rename are removed
// when a team is opened, unless a live writer may own them: its lock is
// held, or (for files no lock covers) they are recent.
func TestStrayTempsSweptAtOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	newTestTeam(t, dir, "alice", "bob")
	team := filepath.Join(dir, "teams/t1")
	old := time.Now().Add(-2 * staleTemp)
	files := map[string]bool{ // path -> removed at open
		".config.json.tmp123":          true,
		"tasks/.3.json.tmp77":          true,
		"tasks/..highwatermark.tmp8":   true,
		"inbox/.alice.cursor.tmp5":     true,
		"inbox/.alice.jsonl.tmp6":      true,
		"inbox/.bob.cursor.tmp9":       false, // bob's inbox lock is held below
		"inbox/.stray.tmp1":            false, // no lock covers it, and it is new
		"inbox/.old-stray.tmp2":        true,  // no lock covers it, but it is old
		"tasks/notes.tmp":              false, // not a temporary file of the store
		"transcripts/.alice.jsonl.tmp": false, // not a directory the store writes temporaries in
	}
	for f := range files {
		p := filepath.Join(team, f)
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(f, "old-stray") {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Another process writing bob's cursor holds bob's inbox lock.
	held := flock.New(filepath.Join(team, "inbox/bob.cursor"))
	if err := held.Lock(); err != nil {
		t.Fatal(err)
	}
	defer held.Unlock()

	s, logs := openLogged(t, dir)
	if _, err := s.OpenTeam("t1"); err != nil {
		t.Fatal(err)
	}
	for f, removed := range files {
		_, err := os.Stat(filepath.Join(team, f))
		if gone := errors.Is(err, os.ErrNotExist); gone != removed {
			t.Errorf("%s: removed = %v, want %v", f, gone, removed)
		}
	}
	if !strings.Contains(logs.String(), "temporary file") {
		t.Errorf("removals not logged: %s", logs)
	}
	// The store still works, and the lock it took is free again.
	tm, _ := s.OpenTeam("t1")
	if _, err := tm.Tasks().Create(context.Background(), store.Task{Subject: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Mailbox().Send(context.Background(), store.Message{From: "human", To: "alice", Content: "hi"}); err != nil {
		t.Fatal(err)
	}
}

// readOnlyView is what the read-only child saw.
type readOnlyView struct {
	Teams   []string
	Tasks   []string
	Corrupt []string
	Task2   string
	Inbox   []string
}

// readOnlyChild reads everything the read-only commands read, in a state
// directory it checks it cannot write, and prints it as JSON.
func readOnlyChild(dir string) int {
	if err := os.WriteFile(filepath.Join(dir, "probe"), nil, 0o644); err == nil {
		fmt.Fprintln(os.Stderr, "the state directory is writable")
		return 3
	}
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := Open(dir, Options{})
	if err != nil {
		return fail(err)
	}
	defer s.Close()
	ctx := context.Background()
	var v readOnlyView
	l, err := s.Teams(ctx)
	if err != nil {
		return fail(err)
	}
	for _, r := range l.Rosters {
		v.Teams = append(v.Teams, r.Name)
	}
	tm, err := s.OpenTeam("t1")
	if err != nil {
		return fail(err)
	}
	b, err := tm.Tasks().Board(ctx)
	if err != nil {
		return fail(err)
	}
	for _, t := range b.Tasks {
		v.Tasks = append(v.Tasks, t.ID+" "+t.Subject)
	}
	for _, c := range b.Corrupt {
		v.Corrupt = append(v.Corrupt, c.ID)
	}
	if _, err := tm.Tasks().List(ctx); err != nil {
		return fail(err)
	}
	t2, err := tm.Tasks().Get(ctx, "2")
	if err != nil {
		return fail(err)
	}
	v.Task2 = t2.Subject
	msgs, err := tm.Mailbox().Peek(ctx, "alice")
	if err != nil {
		return fail(err)
	}
	v.Inbox = contents(msgs)
	if err := json.NewEncoder(os.Stdout).Encode(v); err != nil {
		return fail(err)
	}
	return 0
}

// The reads behind `troupe tasks`, `inbox` and `team list|status` work on a
// read-only state directory: no lock file or directory is needed, and an
// unfinished multi-file change on the board is seen as done.
func TestReadOnlyStateDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tm := newTestTeam(t, dir, "alice")
	ctx := context.Background()
	for _, subj := range []string{"one", "two"} {
		if _, err := tm.Tasks().Create(ctx, store.Task{Subject: subj}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []string{"hi", "there"} {
		if _, err := tm.Mailbox().Send(ctx, store.Message{From: "human", To: "alice", Content: c}); err != nil {
			t.Fatal(err)
		}
	}
	team := filepath.Join(dir, "teams/t1")
	// A writer died mid-change: its intent renames task 2 and adds task 3.
	in := intent{Write: []store.Task{
		{ID: "2", Subject: "two, renamed", Status: store.TaskPending},
		{ID: "3", Subject: "three", Status: store.TaskPending},
	}}
	data, _ := json.Marshal(in)
	if err := os.WriteFile(filepath.Join(team, "tasks/.intent"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	// As if .troupe came from elsewhere: no lock file exists yet.
	locks, _ := filepath.Glob(filepath.Join(team, "*/*.lock")) // * matches .lock too
	for _, l := range locks {
		if err := os.Remove(l); err != nil {
			t.Fatal(err)
		}
	}

	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		// root writes through permissions: mount the directory read-only
		// in a mount namespace of the child's own.
		if _, err := exec.LookPath("unshare"); err != nil {
			t.Skip("running as root without unshare(1): cannot make a directory read-only")
		}
		cmd = exec.Command("unshare", "-m", "sh", "-c", `mount --bind -o ro "$1" "$1" && exec "$2" -test.run='^$'`, "sh", dir, os.Args[0])
	} else {
		chmodTree(t, dir, false)
		t.Cleanup(func() { chmodTree(t, dir, true) })
		cmd = exec.Command(os.Args[0], "-test.run=^$")
	}
	cmd.Env = append(os.Environ(), childEnv+"=readonly", "TROUPE_T_DIR="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if os.Geteuid() == 0 && strings.Contains(stderr.String(), "unshare") {
			t.Skipf("cannot make a read-only mount here: %s", stderr.String())
		}
		t.Fatalf("read-only reads failed: %v\n%s", err, stderr.String())
	}
	var got readOnlyView
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("child output %q: %v", out, err)
	}
	want := readOnlyView{Teams: []string{"t1"}, Tasks: []string{"1 one", "2 two, renamed", "3 three"},
		Task2: "two, renamed", Inbox: []string{"hi", "there"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("read-only view (-want +got):\n%s", diff)
	}
}

// chmodTree takes write permission away from everything under dir, or
// gives it back.
func chmodTree(t *testing.T, dir string, writable bool) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		mode := fi.Mode().Perm() &^ 0o222
		if writable {
			mode |= 0o200
		}
		return os.Chmod(p, mode)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestUnlockWithDescriptorCopy: a lock is released at unlock even while a
// copy of its descriptor lives on, as one does in a child forked but not
// yet exec'd (a tool's bash, a teammate's process). Closing alone left the
// lock held until that exec: TestStrayTempsSweptAtOpen, beside tests that
// start processes, found a lock of a closed store taken and swept nothing.
func TestUnlockWithDescriptorCopy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	var mine, other locks
	l := mine.get(path)
	if err := l.lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	forked, err := syscall.Dup(l.fd)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(forked)
	l.unlock()
	o := other.get(path)
	ok, err := o.tryLock()
	if err != nil || !ok {
		t.Fatalf("after unlock another holder's tryLock = %v, %v; want the lock", ok, err)
	}
	o.unlock()
}
