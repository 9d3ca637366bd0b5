package hook

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/anthropic"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi/fakeapitest"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/settings"
	"github.com/troupe-dev/troupe/internal/tool"
)

// The compatibility corpus: hook scripts in testdata/compat, written from
// Claude Code's hooks reference, run by troupe's runner on the events troupe
// makes of real tool calls (a real agent loop against the fake API, real
// tools in a real workspace), each checked for the effect Claude Code's
// documentation gives it.

// compatHook configures one corpus script for an event.
type compatHook struct{ event, matcher, script string }

func corpusHooks(t *testing.T, hooks []compatHook) []settings.Hook {
	t.Helper()
	var out []settings.Hook
	for _, h := range hooks {
		abs, err := filepath.Abs(filepath.Join("testdata", "compat", h.script))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, cmdHook(h.event, h.matcher, "bash "+abs))
	}
	return out
}

// compatRun is what one corpus case did.
type compatRun struct {
	ws       string
	res      *agent.Result
	msgs     []llm.Message
	requests int
	shown    []string
	seen     []json.RawMessage // inputs the next gate saw
}

// results are the tool_result blocks of the conversation, in order.
func (c *compatRun) results() []llm.Block {
	var out []llm.Block
	for _, m := range c.msgs {
		for _, b := range m.Content {
			if b.Type == llm.BlockToolResult {
				out = append(out, b)
			}
		}
	}
	return out
}

func (c *compatRun) file(t *testing.T, rel string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.ws, rel))
	if os.IsNotExist(err) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

// compatWho is the agent of the corpus runs.
func compatWho(ws string) Who {
	return Who{Agent: "team-lead", SessionID: "s-1", TranscriptPath: filepath.Join(ws, "t.jsonl"),
		Mode: func() string { return "default" }}
}

