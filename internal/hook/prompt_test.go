package hook

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/llm/anthropic"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi/fakeapitest"
	"github.com/troupe-dev/troupe/internal/settings"
)

// TestPromptHook: a prompt hook asks a model (the fake API, over real
// HTTP) about the event; {"ok": false, "reason"} blocks the call with the
// reason, {"ok": true} lets it run, an answer of another shape is a
// reported problem that blocks nothing.
func TestPromptHook(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - contains: "rm -rf build"
    reply: [{text: "{\"ok\": false, \"reason\": \"deleting build/ loses the cache\"}"}]
  - contains: "make test"
    reply: [{text: "Looks fine. {\"ok\": true}"}]
  - contains: "ls"
    reply: [{text: "sure, go ahead"}]
`)
	p, err := anthropic.New(anthropic.Config{APIKey: "test", BaseURL: srv.URL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	h := settings.Hook{Event: settings.PreToolUse, Matcher: "Bash", Type: "prompt",
		Prompt: "Is this command safe to run? $ARGUMENTS"}
	r := newRunner(t, t.TempDir(), h)
	allow := func(context.Context, agent.Call) agent.Decision { return agent.Decision{Allow: true} }
	g := r.Gate(who, allow)
	if d := g(context.Background(), bashCall("make test")); !d.Allow {
		t.Errorf("no model yet: the hook must not block: %+v", d)
	}
	r.SetAsker(ProviderAsker(p, "claude-test"))
	if d := g(context.Background(), bashCall("rm -rf build")); d.Allow || d.Reason != "blocked by a PreToolUse hook: deleting build/ loses the cache" {
		t.Errorf("ok false: %+v", d)
	}
	if d := g(context.Background(), bashCall("make test")); !d.Allow {
		t.Errorf("ok true: %+v", d)
	}
	ev := who.Event(settings.PreToolUse)
	r.toolEvent(&ev, bashCall("ls"))
	out := r.Run(context.Background(), ev)
	if out.Blocked || len(out.Errors()) != 1 || !strings.Contains(out.Errors()[0].Error(), `not {"ok": …}`) {
		t.Errorf("unreadable answer: %+v %v", out, out.Errors())
	}
	req := srv.Requests()[0]
	if !strings.Contains(string(req.Body), `Is this command safe to run? {\"session_id\"`) || !strings.Contains(string(req.Body), "claude-test") {
		t.Errorf("the question was not the prompt with the event: %s", req.Body)
	}
}
