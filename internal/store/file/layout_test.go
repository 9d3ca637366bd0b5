package file

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/store"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func appendRaw(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func receiveNow(t *testing.T, mb store.Mailbox, member string) []store.Message {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // hand out what is there, do not wait
	ms, err := mb.Receive(ctx, member)
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	return ms
}

func TestLayout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tm := newTestTeam(t, dir, "alice")
	ctx := context.Background()
	if _, err := tm.Tasks().Create(ctx, store.Task{Subject: "a"}); err != nil {
		t.Fatal(err)
	}
	m, err := tm.Mailbox().Send(ctx, store.Message{From: "human", To: "alice", Content: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tm.Journal().Append(ctx, store.Event{Type: "spawn", Agent: "alice"}); err != nil {
		t.Fatal(err)
	}
	if err := tm.AppendTranscript(ctx, "alice", json.RawMessage(`{"role": "user"}`)); err != nil {
		t.Fatal(err)
	}
	team := filepath.Join(dir, "teams", "t1")
	for _, f := range []string{"config.json", "inbox/alice.jsonl", "tasks/1.json",
		"tasks/.lock", "events.jsonl", "transcripts/alice.jsonl"} {
		if _, err := os.Stat(filepath.Join(team, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(read(t, filepath.Join(team, "inbox/alice.jsonl"))), &line); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "type", "from", "to", "content", "timestamp"} {
		if _, ok := line[k]; !ok {
			t.Errorf("message line lacks %q: %v", k, line)
		}
	}
	if line["id"] != m.ID {
		t.Errorf("id %v, want %s", line["id"], m.ID)
	}
	// The high-water mark is written when a task goes: before that the
	// task files hold the highest id.
	if _, err := os.Stat(filepath.Join(team, "tasks/.highwatermark")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf(".highwatermark before any task was deleted: %v", err)
	}

	ev := read(t, filepath.Join(team, "events.jsonl"))
	for _, want := range []string{`"type":"spawn"`, `"team":"t1"`, `"agent":"alice"`, `"ts":`} {
		if !strings.Contains(ev, want) {
			t.Errorf("events.jsonl %q lacks %s", ev, want)
		}
	}
	if got := read(t, filepath.Join(team, "transcripts/alice.jsonl")); got != "{\"role\":\"user\"}\n" {
		t.Errorf("transcript = %q", got)
	}
	lines, err := tm.ReadTranscript(ctx, "alice")
	if err != nil || len(lines) != 1 {
		t.Errorf("ReadTranscript = %s, %v", lines, err)
	}
	if err := tm.AppendTranscript(ctx, "alice", json.RawMessage(`{"a":1} {"b":2}`)); err == nil {
		t.Error("two JSON values accepted as one transcript line")
	}
	// Tasks written by hand (or by another implementation of the format)
	// are read, in numeric order.
	hand := `{"id":"10","subject":"by hand","status":"pending","blocked_by":[],"blocks":[]}`
	if err := os.WriteFile(filepath.Join(team, "tasks/10.json"), []byte(hand), 0o644); err != nil {
		t.Fatal(err)
	}
	list, err := tm.Tasks().List(ctx)
	if err != nil || len(list) != 2 || list[1].ID != "10" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if tk, err := tm.Tasks().Create(ctx, store.Task{Subject: "next"}); err != nil || tk.ID != "11" {
		t.Errorf("Create after a hand-written 10 = %v, %v", tk.ID, err)
	}
	// Deleting the highest task writes the mark, and its id is not given
	// again.
	if _, err := tm.Tasks().Update(ctx, "11", func(t *store.Task) error { t.Status = store.TaskDeleted; return nil }); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(team, "tasks/.highwatermark")); got != "11\n" {
		t.Errorf(".highwatermark = %q", got)
	}
	if tk, err := tm.Tasks().Create(ctx, store.Task{Subject: "after"}); err != nil || tk.ID != "12" {
		t.Errorf("Create after deleting 11 = %v, %v", tk.ID, err)
	}
}

// A torn last line waits until it is complete; a malformed complete line is
// set aside in <member>.bad; a sender after a torn line that will never be
// completed does not glue its line to it.
func TestTornAndMalformedLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var logs bytes.Buffer
	s, err := Open(dir, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.CreateTeam(ctx, store.Roster{Name: "t1", Members: []store.Member{{Name: "alice"}}}); err != nil {
		t.Fatal(err)
	}
	tm, _ := s.OpenTeam("t1")
	mb := tm.Mailbox()
	inbox := filepath.Join(dir, "teams/t1/inbox/alice.jsonl")

	m, _ := store.MarshalMessageLine(&store.Message{ID: "m1", Type: "message", From: "human", To: "alice", Content: "whole", Timestamp: s.opts.Now()})
	half := len(m) / 2
	appendRaw(t, inbox, string(m[:half]))
	if got := receiveNow(t, mb, "alice"); len(got) != 0 {
		t.Fatalf("torn line handed out: %+v", got)
	}
	appendRaw(t, inbox, string(m[half:]))
	got := receiveNow(t, mb, "alice")
	if len(got) != 1 || got[0].Content != "whole" {
		t.Fatalf("completed line: %+v", got)
	}

	appendRaw(t, inbox, "{not json}\n")
	appendRaw(t, inbox, `{"id":"x","type":"nope","from":"a","to":"b","timestamp":"2026-01-01T00:00:00Z"}`+"\n")
	appendRaw(t, inbox, `{"id":"torn-forever","ty`) // its writer died
	sent, err := mb.Send(ctx, store.Message{From: "human", To: "alice", Content: "after"})
	if err != nil {
		t.Fatal(err)
	}
	got = receiveNow(t, mb, "alice")
	if len(got) != 1 || got[0].ID != sent.ID {
		t.Fatalf("after malformed lines: %+v", got)
	}
	bad := read(t, filepath.Join(dir, "teams/t1/inbox/alice.bad"))
	if n := strings.Count(bad, "\n"); n != 3 || !strings.Contains(bad, "torn-forever") {
		t.Errorf(".bad holds %d lines:\n%s", n, bad)
	}
	if !strings.Contains(logs.String(), "malformed inbox line") {
		t.Errorf("no warning logged: %s", logs.String())
	}
	if err := mb.Ack(ctx, "alice", sent.ID); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(inbox); fi.Size() != 0 {
		t.Errorf("inbox not cleared after everything was acked: %d bytes", fi.Size())
	}
}

// A reader killed between clearing its inbox and resetting its cursor finds
// a cursor that no longer matches: it starts from 0 and skips nothing, even
// when new messages have grown the file past the old offset.
func TestStaleCursorAfterCrash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tm := newTestTeam(t, dir, "alice")
	ctx := context.Background()
	mb := tm.Mailbox()
	inbox := filepath.Join(dir, "teams/t1/inbox/alice.jsonl")
	cur := filepath.Join(dir, "teams/t1/inbox/alice.cursor")
	var first []store.Message
	for _, c := range []string{"a", "b"} {
		m, err := mb.Send(ctx, store.Message{From: "human", To: "alice", Content: c})
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, m)
	}
	got := receiveNow(t, mb, "alice")
	if err := mb.Ack(ctx, "alice", got[0].ID); err != nil { // cursor in the middle
		t.Fatal(err)
	}
	stale := read(t, cur)
	// The crash: the file is cleared but the cursor is not reset.
	if err := mb.Ack(ctx, "alice", got[1].ID); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cur, []byte(stale), 0o644); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 5 {
		m, err := mb.Send(ctx, store.Message{From: "human", To: "alice", Content: strings.Repeat("x", i+1)})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, m.ID)
	}
	if fi, _ := os.Stat(inbox); fi.Size() <= int64(len(first[0].Content)) {
		t.Fatal("test needs the file to grow past the stale offset")
	}
	peek, err := mb.Peek(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	// A fresh reader (another process) must see all five.
	s2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	tm2, _ := s2.OpenTeam("t1")
	got = receiveNow(t, tm2.Mailbox(), "alice")
	for name, ms := range map[string][]store.Message{"Peek": peek, "Receive": got} {
		var ids []string
		for _, m := range ms {
			ids = append(ids, m.ID)
		}
		if !slices.Equal(ids, want) {
			t.Errorf("%s after a stale cursor = %v, want %v", name, ids, want)
		}
	}
}

