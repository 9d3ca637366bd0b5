package team_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/hook"
	"github.com/troupe-dev/troupe/internal/settings"
	"github.com/troupe-dev/troupe/internal/team"
)

// TestHookEventsAcrossTheTeam: the common fields of the events the lead
// and a teammate fire, the Stop hooks fired for the lead only, and the
// lead's session id kept in the team's journal.
func TestHookEventsAcrossTheTeam(t *testing.T) {
	t.Parallel()
	capture := `jq -c . >> "$CLAUDE_PROJECT_DIR/events.jsonl"`
	var hooks []settings.Hook
	for _, e := range []string{"PreToolUse", "Stop", "SessionStart", "TeammateIdle"} {
		hooks = append(hooks, settings.Hook{Event: e, Type: "command", Command: capture})
	}
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Crew up"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: crew}}
      - tool_use: {name: Task, input: {team_name: crew, name: worker, description: w, prompt: "Say hi."}}
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
  - agent: worker
    contains: "Say hi."
    reply: [{tool_use: {name: bash, input: {command: "echo hi"}}}]
  - agent: worker
    times: 0
    reply: [{text: "hi said"}]
`, withRules(t, hooks, nil), func(c *team.Config) { c.Rules.StateDir = filepath.Join(c.Workspace.Dir(), ".troupe") })
	f.run("Crew up.")
	data, err := os.ReadFile(filepath.Join(f.ws, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string][]map[string]any{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		key := ev["hook_event_name"].(string) + " " + str(ev["agent_name"]) + " " + str(ev["tool_name"])
		byKey[key] = append(byKey[key], ev)
	}
	one := func(key string) map[string]any {
		t.Helper()
		if len(byKey[key]) != 1 {
			t.Fatalf("%d %q events, want 1; all: %v", len(byKey[key]), key, byKey)
		}
		return byKey[key][0]
	}
	starts := one("SessionStart team-lead ")
	leadID, _ := starts["session_id"].(string)
	if len(leadID) != 36 || starts["source"] != "startup" {
		t.Errorf("SessionStart = %v", starts)
	}
	state := filepath.Join(f.ws, ".troupe", "teams", "crew", "transcripts")
	if ev := one("PreToolUse team-lead TeamCreate"); ev["session_id"] != leadID || ev["team_name"] != nil {
		t.Errorf("the lead before its team: %v", ev)
	}
	if ev := one("PreToolUse team-lead Agent"); ev["session_id"] != leadID || ev["team_name"] != "crew" ||
		ev["transcript_path"] != filepath.Join(state, "team-lead.jsonl") || ev["agent_id"] != nil {
		t.Errorf("the lead with its team: %v", ev)
	}
	r := f.roster()
	w := one("PreToolUse worker Bash")
	want := map[string]any{"session_id": hook.SessionID("crew", "worker", r.CreatedAt), "transcript_path": filepath.Join(state, "worker.jsonl"),
		"agent_id": "worker@crew", "agent_type": "teammate", "team_name": "crew"}
	got := map[string]any{}
	for k := range want {
		got[k] = w[k]
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the teammate's event (-want +got):\n%s", diff)
	}
	stop := one("Stop team-lead ")
	if stop["stop_hook_active"] != false || stop["last_assistant_message"] != "ok" {
		t.Errorf("Stop = %v", stop)
	}
	if len(byKey["Stop worker "]) != 0 {
		t.Errorf("a teammate fired Stop: %v", byKey["Stop worker "])
	}
	if len(byKey["TeammateIdle worker "]) == 0 {
		t.Error("the teammate fired no TeammateIdle")
	}
	var kept string
	for _, e := range f.journal() {
		if e.Type == "team_create" {
			kept, _ = e.Fields["session_id"].(string)
		}
	}
	if kept != leadID {
		t.Errorf("team_create keeps session_id %q, want the lead's %q", kept, leadID)
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// TestHookSessionIDSurvivesResume: the lead's session_id, made before its
// team existed, is the one a later session resuming the team fires
// SessionStart (source resume) with; SessionEnd fires when a session closes.
func TestHookSessionIDSurvivesResume(t *testing.T) {
	t.Parallel()
	capture := `jq -c '{e: .hook_event_name, id: .session_id, source, reason}' >> "$CLAUDE_PROJECT_DIR/events.jsonl"`
	var hooks []settings.Hook
	for _, e := range []string{"SessionStart", "SessionEnd"} {
		hooks = append(hooks, settings.Hook{Event: e, Type: "command", Command: capture})
	}
	script := `
rules:
  - agent: team-lead
    contains: "Make a team"
    reply: [{tool_use: {name: TeamCreate, input: {team_name: kept}}}]
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
`
	var cfg team.Config
	f := start(t, script, withRules(t, hooks, nil), func(c *team.Config) { cfg = *c })
	f.run("Make a team.")
	if err := f.sess.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := team.NewSession(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := again.Resume(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(f.ws, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		got = append(got, ev)
	}
	if len(got) != 3 {
		t.Fatalf("events: %v", got)
	}
	id := got[0]["id"]
	want := []map[string]any{
		{"e": "SessionStart", "id": id, "source": "startup", "reason": nil},
		{"e": "SessionEnd", "id": id, "source": nil, "reason": "other"},
		{"e": "SessionStart", "id": id, "source": "resume", "reason": nil},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestSubagentStopTranscript: SubagentStop carries the subagent's
// agent_id, agent_type (Claude Code's name) and agent_transcript_path, the
// file its messages were written to: under the lead's session when it has
// no team, beside the team's transcripts when it has one.
func TestSubagentStopTranscript(t *testing.T) {
	t.Parallel()
	capture := `jq -c '{e: .hook_event_name, id: .agent_id, type: .agent_type, path: .agent_transcript_path}' >> "$CLAUDE_PROJECT_DIR/events.jsonl"`
	hooks := []settings.Hook{{Event: "SubagentStop", Type: "command", Command: capture}}
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Look first"
    reply: [{tool_use: {name: Task, input: {description: look, prompt: "Look around alone.", subagent_type: explore}}}]
  - agent: "team-lead:explore"
    contains: "alone"
    reply: [{text: "REPORT alone"}]
  - agent: team-lead
    contains: "REPORT alone"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: crew}}
      - tool_use: {name: Task, input: {description: look, prompt: "Look around in a team.", subagent_type: explore}}
  - agent: "team-lead:explore"
    contains: "in a team"
    reply: [{text: "REPORT team"}]
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
`, withRules(t, hooks, nil), func(c *team.Config) { c.Rules.StateDir = filepath.Join(c.Workspace.Dir(), ".troupe") })
	f.run("Look first.")
	data, err := os.ReadFile(filepath.Join(f.ws, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d SubagentStop events, want 2: %s", len(lines), data)
	}
	for i, dir := range []string{
		filepath.Join(f.ws, ".troupe", "sessions", "*", "subagents"),
		filepath.Join(f.ws, ".troupe", "teams", "crew", "transcripts"),
	} {
		var ev struct{ E, ID, Type, Path string }
		if err := json.Unmarshal([]byte(lines[i]), &ev); err != nil {
			t.Fatal(err)
		}
		if ok, _ := filepath.Match(filepath.Join(dir, "team-lead-sub-"+ev.ID+".jsonl"), ev.Path); !ok || ev.ID == "" || ev.Type != "Explore" {
			t.Errorf("SubagentStop %d = %+v, want agent_transcript_path in %s", i, ev, dir)
			continue
		}
		b, err := os.ReadFile(ev.Path)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"alone", "in a team"}[i]; !strings.Contains(string(b), want) || !strings.Contains(string(b), `"role":"assistant"`) {
			t.Errorf("transcript %s holds %s; want the prompt with %q and the reply", ev.Path, b, want)
		}
	}
}
