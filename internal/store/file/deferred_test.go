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
// once and costs no fsync; the next durable line's fsync covers it, Sync
// gives it one when none did yet, and a store closed with deferred lines
// only fsyncs them.
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

	// Sync fsyncs deferred lines once, and nothing when none waits.
	if err := store.AppendTranscriptDeferred(t.Context(), tr, "alice", json.RawMessage(`{"n":4}`)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := store.SyncTranscript(t.Context(), tr, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	if n := count("alice.jsonl"); n != 2 {
		t.Fatalf("a deferred line synced twice cost %d fsyncs in all, want 2 (one for n=3, one for n=4)", n)
	}
	if err := store.SyncTranscript(t.Context(), tr, "dave"); err != nil {
		t.Fatalf("sync of a transcript never written: %v", err)
	}
	if n := count("dave.jsonl"); n != 0 {
		t.Errorf("sync of a transcript never written cost %d fsyncs", n)
	}
	if err := store.SyncTranscript(t.Context(), tr, "Not A Name!"); err == nil {
		t.Error("sync of a transcript with a bad member name: no error")
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
	if n := count("alice.jsonl"); n != 2 {
		t.Errorf("Close fsynced alice's transcript again (%d fsyncs), though nothing of it was left deferred", n)
	}
	if n := count("carol.jsonl"); n != 1 {
		t.Errorf("Close fsynced the archived carol again (%d fsyncs)", n)
	}
	got, err := os.ReadFile(filepath.Join(dir, "teams", "t1", "transcripts", "bob.jsonl"))
	if err != nil || string(got) != "{\"n\":1}\n" {
		t.Errorf("bob's transcript after Close: %q, %v", got, err)
	}
}
