package hook

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/llm/anthropic"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi/fakeapitest"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/settings"
	"github.com/troupe-dev/troupe/internal/tool"
)

// TestAgentHook: an agent hook runs a read-only subagent (the fake API,
// over real HTTP) that reads the workspace before it answers; its
// {"ok": false, "reason"} blocks the call, {"ok": true} lets it run. The
// subagent has only Read, Glob and Grep, and the policy's Read denies bind
// it.
func TestAgentHook(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - agent: "hook:explore"
    contains: "make release"
    reply:
      - text: "Let me look at the status file."
      - tool_use: {name: read_file, input: {path: STATUS}}
  - agent: "hook:explore"
    contains: "frozen"
    reply: [{text: "STATUS says {frozen}. {\"ok\": false, \"reason\": \"the release is frozen (STATUS)\"}"}]
  - agent: "hook:explore"
    contains: "make test"
    reply:
      - tool_use: {name: read_file, input: {path: secret.txt}}
      - tool_use: {name: write_file, input: {path: STATUS, content: "open"}}
  - agent: "hook:explore"
    contains: "denied by the permission rule"
    reply: [{text: "{\"ok\": true}"}]
`)
	p, err := anthropic.New(anthropic.Config{APIKey: "test", BaseURL: srv.URL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"STATUS": "frozen until Monday\n", "secret.txt": "hunter2\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := tool.OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	pol, err := permission.New(dir, nil, permission.Rules("Read(secret.txt)"), nil)
	if err != nil {
		t.Fatal(err)
	}

	h := settings.Hook{Event: settings.PreToolUse, Matcher: "Bash", Type: "agent", Prompt: "Check that the command may run now: $ARGUMENTS"}
	r := newRunner(t, dir, h)
	allow := func(context.Context, agent.Call) agent.Decision { return agent.Decision{Allow: true} }
	g := r.Gate(who, allow)
	// A prompt hook's model is not an agent hook's: without SetAgent it
	// does not run, and blocks nothing.
	r.SetAsker(ProviderAsker(p, "claude-test"))
	ev := who.Event(settings.PreToolUse)
	r.toolEvent(&ev, bashCall("make release"))
	if out := r.Run(context.Background(), ev); out.Blocked || len(out.Errors()) != 1 || !strings.Contains(out.Errors()[0].Error(), "no model is set") {
		t.Errorf("no agent set: %+v %v", out, out.Errors())
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("%d model calls before SetAgent", n)
	}

	r.SetAgent(AgentConfig{Provider: p, Model: "claude-test", Workspace: ws, Policy: pol})
	if d := g(context.Background(), bashCall("make release")); d.Allow || d.Reason != "blocked by a PreToolUse hook: the release is frozen (STATUS)" {
		t.Errorf("ok false: %+v", d)
	}
	if d := g(context.Background(), bashCall("make test")); !d.Allow {
		t.Errorf("ok true: %+v", d)
	}
	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model calls, want 4", len(reqs))
	}
	first := string(reqs[0].Body)
	for _, want := range []string{`"name":"read_file"`, `"name":"glob"`, `"name":"grep"`, `Check that the command may run now: {\"session_id\"`, `"claude-test"`} {
		if !strings.Contains(first, want) {
			t.Errorf("the subagent's first request lacks %s: %s", want, first)
		}
	}
	if strings.Contains(first, `"name":"bash"`) || strings.Contains(first, `"name":"write_file"`) {
		t.Errorf("the agent hook's subagent may do more than read: %s", first)
	}
	last := string(reqs[3].Body)
	for _, want := range []string{`denied by the permission rule Read(secret.txt)`, `unknown tool \"write_file\"`} {
		if !strings.Contains(last, want) {
			t.Errorf("the subagent's tool results lack %q: %s", want, last)
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "STATUS"))
	if diff := cmp.Diff("frozen until Monday\n", string(b)); diff != "" {
		t.Errorf("STATUS changed (-want +got):\n%s", diff)
	}
}

// TestOKAnswer: the decision is the last JSON object with "ok" in the
// answer, whatever comes before it.
func TestOKAnswer(t *testing.T) {
	tests := []struct {
		text string
		want answer
		ok   bool
	}{
		{`{"ok": true}`, answer{ok: true}, true},
		{`I read {config}. {"ok": false, "reason": "no"}`, answer{reason: "no"}, true},
		{`{"ok": true} then {"ok": false, "reason": "second thoughts", "more": {"a": 1}}`, answer{reason: "second thoughts"}, true},
		{`sure, go ahead`, answer{}, false},
		{`{"decision": "block"}`, answer{}, false},
		{`{"ok": "yes"}`, answer{}, false},
	}
	for _, tt := range tests {
		got, ok := okAnswer(tt.text)
		if ok != tt.ok || got != tt.want {
			t.Errorf("okAnswer(%q) = %+v, %v; want %+v, %v", tt.text, got, ok, tt.want, tt.ok)
		}
	}
}

// TestAgentHookBounds: an agent hook's subagent stops after AgentMaxTurns
// model calls (a hook that never answers blocks nothing and is reported),
// and the hook's timeout cuts a slow one short.
func TestAgentHookBounds(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - agent: "hook:explore"
    contains: "slow"
    latency: 1m
    reply: [{text: "{\"ok\": false, \"reason\": \"too late\"}"}]
  - agent: "hook:explore"
    times: 0
    reply: [{tool_use: {name: glob, input: {pattern: "*"}}}]
`)
	p, err := anthropic.New(anthropic.Config{APIKey: "test", BaseURL: srv.URL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	dir := t.TempDir()
	ws, err := tool.OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })

	r := newRunner(t, dir, settings.Hook{Event: settings.PreToolUse, Matcher: "Bash", Type: "agent", Prompt: "Look forever."})
	r.SetAgent(AgentConfig{Provider: p, Model: "claude-test", Workspace: ws})
	ev := who.Event(settings.PreToolUse)
	r.toolEvent(&ev, bashCall("make"))
	out := r.Run(context.Background(), ev)
	if out.Blocked || len(out.Errors()) != 1 || !strings.Contains(out.Errors()[0].Error(), `not {"ok": …}`) {
		t.Errorf("a subagent that never answers: %+v %v", out, out.Errors())
	}
	if n := len(srv.Requests()); n != AgentMaxTurns {
		t.Errorf("the subagent made %d model calls, want %d", n, AgentMaxTurns)
	}

	slow := newRunner(t, dir, settings.Hook{Event: settings.PreToolUse, Matcher: "Bash", Type: "agent", Prompt: "Be slow.", Timeout: 200 * time.Millisecond})
	slow.SetAgent(AgentConfig{Provider: p, Model: "claude-test", Workspace: ws})
	ev = who.Event(settings.PreToolUse)
	slow.toolEvent(&ev, bashCall("make"))
	out = slow.Run(context.Background(), ev)
	if out.Blocked || len(out.Errors()) != 1 || !strings.Contains(out.Errors()[0].Error(), "timed out after 200ms") {
		t.Errorf("a slow subagent: %+v %v", out, out.Errors())
	}
}
