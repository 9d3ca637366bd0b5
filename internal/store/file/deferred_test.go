package file

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/troupe-dev/troupe/internal/store"
)

// TestDeferredTranscriptLines: a deferred line is in the transcript at
// once and costs no fsync; the next durable line's fsync covers it, and a
// store closed with deferred lines only fsyncs them.
func TestDeferredTranscriptLines(t *testing.T) {
	// Not parallel: it swaps the fsync seam.
	var mu sync.Mutex
	syncs := map[string]int{}
	real := syncAppended
	syncAppended = func(f *os.File) error {
		mu.Lock()
		syncs[filepath.Base(f.Name())]++
		mu.Unlock()
		return real(f)
	}
	t.Cleanup(func() { syncAppended = real })
	count := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return syncs[name]
	}

	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := s.CreateTeam(t.Context(), store.Roster{Name: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	tr := tm.Transcripts()
	if _, ok := tr.(store.TranscriptsDeferred); !ok {
		t.Fatal("the file store's transcripts cannot defer")
	}
	lines := func(member string) string {
		got, err := tr.Read(t.Context(), member)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, l := range got {
			b.Write(l)
		}
		return b.String()
	}

	for _, l := range []string{`{"n":1}`, `{"n":2}`} {
		if err := store.AppendTranscriptDeferred(t.Context(), tr, "alice", json.RawMessage(l)); err != nil {
			t.Fatal(err)
		}
	}
	if got := lines("alice"); got != `{"n":1}{"n":2}` {
		t.Fatalf("deferred lines read %s", got)
	}
	if n := count("alice.jsonl"); n != 0 {
		t.Fatalf("deferred lines cost %d fsyncs, want 0", n)
	}
	if err := tr.Append(t.Context(), "alice", json.RawMessage(`{"n":3}`)); err != nil {
		t.Fatal(err)
	}
	if n := count("alice.jsonl"); n != 1 {
		t.Fatalf("a durable line after deferred ones cost %d fsyncs, want 1", n)
	}
	if got := lines("alice"); got != `{"n":1}{"n":2}{"n":3}` {
		t.Fatalf("transcript reads %s", got)
	}

	// An archived team's transcripts are made durable before they move.
	t2, err := s.CreateTeam(t.Context(), store.Roster{Name: "t2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.AppendTranscriptDeferred(t.Context(), t2.Transcripts(), "carol", json.RawMessage(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ArchiveTeam(t.Context(), "t2"); err != nil {
		t.Fatal(err)
	}
	if n := count("carol.jsonl"); n != 1 {
		t.Errorf("archiving gave carol's deferred line %d fsyncs, want 1", n)
	}

	// bob ends on a deferred line; alice on a durable one.
	if err := store.AppendTranscriptDeferred(t.Context(), tr, "bob", json.RawMessage(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := count("bob.jsonl"); n != 1 {
		t.Errorf("Close gave bob's deferred line %d fsyncs, want 1", n)
	}
	if n := count("alice.jsonl"); n != 1 {
		t.Errorf("Close fsynced alice's transcript again (%d fsyncs), though nothing of it was deferred", n)
	}
	if n := count("carol.jsonl"); n != 1 {
		t.Errorf("Close fsynced the archived carol again (%d fsyncs)", n)
	}
	got, err := os.ReadFile(filepath.Join(dir, "teams", "t1", "transcripts", "bob.jsonl"))
	if err != nil || string(got) != "{\"n\":1}\n" {
		t.Errorf("bob's transcript after Close: %q, %v", got, err)
	}
}
