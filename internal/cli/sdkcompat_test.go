package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	fakeapiexamples "github.com/troupe-dev/troupe/examples/fakeapi"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
)

// sdkRequired is what a consumer written for `claude -p` requires of each
// line, by type (and subtype): the fields the Claude Agent SDK's message
// parser (Python, _internal/message_parser.py) reads with data[...] and so
// fails without, plus those its TypeScript types (SDKSystemMessage,
// SDKAssistantMessage, SDKUserMessage, SDKResultMessage, SDKPartialAssistantMessage)
// declare as not optional. A path "a.b" is a nested field; "a[]" means a
// list. Content blocks are checked by blockRequired.
var sdkRequired = map[string][]string{
	"system/init": {"type", "subtype", "uuid", "session_id", "apiKeySource", "cwd", "tools[]", "mcp_servers[]",
		"model", "permissionMode", "slash_commands[]", "output_style"},
	"system/api_retry": {"type", "subtype", "uuid", "session_id", "attempt", "max_retries", "retry_delay_ms", "error_status", "error"},
	"assistant": {"type", "uuid", "session_id", "parent_tool_use_id", "message.id", "message.type", "message.role",
		"message.model", "message.content[]", "message.stop_reason", "message.usage.input_tokens", "message.usage.output_tokens"},
	"user":         {"type", "session_id", "parent_tool_use_id", "message.role", "message.content[]"},
	"stream_event": {"type", "uuid", "session_id", "event.type", "parent_tool_use_id"},
	"result": {"type", "subtype", "duration_ms", "duration_api_ms", "is_error", "num_turns", "session_id",
		"total_cost_usd", "usage.input_tokens", "usage.output_tokens", "modelUsage", "permission_denials[]", "uuid"},
}

// blockRequired are the fields the parser reads of each content block.
var blockRequired = map[string][]string{
	"text":        {"text"},
	"thinking":    {"thinking", "signature"},
	"tool_use":    {"id", "name", "input"},
	"tool_result": {"tool_use_id"},
}

// lookup finds a dotted path in v; "x[]" must be a list.
func lookup(v any, path string) (any, error) {
	cur := v
	for _, part := range strings.Split(path, ".") {
		list := strings.HasSuffix(part, "[]")
		part = strings.TrimSuffix(part, "[]")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: parent is not an object", path)
		}
		next, ok := m[part]
		if !ok {
			return nil, fmt.Errorf("missing %s", path)
		}
		if list {
			if _, ok := next.([]any); !ok {
				return nil, fmt.Errorf("%s is not a list", path)
			}
		}
		cur = next
	}
	return cur, nil
}

// checkSDKLine checks one line as the SDK's parser would read it, and
// returns its key in sdkRequired ("" for a type the parser skips).
func checkSDKLine(line map[string]any) (string, []error) {
	typ, _ := line["type"].(string)
	key := typ
	if typ == "system" {
		sub, _ := line["subtype"].(string)
		key = "system/" + sub
	}
	var errs []error
	if _, ok := line["agent"].(string); !ok {
		errs = append(errs, fmt.Errorf("%s: no agent", key))
	}
	if _, ok := line["team"].(string); !ok {
		errs = append(errs, fmt.Errorf("%s: no team", key))
	}
	req, known := sdkRequired[key]
	if !known {
		if typ != "troupe" {
			errs = append(errs, fmt.Errorf("unexpected line type %q", key))
		}
		return "", errs
	}
	for _, p := range req {
		if _, err := lookup(line, p); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
	}
	if typ == "assistant" || typ == "user" {
		content, _ := lookup(line, "message.content[]")
		list, _ := content.([]any)
		for _, b := range list {
			bm, ok := b.(map[string]any)
			if !ok {
				errs = append(errs, fmt.Errorf("%s: a content block is not an object", key))
				continue
			}
			bt, _ := bm["type"].(string)
			need, ok := blockRequired[bt]
			if !ok {
				errs = append(errs, fmt.Errorf("%s: content block type %q", key, bt))
			}
			for _, f := range need {
				if _, ok := bm[f]; !ok {
					errs = append(errs, fmt.Errorf("%s: %s block without %s", key, bt, f))
				}
			}
		}
	}
	if typ == "result" {
		ds, _ := line["permission_denials"].([]any)
		for _, d := range ds {
			for _, f := range []string{"tool_name", "tool_use_id", "tool_input"} {
				if _, err := lookup(d, f); err != nil {
					errs = append(errs, fmt.Errorf("permission_denials: %w", err))
				}
			}
		}
		if sub, _ := line["subtype"].(string); sub != "success" {
			if _, err := lookup(line, "errors[]"); err != nil {
				errs = append(errs, fmt.Errorf("result %s: %w", sub, err))
			}
		}
	}
	return key, errs
}

