package hook

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/settings"
	"github.com/troupe-dev/troupe/internal/shell"
	"github.com/troupe-dev/troupe/internal/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func cmdHook(event, matcher, command string) settings.Hook {
	return settings.Hook{Event: event, Matcher: matcher, Type: "command", Command: command,
		Source: settings.Source{Scope: settings.ScopeProject, Path: "/ws/.troupe/settings.json"}}
}

func newRunner(t *testing.T, dir string, hooks ...settings.Hook) *Runner {
	t.Helper()
	r, err := New(Config{Hooks: hooks, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v: %s", path, err, b)
	}
	return m
}

var who = Who{Agent: "alice", Team: "t1", Role: "tester", Mode: func() string { return "default" }}

func bashCall(cmd string) agent.Call {
	in, _ := json.Marshal(map[string]string{"command": cmd})
	return agent.Call{ID: "toolu_1", Name: "bash", Input: in}
}

func TestPreToolUseExit2Blocks(t *testing.T) {
	dir := t.TempDir()
	r := newRunner(t, dir, cmdHook(settings.PreToolUse, "Bash",
		`cat > "$TROUPE_PROJECT_DIR/event.json"; echo "rm is not allowed here" >&2; exit 2`))
	var nextCalled bool
	g := r.Gate(who, func(context.Context, agent.Call) agent.Decision {
		nextCalled = true
		return agent.Decision{Allow: true}
	})
	d := g(context.Background(), bashCall("rm -rf build"))
	if d.Allow || d.Reason != "blocked by a PreToolUse hook: rm is not allowed here" {
		t.Errorf("decision = %+v", d)
	}
	if nextCalled {
		t.Error("the next gate ran after a block")
	}
	got := readJSON(t, filepath.Join(dir, "event.json"))
	want := map[string]any{
		"hook_event_name": "PreToolUse", "cwd": dir, "permission_mode": "default",
		"agent_name": "alice", "team_name": "t1", "agent_role": "tester",
		"tool_name": "Bash", "tool_input": map[string]any{"command": "rm -rf build"}, "tool_use_id": "toolu_1",
		"session_id": "", "transcript_path": "",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stdin (-want +got):\n%s", diff)
	}
	// Not matched: the gate goes straight to next.
	in, _ := json.Marshal(map[string]string{"path": "x"})
	if d := g(context.Background(), agent.Call{Name: "read_file", Input: in}); !d.Allow || !nextCalled {
		t.Errorf("unmatched tool: %+v", d)
	}
}

func TestDecisions(t *testing.T) {
	tests := []struct {
		name    string
		scripts []string
		want    Outcome
	}{
		{"exit 0 silent", []string{"true"}, Outcome{}},
		{"approve", []string{`echo '{"decision": "approve", "reason": "fine"}'`}, Outcome{Permission: permission.Allow, PermissionReason: "fine"}},
		{"block", []string{`echo '{"decision": "block", "reason": "not now"}'`}, Outcome{Blocked: true, Reason: "not now"}},
		{"permission allow", []string{`echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "permissionDecisionReason": "ok"}}'`},
			Outcome{Permission: permission.Allow, PermissionReason: "ok"}},
		{"permission ask", []string{`echo '{"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "sure?"}}'`},
			Outcome{Permission: permission.Ask, PermissionReason: "sure?"}},
		{"permission deny", []string{`echo '{"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "no"}}'`},
			Outcome{Blocked: true, Reason: "no", Permission: permission.Deny, PermissionReason: "no"}},
		{"deny beats allow", []string{
			`echo '{"hookSpecificOutput": {"permissionDecision": "allow"}}'`,
			`echo '{"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "no"}}'`},
			Outcome{Blocked: true, Reason: "no", Permission: permission.Deny, PermissionReason: "no"}},
		{"any block wins", []string{`exit 0`, `echo stop >&2; exit 2`}, Outcome{Blocked: true, Reason: "stop"}},
		{"continue false", []string{`echo '{"continue": false, "stopReason": "done for today", "systemMessage": "bye"}'`},
			Outcome{Stop: true, StopReason: "done for today", Messages: []string{"bye"}}},
		{"context", []string{`echo '{"hookSpecificOutput": {"additionalContext": "lint is clean"}}'`}, Outcome{Context: []string{"lint is clean"}}},
		{"exit 1 does not block", []string{`echo broken >&2; exit 1`}, Outcome{}},
		{"bad JSON does not block", []string{`echo '{"decision": '`}, Outcome{}},
		{"plain stdout ignored", []string{`echo hello`}, Outcome{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hooks []settings.Hook
			for _, s := range tt.scripts {
				hooks = append(hooks, cmdHook(settings.PreToolUse, "", s))
			}
			r := newRunner(t, t.TempDir(), hooks...)
			got := r.Run(context.Background(), who.Event(settings.PreToolUse))
			if len(got.Runs) != len(tt.scripts) {
				t.Errorf("%d runs, want %d", len(got.Runs), len(tt.scripts))
			}
			got.Runs = nil
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNonBlockingErrorsReported(t *testing.T) {
	var reported []string
	r, err := New(Config{Dir: t.TempDir(), Hooks: []settings.Hook{
		cmdHook(settings.Stop, "", `echo "lint crashed" >&2; exit 3`),
		cmdHook(settings.Stop, "", `echo '{"decision":'`),
	}, Report: func(ev Event, res Result) {
		if res.Err != nil {
			reported = append(reported, ev.Name+": "+res.Err.Error())
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	out := r.Stop(context.Background(), who, false, false)
	if out.Blocked {
		t.Error("a failing hook blocked")
	}
	errs := out.Errors()
	if len(errs) != 2 ||
		!strings.Contains(errs[0].Error(), `hook "echo \"lint crashed\" >&2; exit 3" (Stop, /ws/.troupe/settings.json) failed with exit status 3: lint crashed`) ||
		!strings.Contains(errs[1].Error(), "printed JSON that could not be read") {
		t.Errorf("errors = %v", errs)
	}
	if len(reported) != 1 { // the JSON problem is found after Report, in merge
		t.Errorf("reported = %q", reported)
	}
}

func TestTimeoutKillsGroup(t *testing.T) {
	dir := t.TempDir()
	h := cmdHook(settings.PreToolUse, "", `sleep 30 & echo started > "$TROUPE_PROJECT_DIR/started"; sleep 30`)
	h.Timeout = 300 * time.Millisecond
	r := newRunner(t, dir, h)
	start := time.Now()
	out := r.Run(context.Background(), who.Event(settings.PreToolUse))
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("a hanging hook held the agent for %v", took)
	}
	if out.Blocked {
		t.Error("a timed-out hook blocked")
	}
	res := out.Runs[0]
	if !res.TimedOut || res.Err == nil || !strings.Contains(res.Err.Error(), "timed out after 300ms and was killed") {
		t.Errorf("result = %+v", res)
	}
	if shell.GroupAlive(res.PID) {
		t.Errorf("the hook's process group %d is still alive", res.PID)
	}
}

func TestBackgroundProcessDoesNotHold(t *testing.T) {
	// A hook that leaves a process holding its stdout returns at once, and
	// the process goes with it.
	r := newRunner(t, t.TempDir(), cmdHook(settings.Stop, "", `sleep 30 & echo '{"decision": "block", "reason": "keep going"}'`))
	out := r.Stop(context.Background(), who, false, false)
	if !out.Blocked || out.Reason != "keep going" {
		t.Errorf("outcome = %+v", out)
	}
	if shell.GroupAlive(out.Runs[0].PID) {
		t.Error("the hook's background process outlived it")
	}
}

func TestCancelStopsHook(t *testing.T) {
	dir := t.TempDir()
	r := newRunner(t, dir, cmdHook(settings.Stop, "", `touch "$TROUPE_PROJECT_DIR/started"; sleep 30`))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Outcome)
	go func() { done <- r.Stop(ctx, who, false, false) }()
	waitFile(t, filepath.Join(dir, "started"))
	cancel()
	out := <-done
	if res := out.Runs[0]; !errors.Is(res.Err, context.Canceled) || shell.GroupAlive(res.PID) {
		t.Errorf("result = %+v", res)
	}
}

// waitFile waits for a hook to show it started. The hook's own progress is
// what is waited on; the bound only keeps a broken test from hanging.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestHooksRunInParallel(t *testing.T) {
	// Each hook waits for the other to have started: run one after the
	// other, the first would time out.
	dir := t.TempDir()
	a := cmdHook(settings.TaskCompleted, "", `touch a; while [ ! -f b ]; do sleep 0.01; done; echo '{"hookSpecificOutput": {"additionalContext": "a"}}'`)
	b := cmdHook(settings.TaskCompleted, "", `touch b; while [ ! -f a ]; do sleep 0.01; done; echo "tests fail" >&2; exit 2`)
	a.Timeout, b.Timeout = 5*time.Second, 5*time.Second
	r := newRunner(t, dir, a, b)
	out := r.TaskCompleted(context.Background(), who, Task{ID: "3", Subject: "write tests"})
	if errs := out.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	if !out.Blocked || out.Reason != "tests fail" {
		t.Errorf("outcome = %+v", out)
	}
}

func TestTaskCompletedExit2KeepsTaskOpen(t *testing.T) {
	dir := t.TempDir()
	r := newRunner(t, dir, cmdHook(settings.TaskCompleted, "",
		`cat > ev.json; echo "task 3 has no test yet" >&2; exit 2`))
	out := r.TaskCompleted(context.Background(), who, Task{ID: "3", Subject: "parser", Owner: "alice", Status: "in_progress"})
	if !out.Blocked || out.Reason != "task 3 has no test yet" {
		t.Errorf("outcome = %+v", out)
	}
	got := readJSON(t, filepath.Join(dir, "ev.json"))
	for k, v := range map[string]any{"hook_event_name": "TaskCompleted", "task_id": "3", "task_subject": "parser", "teammate_name": "alice", "team_name": "t1"} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if task, _ := got["task"].(map[string]any); task["owner"] != "alice" || task["status"] != "in_progress" {
		t.Errorf("task = %v", got["task"])
	}
}

func TestTeammateIdleSendsBackToWork(t *testing.T) {
	r := newRunner(t, t.TempDir(), cmdHook(settings.TeammateIdle, "", `echo "task 4 is still unclaimed; take it" >&2; exit 2`))
	out := r.TeammateIdle(context.Background(), who)
	if !out.Blocked || out.Reason != "task 4 is still unclaimed; take it" {
		t.Errorf("outcome = %+v", out)
	}
}

func TestMatcher(t *testing.T) {
	r := newRunner(t, t.TempDir(),
		cmdHook(settings.PreToolUse, "Edit|Write", "echo edits"),
		cmdHook(settings.PreToolUse, "Bash", "echo bash"),
		cmdHook(settings.PreToolUse, "*", "echo all"),
		cmdHook(settings.PreToolUse, "", "echo all"), // identical: runs once
		cmdHook(settings.PreToolUse, "read_file", "echo read"),
		cmdHook(settings.PostToolUse, "", "echo post"),
		cmdHook(settings.Stop, "Bash", "echo stop"), // matcher ignored
	)
	tests := []struct {
		event, tool string
		want        []string
	}{
		{settings.PreToolUse, "edit_file", []string{"echo edits", "echo all"}},
		{settings.PreToolUse, "write_file", []string{"echo edits", "echo all"}},
		{settings.PreToolUse, "bash", []string{"echo bash", "echo all"}},
		{settings.PreToolUse, "read_file", []string{"echo all", "echo read"}},
		{settings.PreToolUse, "Bashful", []string{"echo all"}},
		{settings.PostToolUse, "bash", []string{"echo post"}},
		{settings.Stop, "", []string{"echo stop"}},
	}
	for _, tt := range tests {
		var got []string
		ev := Event{Name: tt.event, ToolName: ToolName(tt.tool), tool: tt.tool}
		for _, h := range r.matching(ev) {
			got = append(got, h.Command)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s %s (-want +got):\n%s", tt.event, tt.tool, diff)
		}
	}
	bad, err := New(Config{Hooks: []settings.Hook{cmdHook(settings.PreToolUse, "Edit(", "x"), cmdHook(settings.PreToolUse, "Edit", "y")}})
	if err != nil {
		t.Fatalf("a bad matcher stopped New: %v", err)
	}
	if w := bad.Warnings(); len(w) != 1 || !strings.Contains(w[0], ErrBadMatcher.Error()) || !strings.Contains(w[0], "/ws/.troupe/settings.json") ||
		!strings.Contains(w[0], `"Edit("`) {
		t.Errorf("warnings = %q", w)
	}
	var got []string
	for _, h := range bad.matching(Event{Name: settings.PreToolUse, ToolName: "Edit"}) {
		got = append(got, h.Command)
	}
	if diff := cmp.Diff([]string{"y"}, got); diff != "" {
		t.Errorf("with a bad matcher (-want +got):\n%s", diff)
	}
}

func TestClaudeSettingsHonoured(t *testing.T) {
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A Claude Code user's settings, as written for Claude Code.
	err := os.WriteFile(filepath.Join(ws, ".claude", "settings.json"), []byte(`{
  "permissions": {"allow": ["Bash(npm run lint)"]},
  "hooks": {
    "PreToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "if grep -q 'git push'; then echo 'pushing is for humans' >&2; exit 2; fi", "timeout": 10}]}
    ]
  }
}`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	s, err := settings.Load(settings.Options{Workspace: ws, NoUser: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Hooks: s.Hooks, Dir: ws})
	if err != nil {
		t.Fatal(err)
	}
	g := r.Gate(who, nil)
	if d := g(context.Background(), bashCall("git push origin main")); d.Allow || !strings.Contains(d.Reason, "pushing is for humans") {
		t.Errorf("push: %+v", d)
	}
	if d := g(context.Background(), bashCall("git status")); !d.Allow {
		t.Errorf("status: %+v", d)
	}
	if r.hooks[0].Timeout != 10*time.Second || r.hooks[0].Source.Scope != settings.ScopeClaude {
		t.Errorf("hook = %+v", r.hooks[0].Hook)
	}
}

func TestGatePassesPermissionToNext(t *testing.T) {
	r := newRunner(t, t.TempDir(), cmdHook(settings.PreToolUse, "", `echo '{"hookSpecificOutput": {"permissionDecision": "allow", "permissionDecisionReason": "CI only"}}'`))
	p, err := permission.New("/w", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	asked := false
	g := r.Gate(who, permission.Gate(permission.GateConfig{Policy: p, Ask: func(context.Context, agent.Call, permission.Verdict) agent.Decision {
		asked = true
		return agent.Decision{Reason: "no"}
	}}))
	if d := g(context.Background(), bashCall("make")); !d.Allow || asked {
		t.Errorf("a hook's allow did not answer the question: %+v asked=%v", d, asked)
	}
}

func TestAfterTool(t *testing.T) {
	dir := t.TempDir()
	r := newRunner(t, dir, cmdHook(settings.PostToolUse, "Bash", `cat > post.json; echo "the build left warnings" >&2; exit 2`))
	after := r.AfterTool(who)
	res := tool.Result{Content: "ok\n"}
	after(context.Background(), bashCall("make"), &res)
	if want := "ok\n\nPostToolUse hook: the build left warnings"; res.Content != want || res.IsError {
		t.Errorf("result = %+v, want %q", res, want)
	}
	got := readJSON(t, filepath.Join(dir, "post.json"))
	if diff := cmp.Diff(map[string]any{"content": "ok\n", "is_error": false}, got["tool_response"]); diff != "" {
		t.Errorf("tool_response (-want +got):\n%s", diff)
	}
}

func TestNilRunner(t *testing.T) {
	var r *Runner
	if r.Has(settings.Stop) || r.Run(context.Background(), Event{Name: settings.Stop}).Blocked || r.AfterTool(who) != nil {
		t.Error("a nil runner did something")
	}
	if d := r.Gate(who, nil)(context.Background(), bashCall("x")); !d.Allow {
		t.Error("a nil runner's gate refused")
	}
}

// TestSubagentEvents: the calls of a subagent carry its agent_id and
// agent_type; SubagentStart and SubagentStop name it, and their matcher is
// its type.
func TestSubagentEvents(t *testing.T) {
	dir := t.TempDir()
	capture := `jq -c '{e: .hook_event_name, id: .agent_id, type: .agent_type, active: .stop_hook_active, last: .last_assistant_message}' >> "$TROUPE_PROJECT_DIR/ev.jsonl"`
	r := newRunner(t, dir, cmdHook(settings.PreToolUse, "Bash", capture), cmdHook(settings.SubagentStart, "Explore", capture),
		cmdHook(settings.SubagentStop, "Explore|general-purpose", capture), cmdHook(settings.SubagentStart, "Plan", "exit 1"))
	sa := Subagent{ID: "sub-1", Type: "Explore"}
	ctx := WithSubagent(context.Background(), sa)
	r.SubagentStart(ctx, who, sa)
	r.Gate(who, nil)(ctx, bashCall("ls"))
	r.StopHooks(ctx, who, Stopping{Subagent: true, Agent: sa, LastMessage: "found it"})
	b, err := os.ReadFile(filepath.Join(dir, "ev.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"e":"SubagentStart","id":"sub-1","type":"Explore","active":null,"last":null}
{"e":"PreToolUse","id":"sub-1","type":"Explore","active":null,"last":null}
{"e":"SubagentStop","id":"sub-1","type":"Explore","active":false,"last":"found it"}
`
	if diff := cmp.Diff(want, string(b)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestHookEnvironmentHasNoKey: a hook sees neither the provider keys nor
// troupe's internal variables, only the ones troupe sets for hooks.
func TestHookEnvironmentHasNoKey(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-hook-test-0001")
	t.Setenv("OPENAI_API_KEY", "sk-openai-hook-test-0002")
	t.Setenv("TROUPE_HOME", "/state-0003")
	dir := t.TempDir()
	r := newRunner(t, dir, cmdHook(settings.PreToolUse, "Bash",
		`{ env; cat /proc/self/environ | tr '\0' '\n'; } > "$TROUPE_PROJECT_DIR/env.txt"`))
	g := r.Gate(who, func(context.Context, agent.Call) agent.Decision { return agent.Decision{Allow: true} })
	if d := g(context.Background(), bashCall("true")); !d.Allow {
		t.Fatalf("decision = %+v", d)
	}
	b, err := os.ReadFile(filepath.Join(dir, "env.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// Whole values: a test's temporary directory, in the hook's PWD and
	// project variables, has random digits that once held "0003".
	for _, leak := range []string{"sk-ant-hook-test-0001", "sk-openai-hook-test-0002", "/state-0003", "ANTHROPIC_", "OPENAI_", "TROUPE_HOME"} {
		if strings.Contains(string(b), leak) {
			t.Errorf("the hook saw %q:\n%s", leak, b)
		}
	}
	if !strings.Contains(string(b), "TROUPE_PROJECT_DIR="+dir) || !strings.Contains(string(b), "CLAUDE_PROJECT_DIR="+dir) {
		t.Errorf("the hook's own variables are missing:\n%s", b)
	}
}
