package file

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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
	s, tm := openT1(t, dir)
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

// TestDeferredJournalLines: deferred events are in the journal at once
// and cost no fsync on the caller's path; one fsync follows within
// deferredSyncDelay for all of them, and Close gives one to those still
// waiting.
func TestDeferredJournalLines(t *testing.T) {
	// Not parallel: it swaps the fsync seam and the delay.
	synced := make(chan struct{}, 16)
	var mu sync.Mutex
	n := 0
	real := syncAppended
	syncAppended = func(f *os.File) error {
		if filepath.Base(f.Name()) == "events.jsonl" {
			mu.Lock()
			n++
			mu.Unlock()
			select {
			case synced <- struct{}{}:
			default:
			}
		}
		return real(f)
	}
	delay := deferredSyncDelay
	t.Cleanup(func() { syncAppended, deferredSyncDelay = real, delay })
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}

	dir := t.TempDir()
	s, tm := openT1(t, dir)
	for len(synced) > 0 {
		<-synced
	}
	j := tm.Journal()
	if _, ok := j.(store.JournalDeferred); !ok {
		t.Fatal("the file store's journal cannot defer")
	}
	// Left alone, deferred events are synced once the delay has passed.
	deferredSyncDelay = time.Millisecond
	for range 3 {
		if err := store.AppendEventsDeferred(t.Context(), j, []store.Event{{Type: "usage"}}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-synced:
	case <-time.After(10 * time.Second):
		t.Fatal("deferred events were never synced")
	}

	// With a delay long enough that nothing but the test's own steps
	// syncs: no fsync on the caller's path, and a durable append covers
	// them.
	deferredSyncDelay = time.Hour
	before := count()
	if err := store.AppendEventsDeferred(t.Context(), j, []store.Event{{Type: "usage"}, {Type: "claim"}}); err != nil {
		t.Fatal(err)
	}
	if got := count() - before; got != 0 {
		t.Fatalf("deferred events cost %d fsyncs on the caller's path", got)
	}
	evs, err := j.Read(t.Context())
	if err != nil || len(evs) != 5 || evs[3].Type != "usage" || evs[4].Type != "claim" {
		t.Fatalf("journal after the deferred append: %v, %v", evs, err)
	}
	if err := j.Append(t.Context(), store.Event{Type: "send"}); err != nil {
		t.Fatal(err)
	}
	if got := count() - before; got != 1 {
		t.Fatalf("a durable append after deferred ones cost %d fsyncs, want 1", got)
	}

	// Close syncs what still waits.
	mark := count()
	if err := store.AppendEventsDeferred(t.Context(), j, []store.Event{{Type: "complete"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := count() - mark; got != 1 {
		t.Errorf("Close gave the deferred event %d fsyncs, want 1", got)
	}
	data, err := os.ReadFile(filepath.Join(dir, "teams", "t1", "events.jsonl"))
	if err != nil || strings.Count(string(data), "\n") != 7 || !strings.HasSuffix(string(data), "\n") {
		t.Errorf("journal after Close: %q, %v", data, err)
	}
}

// openT1 opens a file store in dir with a team t1.
func openT1(t *testing.T, dir string) (*Store, store.Team) {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := s.CreateTeam(t.Context(), store.Roster{Name: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	return s, tm
}