// runCLI runs troupe in process against a fake API serving script, in a
// fresh workspace, and returns stdout and the exit code.
func runCLI(t *testing.T, script []byte, stdin string, args ...string) (string, int) {
	t.Helper()
	s, err := fakeapi.ParseScript(script)
	if err != nil {
		t.Fatal(err)
	}
	srv := fakeapi.New(s, fakeapi.Options{})
	url, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	t.Setenv("ANTHROPIC_BASE_URL", url)
	t.Setenv("ANTHROPIC_API_KEY", "sk-fake")
	t.Setenv("TROUPE_HOME", "")
	ws := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), append([]string{"--workspace", ws}, args...), strings.NewReader(stdin), &stdout, &stderr)
	t.Logf("stderr: %s", stderr.String())
	return stdout.String(), code
}

const teamScript = `
rules:
  - agent: team-lead
    contains: "Team up"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: duo}}
      - tool_use: {name: TaskCreate, input: {subject: "Write notes"}}
      - tool_use: {name: Task, input: {team_name: duo, name: alice, description: writer, prompt: "Take the task from the board."}}
  - agent: team-lead
    times: 0
    reply: [{text: "Done."}]
  - agent: alice
    contains: "You claimed task #1"
    reply:
      - thinking: "The task is to write notes."
      - tool_use: {name: write_file, input: {path: notes.md, content: "# Notes"}}
      - tool_use: {name: TaskUpdate, input: {taskId: "1", status: completed}}
      - tool_use: {name: SendMessage, input: {recipient: team-lead, content: "notes.md is written"}}
  - agent: alice
    times: 0
    reply: [{text: "Waiting for work."}]
`

const denyScript = `
faults:
  - {call: 1, kind: overloaded}
rules:
  - agent: team-lead
    contains: "make the file"
    reply:
      - text: "Running it."
      - tool_use: {name: bash, input: {command: "touch made.txt"}}
  - agent: team-lead
    reply: [{text: "I could not run it."}]
`

const refuseScript = `
rules:
  - agent: team-lead
    reply: [{text: "I can't help with that."}]
    stop_reason: refusal
`

const okScript = `
rules:
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
`

