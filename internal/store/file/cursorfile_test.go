package file

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/store"
)

// cursorFixture is alice's inbox with three messages, the first two acked
// one at a time (two cursor writes), and the paths of her files.
func cursorFixture(t *testing.T) (dir string, sent []store.Message, cur string) {
	t.Helper()
	dir = t.TempDir()
	tm := newTestTeam(t, dir, "alice")
	ctx := context.Background()
	mb := tm.Mailbox()
	for _, c := range []string{"a", "b", "c"} {
		m, err := mb.Send(ctx, store.Message{From: "human", To: "alice", Content: c})
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, m)
	}
	got := receiveNow(t, mb, "alice")
	for _, m := range got[:2] {
		if err := mb.Ack(ctx, "alice", m.ID); err != nil {
			t.Fatal(err)
		}
	}
	return dir, sent, filepath.Join(dir, "teams/t1/inbox/alice.cursor")
}

// unread is what a new reader of alice's inbox (another process) gets.
func unread(t *testing.T, dir string) []string {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tm, err := s.OpenTeam("t1")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range receiveNow(t, tm.Mailbox(), "alice") {
		ids = append(ids, m.ID)
	}
	return ids
}

// TestCursorSlots: the cursor file is two fixed slots of JSON, written in
// turn, each readable with jq; the newest is the cursor.
func TestCursorSlots(t *testing.T) {
	t.Parallel()
	dir, sent, cur := cursorFixture(t)
	data := read(t, cur)
	if len(data) != 2*cursorSlot {
		t.Fatalf("cursor file of %d bytes, want two slots of %d", len(data), cursorSlot)
	}
	var seqs []int64
	for _, line := range strings.SplitAfter(strings.TrimSuffix(data, "\n"), "\n") {
		var c slotCursor
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("slot %q: %v", line, err)
		}
		seqs = append(seqs, c.Seq)
	}
	if !slices.Equal(seqs, []int64{1, 2}) {
		t.Fatalf("slot sequences %v, want [1 2]", seqs)
	}
	if got := unread(t, dir); !slices.Equal(got, []string{sent[2].ID}) {
		t.Fatalf("unread after two acks: %v, want %s", got, sent[2].ID)
	}
}

// TestCursorTornSlot: a newest slot torn by a crash, or naming a line the
// inbox does not have, gives way to the other slot, the cursor before it:
// the message it acked is delivered again, and nothing after it is lost.
func TestCursorTornSlot(t *testing.T) {
	t.Parallel()
	for name, damage := range map[string]func([]byte){
		"torn":    func(slot []byte) { copy(slot[10:], "\x00garbage") },
		"no line": func(slot []byte) { copy(slot, []byte(`{"seq":9,"offset":3,"len":2,"sum":"0000000000000000"}`)) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, sent, cur := cursorFixture(t)
			data := []byte(read(t, cur))
			damage(data[cursorSlot:]) // slot 1 holds the newest (seq 2)
			if err := os.WriteFile(cur, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if got, want := unread(t, dir), []string{sent[1].ID, sent[2].ID}; !slices.Equal(got, want) {
				t.Fatalf("unread: %v, want %v", got, want)
			}
		})
	}
}

// TestCursorOldFormat: a cursor file of one JSON line, as written before
// the slots, is the cursor, and the next ack goes on from it.
func TestCursorOldFormat(t *testing.T) {
	t.Parallel()
	dir, sent, cur := cursorFixture(t)
	slots, err := readSlots(cur)
	if err != nil || len(slots) != 2 {
		t.Fatalf("slots %v, %v", slots, err)
	}
	old, err := json.Marshal(slots[1].cursor) // the first ack's cursor
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cur, append(old, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := unread(t, dir), []string{sent[1].ID, sent[2].ID}; !slices.Equal(got, want) {
		t.Fatalf("unread over an old cursor file: %v, want %v", got, want)
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tm, _ := s.OpenTeam("t1")
	receiveNow(t, tm.Mailbox(), "alice")
	if err := tm.Mailbox().Ack(context.Background(), "alice", sent[1].ID); err != nil {
		t.Fatal(err)
	}
	if got := unread(t, dir); !slices.Equal(got, []string{sent[2].ID}) {
		t.Fatalf("unread after an ack over an old cursor file: %v, want %s", got, sent[2].ID)
	}
}
