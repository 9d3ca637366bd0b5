package hook

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/anthropic"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi/fakeapitest"
	"github.com/troupe-dev/troupe/internal/settings"
	"github.com/troupe-dev/troupe/internal/tool"
)

// TestAgentWithHooks runs a real agent loop against the fake API: a
// PreToolUse hook blocks one bash command and its reason reaches the model;
// a PostToolUse hook sees the result of the next one.
func TestAgentWithHooks(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - contains: "clean up"
    reply:
      - tool_use: {name: bash, input: {command: "rm -rf build"}}
  - contains: "never delete build"
    reply:
      - tool_use: {name: bash, input: {command: "echo built"}}
  - contains: "post-check: saw built"
    reply: [{text: done}]
`)
	ws := t.TempDir()
	w, err := tool.OpenWorkspace(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r := newRunner(t, ws,
		cmdHook(settings.PreToolUse, "Bash", `grep -q 'rm -rf' && { echo "never delete build/; ask the lead" >&2; exit 2; }; exit 0`),
		cmdHook(settings.PostToolUse, "Bash", `cat > post.json; l=$(sed -n 's/.*"stdout":"\([a-z]*\).*/post-check: saw \1/p' post.json); echo "{\"hookSpecificOutput\": {\"additionalContext\": \"$l\"}}"`),
	)
	p, err := anthropic.New(anthropic.Config{APIKey: "test", BaseURL: srv.URL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	a, err := agent.New(agent.Config{
		Name: "alice", Team: "t1", Provider: p,
		Tools:     tool.NewRegistry(tool.Builtins()...),
		Env:       &tool.Env{Workspace: w},
		Gate:      r.Gate(who, nil),
		AfterTool: r.AfterTool(who),
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(context.Background(), llm.TextBlock("please clean up"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "done" {
		t.Errorf("final text %q; requests: %d", res.Text, len(srv.Requests()))
	}
	msgs := a.Messages()
	blocked := msgs[2].Content[0]
	if !blocked.IsError || !strings.Contains(blocked.Content, "bash was not run: blocked by a PreToolUse hook: never delete build/; ask the lead") {
		t.Errorf("blocked result = %+v", blocked)
	}
	post := msgs[4].Content[0]
	if post.IsError || post.Content != "built\n\npost-check: saw built" {
		t.Errorf("post result = %q", post.Content)
	}
	if _, err := os.Stat(filepath.Join(ws, "post.json")); err != nil {
		t.Error(err)
	}
}