// TestStreamJSONReadsAsClaudeCode parses every line troupe writes with
// --output-format stream-json and json as the Claude Agent SDK's parser
// would: each line has what the parser requires of its type, the first is
// system/init, the last the result, every line has one session id, and the
// only lines of other types are troupe's own, which the parser skips.
func TestStreamJSONReadsAsClaudeCode(t *testing.T) {
	for _, tc := range []struct {
		name     string
		script   []byte
		args     []string
		stdin    string
		code     int
		subtype  string
		mustSee  []string // keys of sdkRequired the run must produce
		denials  int
		sessions int // result lines
	}{
		{name: "single agent, partial messages", script: fakeapiexamples.SingleAgent,
			args:    []string{"-p", "Create hello.txt", "--dangerously-skip-permissions", "--include-partial-messages"},
			subtype: "success", mustSee: []string{"system/init", "assistant", "user", "stream_event", "result"}, sessions: 1},
		{name: "team", script: []byte(teamScript),
			args:    []string{"-p", "Team up", "--dangerously-skip-permissions"},
			subtype: "success", mustSee: []string{"system/init", "assistant", "user", "result"}, sessions: 1},
		{name: "default mode refuses, after a retry", script: []byte(denyScript),
			args:    []string{"-p", "make the file"},
			subtype: "success", mustSee: []string{"system/init", "system/api_retry", "assistant", "user", "result"}, denials: 1, sessions: 1},
		{name: "refusal", script: []byte(refuseScript), args: []string{"-p", "do it"}, code: ExitError,
			subtype: "error_during_execution", mustSee: []string{"system/init", "assistant", "result"}, sessions: 1},
		{name: "max turns", script: fakeapiexamples.SingleAgent, args: []string{"-p", "Create hello.txt", "--max-turns", "1", "--dangerously-skip-permissions"},
			code: ExitError, subtype: "error_max_turns", mustSee: []string{"system/init", "assistant", "result"}, sessions: 1},
		{name: "stream-json input", script: []byte(okScript),
			args:    []string{"--input-format", "stream-json"},
			stdin:   `{"type":"user","message":{"role":"user","content":"one"}}` + "\n" + `{"type":"user","message":{"role":"user","content":"two"}}` + "\n",
			subtype: "success", mustSee: []string{"system/init", "assistant", "result"}, sessions: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := runCLI(t, tc.script, tc.stdin, append(tc.args, "--output-format", "stream-json")...)
			if code != tc.code {
				t.Fatalf("exit code %d, want %d; output:\n%s", code, tc.code, out)
			}
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			seen := map[string]bool{}
			sessionIDs := map[string]bool{}
			var results []map[string]any
			for i, l := range lines {
				var m map[string]any
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Fatalf("line %d is not a JSON object: %v\n%s", i+1, err, l)
				}
				key, errs := checkSDKLine(m)
				for _, err := range errs {
					t.Errorf("line %d: %v\n%s", i+1, err, l)
				}
				seen[key] = true
				if id, ok := m["session_id"].(string); ok {
					sessionIDs[id] = true
				}
				if key == "result" {
					results = append(results, m)
				}
			}
			var first map[string]any
			_ = json.Unmarshal([]byte(lines[0]), &first)
			if first["type"] != "system" || first["subtype"] != "init" {
				t.Errorf("first line is not system/init: %s", lines[0])
			}
			if !strings.Contains(lines[len(lines)-1], `"type":"result"`) {
				t.Errorf("last line is not the result: %s", lines[len(lines)-1])
			}
			for _, k := range tc.mustSee {
				if !seen[k] {
					t.Errorf("no %s line", k)
				}
			}
			if len(sessionIDs) != 1 {
				t.Errorf("session ids %v, want one", keys(sessionIDs))
			}
			if len(results) != tc.sessions {
				t.Fatalf("%d result lines, want %d", len(results), tc.sessions)
			}
			last := results[len(results)-1]
			if last["subtype"] != tc.subtype {
				t.Errorf("result subtype %v, want %s", last["subtype"], tc.subtype)
			}
			if d, _ := last["permission_denials"].([]any); len(d) != tc.denials {
				t.Errorf("%d permission denials, want %d: %v", len(d), tc.denials, d)
			}

			// --output-format json prints the result alone, with the same
			// requirements.
			var jargs []string
			for _, a := range tc.args {
				if a != "--include-partial-messages" {
					jargs = append(jargs, a)
				}
			}
			out, code = runCLI(t, tc.script, tc.stdin, append(jargs, "--output-format", "json")...)
			if code != tc.code {
				t.Fatalf("json: exit code %d, want %d", code, tc.code)
			}
			jl := strings.Split(strings.TrimRight(out, "\n"), "\n")
			if len(jl) != tc.sessions {
				t.Fatalf("json: %d lines, want %d:\n%s", len(jl), tc.sessions, out)
			}
			for _, l := range jl {
				var m map[string]any
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Fatalf("json: not a JSON object: %v\n%s", err, l)
				}
				key, errs := checkSDKLine(m)
				if key != "result" {
					t.Errorf("json: a %q line, want the result", key)
				}
				for _, err := range errs {
					t.Errorf("json: %v", err)
				}
			}
		})
	}
}

// The checker itself fails on what the parser would refuse.
func TestCheckSDKLineCatchesMissingFields(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{`{"type":"result","subtype":"success","agent":"a","team":""}`, []string{"missing duration_ms", "missing session_id", "missing permission_denials"}},
		{`{"type":"assistant","agent":"a","team":"","uuid":"u","session_id":"s","parent_tool_use_id":null,"message":{"id":"m","type":"message","role":"assistant","model":"x","stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1},"content":[{"type":"thinking","thinking":"t"}]}}`,
			[]string{"thinking block without signature"}},
		{`{"type":"user","session_id":"s","parent_tool_use_id":null,"message":{"role":"user","content":"hi"}}`, []string{"no agent", "message.content[] is not a list"}},
		{`{"type":"event","agent":"a","team":""}`, []string{`unexpected line type "event"`}},
	} {
		var m map[string]any
		if err := json.Unmarshal([]byte(tc.line), &m); err != nil {
			t.Fatal(err)
		}
		_, errs := checkSDKLine(m)
		var got []string
		for _, e := range errs {
			got = append(got, e.Error())
		}
		for _, w := range tc.want {
			if !strings.Contains(strings.Join(got, "\n"), w) {
				t.Errorf("%s: errors %q lack %q", tc.line, got, w)
			}
		}
	}
}

