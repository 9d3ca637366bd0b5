package file

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/secret"
	"github.com/troupe-dev/troupe/internal/store"
)

// TestTranscriptRedacted: a registered secret never reaches a transcript
// or the journal on disk.
func TestTranscriptRedacted(t *testing.T) {
	t.Parallel()
	t.Cleanup(secret.Reset)
	secret.Register("sk-ant-store-test-secret")
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tm, err := s.CreateTeam(t.Context(), store.Roster{Name: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	ft := tm.(*Team)
	if err := ft.AppendTranscript(t.Context(), "alice", json.RawMessage(`{"text":"the key is sk-ant-store-test-secret"}`)); err != nil {
		t.Fatal(err)
	}
	if err := tm.Journal().Append(t.Context(), store.Event{Type: "note", Fields: map[string]any{"k": "sk-ant-store-test-secret"}}); err != nil {
		t.Fatal(err)
	}
	lines, err := ft.ReadTranscript(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(`{"text":"the key is [redacted]"}`, string(lines[0])); diff != "" {
		t.Errorf("transcript (-want +got):\n%s", diff)
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte("sk-ant-store-test-secret")) {
				t.Errorf("%s holds the secret", p)
			}
		}
		return nil
	})
}
