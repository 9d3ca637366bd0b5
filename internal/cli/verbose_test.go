package cli

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/store"
)

// TestVerboseEvent: every line names who wrote it; kinds without words of
// their own show their fields as sorted key=value, never as a Go map.
func TestVerboseEvent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ev   store.Event
		want string
	}{
		{"status-own", store.Event{Type: "status", Agent: "alice", Fields: map[string]any{"member": "alice", "status": "idle"}},
			"· alice is idle"},
		{"status-other", store.Event{Type: "status", Agent: "team-lead", Fields: map[string]any{"member": "bob", "status": "working"}},
			"· team-lead bob is working"},
		{"tool-write", store.Event{Type: "tool", Agent: "alice", Fields: map[string]any{"tool": "write_file", "path": "a.go"}},
			"· alice runs write_file on a.go"},
		{"tool-bash", store.Event{Type: "tool", Agent: "alice", Fields: map[string]any{"tool": "bash", "command": "go test"}},
			"· alice runs bash: go test"},
		{"tool-failed", store.Event{Type: "tool", Agent: "alice", Fields: map[string]any{"tool": "read_file", "error": "no such file"}},
			"· alice read_file failed: no such file"},
		{"generic", store.Event{Type: "restart", Agent: "team-lead", Fields: map[string]any{"member": "bob", "exit": "killed", "restarts": float64(1)}},
			"· team-lead restart exit=killed member=bob restarts=1"},
		{"unknown-kind", store.Event{Type: "future_thing", Fields: map[string]any{"list": []any{"a", "b"}, "n": map[string]any{"k": "v"}}},
			`· troupe future_thing list=["a","b"] n={"k":"v"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.ev.TS, tc.ev.Team = time.Now(), "t1"
			if diff := cmp.Diff(tc.want, verboseEvent(tc.ev)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