// --resume takes the session id of a result and carries that session on.
func TestResumeBySessionID(t *testing.T) {
	script := []byte("rules:\n  - agent: team-lead\n    contains: one\n    reply: [{text: \"first\"}]\n  - agent: team-lead\n    contains: two\n    reply: [{text: \"second\"}]\n")
	s, err := fakeapi.ParseScript(script)
	if err != nil {
		t.Fatal(err)
	}
	srv := fakeapi.New(s, fakeapi.Options{})
	url, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	t.Setenv("ANTHROPIC_BASE_URL", url)
	t.Setenv("ANTHROPIC_API_KEY", "sk-fake")
	t.Setenv("TROUPE_HOME", "")
	ws := t.TempDir()
	run := func(args ...string) map[string]any {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := Main(context.Background(), append([]string{"--workspace", ws, "--output-format", "json"}, args...), nil, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		var m map[string]any
		if err := json.Unmarshal(stdout.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	first := run("-p", "one")
	// A second session in between: --resume must not pick the latest.
	run("-p", "unrelated")
	id, _ := first["session_id"].(string)
	second := run("-p", "two", "--resume", id)
	if second["session_id"] != id || second["result"] != "second" {
		t.Fatalf("resumed result %v, want session %s answering second", second, id)
	}
	rec, err := loadSession(filepath.Join(ws, ".troupe"), id)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range rec.Messages {
		texts = append(texts, string(m.Role)+":"+m.Text())
	}
	want := []string{"user:one", "assistant:first", "user:two", "assistant:second"}
	if diff := cmp.Diff(want, texts); diff != "" {
		t.Errorf("the resumed session's conversation (-want +got):\n%s", diff)
	}
	ents, _ := os.ReadDir(filepath.Join(ws, ".troupe", "sessions"))
	if len(ents) != 2 {
		t.Errorf("%d session records, want 2", len(ents))
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

const teammateDenyScript = `
rules:
  - agent: team-lead
    contains: "Team up"
    reply:
      - tool_use: {name: bash, input: {command: "rm -rf lead-cache"}}
      - tool_use: {name: TeamCreate, input: {team_name: duo}}
      - tool_use: {name: TaskCreate, input: {subject: "Clean up"}}
      - tool_use: {name: Task, input: {team_name: duo, name: alice, description: cleaner, prompt: "Take the task from the board."}}
  - agent: team-lead
    times: 0
    reply: [{text: "Done."}]
  - agent: alice
    contains: "You claimed task #1"
    reply:
      - tool_use: {name: bash, input: {command: "rm -rf build"}}
      - tool_use: {name: TaskUpdate, input: {taskId: "1", status: completed}}
      - tool_use: {name: SendMessage, input: {recipient: team-lead, content: "could not clean"}}
  - agent: alice
    times: 0
    reply: [{text: "Waiting for work."}]
`

// TestTeammateDenials: the result's permission_denials hold the
// teammates' refused calls beside the lead's, each in Claude Code's shape,
// a teammate's with its name as the extra field agent.
func TestTeammateDenials(t *testing.T) {
	for _, format := range []string{"stream-json", "json"} {
		t.Run(format, func(t *testing.T) {
			out, code := runCLI(t, []byte(teammateDenyScript), "", "-p", "Team up", "--dangerously-skip-permissions",
				"--disallowedTools", "Bash(rm:*)", "--output-format", format)
			if code != 0 {
				t.Fatalf("exit code %d; output:\n%s", code, out)
			}
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			var result map[string]any
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &result); err != nil {
				t.Fatal(err)
			}
			if _, errs := checkSDKLine(result); len(errs) > 0 {
				t.Errorf("result: %v", errs)
			}
			ds, _ := result["permission_denials"].([]any)
			var got []map[string]any
			for _, d := range ds {
				m := d.(map[string]any)
				if id, _ := m["tool_use_id"].(string); !strings.HasPrefix(id, "toolu_") {
					t.Errorf("tool_use_id %v", m["tool_use_id"])
				}
				if r, _ := m["reason"].(string); !strings.Contains(r, "Bash(rm:*)") {
					t.Errorf("reason %q", r)
				}
				delete(m, "tool_use_id")
				delete(m, "reason")
				got = append(got, m)
			}
			want := []map[string]any{
				{"tool_name": "Bash", "tool_input": map[string]any{"command": "rm -rf lead-cache"}},
				{"tool_name": "Bash", "tool_input": map[string]any{"command": "rm -rf build"}, "agent": "alice"},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("permission_denials (-want +got):\n%s", diff)
			}
		})
	}
}
