package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDemoReplayedIdentically records the demo (three teammates working in
// parallel, a slow model so their calls overlap) and replays it three times
// in fresh workspaces, with no model at all. Each replay must match every
// request of every agent, and end in the same state: the same files, the
// same owner for each task, and the same conversation for each agent.
func TestDemoReplayedIdentically(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec")
	cassette := filepath.Join(dir, "demo.cassette")
	out, err := troupeCmd(t, "demo", "--headless", "--workspace", rec, "--model-latency", "5ms", "--record", cassette).CombinedOutput()
	if err != nil {
		t.Fatalf("record the demo: %v\n%s", err, out)
	}
	want := finalState(t, rec)
	if len(want.owners) != 4 || len(want.conversations) != 4 {
		t.Fatalf("recorded run: %d tasks, %d transcripts; want 4 and 4\n%s", len(want.owners), len(want.conversations), out)
	}
	for i := range 3 {
		ws := filepath.Join(dir, "replay"+string(rune('a'+i)))
		out, err := troupeCmd(t, "replay", cassette, "--workspace", ws).CombinedOutput()
		if err != nil {
			t.Fatalf("replay %d: %v\n%s", i+1, err, out)
		}
		if !strings.Contains(string(out), "replay matched the recording") {
			t.Fatalf("replay %d did not report a match:\n%s", i+1, out)
		}
		got := finalState(t, ws)
		for _, f := range demoFiles {
			if got.files[f] != want.files[f] {
				t.Errorf("replay %d: %s differs from the recorded run's", i+1, f)
			}
		}
		for id, owner := range want.owners {
			if got.owners[id] != owner {
				t.Errorf("replay %d: task %s owned by %q, recorded %q", i+1, id, got.owners[id], owner)
			}
		}
		for agent, conv := range want.conversations {
			g := got.conversations[agent]
			for k := range g {
				g[k] = strings.ReplaceAll(g[k], ws, rec)
			}
			if !slices.Equal(g, conv) {
				t.Errorf("replay %d: %s's conversation differs (%d messages, recorded %d)", i+1, agent, len(g), len(conv))
			}
		}
	}
}

// TestReplayReportsATeammatesChange replays the recorded demo into a
// workspace where the analyst's report already exists: its write_file now
// answers "Updated" instead of "Created", and the replay stops at that
// teammate's next call and names it.
func TestReplayReportsATeammatesChange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cassette := filepath.Join(dir, "demo.cassette")
	if out, err := troupeCmd(t, "demo", "--headless", "--workspace", filepath.Join(dir, "rec"), "--record", cassette).CombinedOutput(); err != nil {
		t.Fatalf("record the demo: %v\n%s", err, out)
	}
	ws := filepath.Join(dir, "changed")
	if err := os.MkdirAll(filepath.Join(ws, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "docs", "rest-endpoints.md"), []byte("old notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := troupeCmd(t, "replay", cassette, "--workspace", ws).CombinedOutput()
	if err == nil {
		t.Fatalf("replay in a changed workspace matched:\n%s", out)
	}
	if !strings.Contains(string(out), `replay diverged: agent "analyst" call `) || !strings.Contains(string(out), "content differs") {
		t.Fatalf("the divergence does not name the analyst's call and the content:\n%s", out)
	}
}

// runState is what a finished demo run left: the files it wrote, who owned
// each task, and each agent's conversation (its transcript's messages).
type runState struct {
	files         map[string]string
	owners        map[string]string
	conversations map[string][]string
}

func finalState(t *testing.T, ws string) runState {
	t.Helper()
	st := runState{files: map[string]string{}, owners: map[string]string{}, conversations: map[string][]string{}}
	for _, f := range demoFiles {
		data, err := os.ReadFile(filepath.Join(ws, f))
		if err != nil {
			t.Fatal(err)
		}
		st.files[f] = string(data)
	}
	archives, _ := filepath.Glob(filepath.Join(ws, ".troupe", "archive", "graphql-migration-*"))
	if len(archives) != 1 {
		t.Fatalf("%s: want one archived team, found %v", ws, archives)
	}
	tasks, _ := filepath.Glob(filepath.Join(archives[0], "tasks", "*.json"))
	for _, p := range tasks {
		var task struct{ ID, Owner, Status string }
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &task); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		st.owners[task.ID] = task.Owner + "/" + task.Status
	}
	transcripts, _ := filepath.Glob(filepath.Join(archives[0], "transcripts", "*.jsonl"))
	for _, p := range transcripts {
		agent := strings.TrimSuffix(filepath.Base(p), ".jsonl")
		for _, line := range readLines(t, p) {
			if role, ok := line["role"]; ok {
				data, _ := json.Marshal([]any{role, line["content"]})
				st.conversations[agent] = append(st.conversations[agent], string(data))
			}
		}
	}
	return st
}