func TestInboxFull(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, Options{MaxInboxBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.CreateTeam(ctx, store.Roster{Name: "t1", Members: []store.Member{{Name: "alice"}}}); err != nil {
		t.Fatal(err)
	}
	tm, _ := s.OpenTeam("t1")
	mb := tm.Mailbox()
	var sent []store.Message
	for {
		m, err := mb.Send(ctx, store.Message{From: "human", To: "alice", Content: strings.Repeat("x", 100)})
		if errors.Is(err, store.ErrInboxFull) {
			if !strings.Contains(err.Error(), "alice") || !strings.Contains(err.Error(), "limit 1000") {
				t.Errorf("unclear error: %v", err)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, m)
		if len(sent) > 10 {
			t.Fatal("a 1000-byte inbox took more than 10 messages of 200 bytes")
		}
	}
	if got, _ := mb.Peek(ctx, "alice"); len(got) != len(sent) {
		t.Errorf("refused send was written: %d messages, %d sent", len(got), len(sent))
	}
	// Reading one message (without clearing the file) makes room again.
	receiveNow(t, mb, "alice")
	if err := mb.Ack(ctx, "alice", sent[1].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := mb.Send(ctx, store.Message{From: "human", To: "alice", Content: "room"}); err != nil {
		t.Errorf("send after reading: %v", err)
	}
	// Other inboxes are not affected.
	if _, err := mb.Send(ctx, store.Message{From: "human", To: "lead", Content: "x"}); err != nil {
		t.Error(err)
	}
}

// A reader whose acked prefix grows past compactBytes while senders keep
// the file from ever emptying rewrites it without the prefix.
func TestInboxCompaction(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tm := newTestTeam(t, dir, "alice")
	ctx := context.Background()
	mb := tm.Mailbox()
	inbox := filepath.Join(dir, "teams/t1/inbox/alice.jsonl")
	big := strings.Repeat("y", 64<<10)
	var n int
	for range compactBytes/len(big) + 2 {
		if _, err := mb.Send(ctx, store.Message{From: "human", To: "alice", Content: big}); err != nil {
			t.Fatal(err)
		}
		n++
	}
	got := receiveNow(t, mb, "alice")
	if _, err := mb.Send(ctx, store.Message{From: "human", To: "alice", Content: "tail"}); err != nil {
		t.Fatal(err)
	}
	if err := mb.Ack(ctx, "alice", got[len(got)-1].ID); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(inbox)
	if fi.Size() > 1024 {
		t.Errorf("inbox is %d bytes after its %d-message prefix was consumed", fi.Size(), n)
	}
	rest := receiveNow(t, mb, "alice")
	if len(rest) != 1 || rest[0].Content != "tail" {
		t.Fatalf("after compaction: %+v", rest)
	}
}

// A multi-file board change interrupted by a crash is finished by the next
// one to take the lock.
func TestTaskIntentReplay(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tm := newTestTeam(t, dir)
	ctx := context.Background()
	for range 2 {
		if _, err := tm.Tasks().Create(ctx, store.Task{Subject: "s"}); err != nil {
			t.Fatal(err)
		}
	}
	one, _ := tm.Tasks().Get(ctx, "1")
	two, _ := tm.Tasks().Get(ctx, "2")
	one.Blocks, two.BlockedBy = []string{"2"}, []string{"1"}
	// The crash: the intent is durable, only task 2 was written.
	in, _ := json.Marshal(intent{Write: []store.Task{two, one}})
	if err := os.WriteFile(filepath.Join(tm.dir, "tasks/.intent"), in, 0o644); err != nil {
		t.Fatal(err)
	}
	data, _ := store.MarshalTask(&two)
	if err := os.WriteFile(filepath.Join(tm.dir, "tasks/2.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := tm.Tasks().Get(ctx, "1")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Blocks, []string{"2"}) {
		t.Errorf("task 1 blocks %v after replay", got.Blocks)
	}
	if _, err := os.Stat(filepath.Join(tm.dir, "tasks/.intent")); !os.IsNotExist(err) {
		t.Errorf(".intent left behind: %v", err)
	}
}

// TestMemberFiles: a member's inbox is its messages and its cursor, which
// is also the inbox's lock, and its transcript is its own lock: no lock
// file of their own. A cursor file that its lock made before any ack
// reads as nothing read.
func TestMemberFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tm := newTestTeam(t, dir, "alice")
	ctx := context.Background()
	for _, c := range []string{"one", "two"} {
		if _, err := tm.Mailbox().Send(ctx, store.Message{From: "human", To: "alice", Content: c}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tm.AppendTranscript(ctx, "alice", json.RawMessage(`{"role":"user"}`)); err != nil {
		t.Fatal(err)
	}
	team := filepath.Join(dir, "teams", "t1")
	list := func(sub string) []string { return dirNames(t, filepath.Join(team, sub)) }
	if got, want := list("inbox"), []string{"alice.cursor", "alice.jsonl"}; !slices.Equal(got, want) {
		t.Errorf("inbox/ = %v, want %v", got, want)
	}
	if got, want := list("transcripts"), []string{"alice.jsonl"}; !slices.Equal(got, want) {
		t.Errorf("transcripts/ = %v, want %v", got, want)
	}
	if fi, err := os.Stat(filepath.Join(team, "inbox", "alice.cursor")); err != nil || fi.Size() != 0 {
		t.Fatalf("cursor before any ack: %v, %v; want an empty file", fi, err)
	}
	ms := receiveNow(t, tm.Mailbox(), "alice")
	if len(ms) != 2 || ms[0].Content != "one" || ms[1].Content != "two" {
		t.Fatalf("received %+v, want one and two", ms)
	}
	if err := tm.Mailbox().Ack(ctx, "alice", ms[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Mailbox().Send(ctx, store.Message{From: "human", To: "alice", Content: "three"}); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	other, err := s2.Team(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range receiveNow(t, other.Mailbox(), "alice") {
		got = append(got, m.Content)
	}
	if !slices.Equal(got, []string{"two", "three"}) {
		t.Errorf("after acking one, another client receives %v, want [two three]", got)
	}
}