// runCompat runs an agent that answers prompt as the fake API's script
// says, with the corpus hooks, in a workspace holding files. With ask, the
// calls go through a permission gate in default mode with no one to ask
// (writes need approval), behind the PermissionRequest hooks.
func runCompat(t *testing.T, hooks []compatHook, script, prompt string, files map[string]string, ask bool) *compatRun {
	t.Helper()
	srv := fakeapitest.StartTest(t, script)
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w, err := tool.OpenWorkspace(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	c := &compatRun{ws: ws}
	var mu sync.Mutex
	r, err := New(Config{Hooks: corpusHooks(t, hooks), Dir: ws, Show: func(_ Event, text string) {
		mu.Lock()
		c.shown = append(c.shown, text)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	who := compatWho(ws)
	next := func(_ context.Context, call agent.Call) agent.Decision {
		mu.Lock()
		c.seen = append(c.seen, call.Input)
		mu.Unlock()
		return agent.Decision{Allow: true}
	}
	if ask {
		pg := permission.Gate(permission.GateConfig{Mode: func() permission.Mode { return permission.Default }, Ask: r.Ask(who, nil)})
		next = func(ctx context.Context, call agent.Call) agent.Decision {
			mu.Lock()
			c.seen = append(c.seen, call.Input)
			mu.Unlock()
			return pg(ctx, call)
		}
	}
	p, err := anthropic.New(anthropic.Config{APIKey: "test", BaseURL: srv.URL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	a, err := agent.New(agent.Config{
		Name: "team-lead", Provider: p,
		Tools:     tool.NewRegistry(tool.Builtins()...),
		Env:       &tool.Env{Workspace: w},
		Gate:      r.Gate(who, next),
		AfterTool: r.AfterTool(who),
	})
	if err != nil {
		t.Fatal(err)
	}
	c.res, err = a.Run(context.Background(), llm.TextBlock(prompt))
	if err != nil {
		t.Fatal(err)
	}
	c.msgs, c.requests = a.Messages(), len(srv.Requests())
	return c
}

func wantResult(t *testing.T, b llm.Block, isError bool, contains string) {
	t.Helper()
	if b.IsError != isError || !strings.Contains(b.Content, contains) {
		t.Errorf("tool result (is_error %v) = %q, want is_error %v containing %q", b.IsError, b.Content, isError, contains)
	}
}

// An exit 2 keyed on tool_input.file_path blocks a Write; stderr reaches
// the model; other writes go through.
func TestCompatExit2BlocksWriteByFilePath(t *testing.T) {
	c := runCompat(t, []compatHook{{settings.PreToolUse, "Edit|Write", "protect_files.sh"}}, `
rules:
  - contains: "set up"
    reply:
      - tool_use: {name: write_file, input: {path: .env, content: "KEY=1"}}
      - tool_use: {name: write_file, input: {path: app.txt, content: "ok"}}
  - contains: "is protected"
    reply: [{text: done}]
`, "set up the app", nil, false)
	if c.res.Text != "done" {
		t.Errorf("final text %q", c.res.Text)
	}
	rs := c.results()
	wantResult(t, rs[0], true, "write_file was not run: blocked by a PreToolUse hook: Blocked: .env is protected")
	wantResult(t, rs[1], false, "Created app.txt")
	if _, ok := c.file(t, ".env"); ok {
		t.Error(".env was written")
	}
	if got, _ := c.file(t, "app.txt"); got != "ok" {
		t.Errorf("app.txt = %q", got)
	}
}

// A JSON permissionDecision "deny" keyed on tool_name == "Bash" refuses
// the command with its reason.
func TestCompatJSONDenyBash(t *testing.T) {
	c := runCompat(t, []compatHook{{settings.PreToolUse, "Bash", "deny_rm.sh"}}, `
rules:
  - contains: "clean"
    reply:
      - tool_use: {name: bash, input: {command: "rm -rf keep"}}
  - contains: "Destructive command blocked by policy"
    reply: [{text: done}]
`, "clean up", map[string]string{"keep/x": "x"}, false)
	wantResult(t, c.results()[0], true, "bash was not run: blocked by a PreToolUse hook: Destructive command blocked by policy")
	if _, ok := c.file(t, "keep/x"); !ok {
		t.Error("keep/ was removed")
	}
}

// updatedInput rewrites the call: the gate behind the hooks judges the
// rewritten input and the tool runs with it.
func TestCompatUpdatedInput(t *testing.T) {
	c := runCompat(t, []compatHook{{settings.PreToolUse, "Write", "redirect_write.sh"}}, `
rules:
  - contains: "note"
    reply:
      - tool_use: {name: write_file, input: {path: notes.txt, content: "n"}}
  - contains: "notes.txt"
    reply: [{text: done}]
`, "take a note", nil, false)
	wantResult(t, c.results()[0], false, "Created "+filepath.Join(c.ws, "out", "notes.txt"))
	if got, _ := c.file(t, "out/notes.txt"); got != "n" {
		t.Errorf("out/notes.txt = %q", got)
	}
	if _, ok := c.file(t, "notes.txt"); ok {
		t.Error("the original path was written")
	}
	var seen map[string]any
	if len(c.seen) != 1 || json.Unmarshal(c.seen[0], &seen) != nil || seen["path"] != filepath.Join(c.ws, "out", "notes.txt") {
		t.Errorf("the permission gate saw %s, want the rewritten input", c.seen)
	}
}

// "continue": false stops the agent: no further model call, the reason
// goes to the user and not to the model.
func TestCompatContinueFalseStops(t *testing.T) {
	c := runCompat(t, []compatHook{{settings.PostToolUse, "Bash", "stop_on_failure.sh"}}, `
rules:
  - contains: "build"
    reply:
      - tool_use: {name: bash, input: {command: "echo BUILD FAILED"}}
  - contains: "BUILD FAILED"
    reply: [{text: "this call must not happen"}]
`, "build it", nil, false)
	const reason = "Build failed; fix it by hand before going on"
	if c.requests != 1 || c.res.Halted != reason || !c.res.WasHalted {
		t.Errorf("requests %d, halted %q (want 1 and %q)", c.requests, c.res.Halted, reason)
	}
	if diff := cmp.Diff([]string{reason}, c.shown); diff != "" {
		t.Errorf("shown to the user (-want +got):\n%s", diff)
	}
	if last := c.msgs[len(c.msgs)-1]; last.Role != llm.RoleUser || strings.Contains(last.Content[0].Content, reason) {
		t.Errorf("last message %+v", last)
	}
}

// A PostToolUse hook reads tool_response.filePath (Write and Edit), and
// its decision "block" reason reaches the model.
func TestCompatPostToolUseResponse(t *testing.T) {
	c := runCompat(t, []compatHook{{settings.PostToolUse, "Write|Edit", "lint_written.sh"}}, `
rules:
  - contains: "make a"
    reply:
      - tool_use: {name: write_file, input: {path: a.txt, content: "x \n"}}
  - contains: "Edited"
    reply: [{text: done}]
  - contains: "lint: trailing whitespace in"
    times: 1
    reply:
      - tool_use: {name: edit_file, input: {path: a.txt, old_string: "x ", new_string: "x"}}
`, "make a file", nil, false)
	if c.res.Text != "done" {
		t.Fatalf("final text %q", c.res.Text)
	}
	abs := filepath.Join(c.ws, "a.txt")
	wantResult(t, c.results()[0], false, "PostToolUse hook: lint: trailing whitespace in "+abs)
	log, _ := c.file(t, "written.log")
	var got []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("written.log: %v: %q", err, log)
		}
		got = append(got, m)
	}
	want := []map[string]any{
		{"tool": "Write", "type": "create", "file": abs, "old": nil, "new": nil, "replace_all": nil},
		{"tool": "Edit", "type": nil, "file": abs, "old": "x ", "new": "x", "replace_all": false},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("what the hook read (-want +got):\n%s", diff)
	}
}

// Read's tool_input has file_path (absolute), offset and limit as given.
func TestCompatReadInput(t *testing.T) {
	c := runCompat(t, []compatHook{{settings.PreToolUse, "Read", "read_window.sh"}}, `
rules:
  - contains: "look"
    reply:
      - tool_use: {name: read_file, input: {path: big.txt}}
      - tool_use: {name: read_file, input: {path: big.txt, offset: 2, limit: 1}}
  - contains: "at a time"
    reply: [{text: done}]
`, "look at big.txt", map[string]string{"big.txt": "1\n2\n3\n"}, false)
	rs := c.results()
	wantResult(t, rs[0], true, "Read at most 100 lines of "+filepath.Join(c.ws, "big.txt")+" at a time")
	wantResult(t, rs[1], false, "     2\t2\n")
}

// A failed call fires PostToolUseFailure with its error; the hook's
// additionalContext reaches the model.
func TestCompatPostToolUseFailure(t *testing.T) {
	c := runCompat(t, []compatHook{{settings.PostToolUseFailure, "Bash", "failure_hint.sh"}, {settings.PostToolUse, "", "capture.sh"}}, `
rules:
  - contains: "list"
    reply:
      - tool_use: {name: bash, input: {command: "exit 3"}}
  - contains: "Hint"
    reply: [{text: done}]
`, "list it", nil, false)
	wantResult(t, c.results()[0], true, "Hint: exit 3 failed: exit code 3")
	if _, ok := c.file(t, "events.jsonl"); ok {
		t.Error("PostToolUse fired for a failed call")
	}
}

// PermissionRequest hooks answer a call that needs approval before anyone
// is asked: allow runs it, deny refuses it with the hook's message.
func TestCompatPermissionRequest(t *testing.T) {
	c := runCompat(t, []compatHook{{settings.PermissionRequest, "Write", "approve_tmp.sh"}}, `
rules:
  - contains: "scratch"
    reply:
      - tool_use: {name: write_file, input: {path: tmp/a.txt, content: "a"}}
      - tool_use: {name: write_file, input: {path: b.txt, content: "b"}}
  - contains: "only tmp/ may be written"
    reply: [{text: done}]
`, "scratch files", nil, true)
	rs := c.results()
	wantResult(t, rs[0], false, "Created tmp/a.txt")
	wantResult(t, rs[1], true, "denied by a PermissionRequest hook: only tmp/ may be written")
	if _, ok := c.file(t, "b.txt"); ok {
		t.Error("b.txt was written")
	}
}

// The events troupe sends, for a real Edit call: Claude Code's fields.
func TestCompatEventShape(t *testing.T) {
	c := runCompat(t, []compatHook{{settings.PreToolUse, "*", "capture.sh"}, {settings.PostToolUse, "Edit", "capture.sh"}}, `
rules:
  - contains: "fix"
    reply:
      - tool_use: {name: edit_file, input: {path: a.txt, old_string: "teh", new_string: "the"}}
  - contains: "Edited"
    reply: [{text: done}]
`, "fix the typo", map[string]string{"a.txt": "teh end\n"}, false)
	log, _ := c.file(t, "events.jsonl")
	lines := strings.Split(strings.TrimSpace(log), "\n")
	if len(lines) != 2 {
		t.Fatalf("events.jsonl: %q", log)
	}
	var pre, post map[string]any
	if json.Unmarshal([]byte(lines[0]), &pre) != nil || json.Unmarshal([]byte(lines[1]), &post) != nil {
		t.Fatalf("events.jsonl: %q", log)
	}
	if id, _ := pre["tool_use_id"].(string); id == "" || post["tool_use_id"] != id {
		t.Errorf("tool_use_id %v, %v", pre["tool_use_id"], post["tool_use_id"])
	}
	delete(pre, "tool_use_id")
	abs := filepath.Join(c.ws, "a.txt")
	input := map[string]any{"file_path": abs, "old_string": "teh", "new_string": "the", "replace_all": false}
	want := map[string]any{
		"session_id": "s-1", "transcript_path": filepath.Join(c.ws, "t.jsonl"), "cwd": c.ws, "permission_mode": "default",
		"hook_event_name": "PreToolUse", "agent_name": "team-lead", "tool_name": "Edit", "tool_input": input,
	}
	if diff := cmp.Diff(want, pre); diff != "" {
		t.Errorf("PreToolUse input (-want +got):\n%s", diff)
	}
	resp := map[string]any{"filePath": abs, "oldString": "teh", "newString": "the", "originalFile": "teh end\n",
		"replaceAll": false, "userModified": false, "structuredPatch": []any{map[string]any{
			"oldStart": float64(1), "oldLines": float64(1), "newStart": float64(1), "newLines": float64(1),
			"lines": []any{"-teh end", "+the end"}}}}
	if diff := cmp.Diff(resp, post["tool_response"]); diff != "" {
		t.Errorf("PostToolUse tool_response (-want +got):\n%s", diff)
	}
}

// A Stop hook reads stop_hook_active (always present) and
// last_assistant_message, and blocks only once.
func TestCompatStopHookActive(t *testing.T) {
	ws := t.TempDir()
	r := newRunner(t, ws, corpusHooks(t, []compatHook{{settings.Stop, "", "keep_working.sh"}})...)
	out := r.StopHooks(context.Background(), compatWho(ws), Stopping{LastMessage: "All done"})
	if !out.Blocked || out.Reason != `You said "All done" but the tests have not run; run them.` || len(out.Errors()) > 0 {
		t.Errorf("first stop: %+v", out)
	}
	out = r.StopHooks(context.Background(), compatWho(ws), Stopping{Active: true, LastMessage: "Tests pass"})
	if out.Blocked || len(out.Errors()) > 0 {
		t.Errorf("stop with stop_hook_active: %+v", out)
	}
}

// A SessionStart hook's plain stdout is context for the model; its
// matcher is the source.
func TestCompatSessionStartContext(t *testing.T) {
	ws := t.TempDir()
	r := newRunner(t, ws, corpusHooks(t, []compatHook{{settings.SessionStart, "startup", "session_context.sh"}})...)
	out := r.SessionStart(context.Background(), compatWho(ws), "startup", "claude-x")
	if diff := cmp.Diff([]string{"Session s-1 started from startup in " + ws}, out.Context); diff != "" {
		t.Errorf("context (-want +got):\n%s", diff)
	}
	if out := r.SessionStart(context.Background(), compatWho(ws), "resume", "claude-x"); len(out.Runs) != 0 {
		t.Errorf("a startup hook ran on resume: %+v", out)
	}
}

// A UserPromptSubmit "decision": "block" (exit 0) drops the prompt and
// tells the user; additionalContext goes with the others.
func TestCompatUserPromptSubmit(t *testing.T) {
	ws := t.TempDir()
	var shown []string
	r, _ := New(Config{Hooks: corpusHooks(t, []compatHook{{settings.UserPromptSubmit, "", "prompt_guard.sh"}}), Dir: ws,
		Show: func(_ Event, s string) { shown = append(shown, s) }})
	out := r.UserPromptSubmit(context.Background(), compatWho(ws), "my password is hunter2")
	if !out.Blocked || out.Reason != "Prompt contains a password; it was not sent" {
		t.Errorf("blocked prompt: %+v", out)
	}
	if diff := cmp.Diff([]string{"prompt blocked: Prompt contains a password; it was not sent"}, shown); diff != "" {
		t.Errorf("shown (-want +got):\n%s", diff)
	}
	out = r.UserPromptSubmit(context.Background(), compatWho(ws), "hello")
	if out.Blocked || !cmp.Equal(out.Context, []string{"Today is a test day."}) {
		t.Errorf("plain prompt: %+v", out)
	}
}
