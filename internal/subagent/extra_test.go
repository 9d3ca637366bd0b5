package subagent_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/subagent"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

// fakeExtra is a tool from outside troupe, as an MCP server's would be.
type fakeExtra struct {
	name  string
	kind  kind.Kind
	calls *atomic.Int32
}

func (f fakeExtra) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: f.name, Description: "a fake " + f.kind.String() + " tool", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (f fakeExtra) ReadOnly() bool  { return f.kind == kind.Read }
func (f fakeExtra) Kind() kind.Kind { return f.kind }
func (f fakeExtra) Run(context.Context, *tool.Env, json.RawMessage) tool.Result {
	if f.calls != nil {
		f.calls.Add(1)
	}
	return tool.Result{Content: "issue #7 created\n[image 1: image/png, 4 bytes]", Images: []llm.Image{{MediaType: "image/png", Data: "iVBORw=="}}}
}

// TestExtraTools: a subagent is offered the parent's extra tools after its
// own, those its type allows: explore only the read ones, general-purpose
// and a custom type naming no tools all (but the servers it disallows), a
// custom type that lists its tools the ones it names; a name a subagent
// tool has keeps its own.
func TestExtraTools(t *testing.T) {
	const script = `
rules:
  - agent: "team-lead:general-purpose"
    contains: "file it"
    reply: [{tool_use: {name: mcp__gh__create_issue, input: {}}}]
  - agent: "team-lead:general-purpose"
    contains: "issue #7 created"
    reply: [{text: "REPORT: filed"}]
  - contains: "look"
    reply: [{text: "REPORT: looked"}]
`
	var created atomic.Int32
	var sawImage atomic.Bool
	extra := []tool.Tool{
		fakeExtra{name: "mcp__gh__create_issue", kind: kind.Network, calls: &created},
		fakeExtra{name: "mcp__fs__stat", kind: kind.Read},
		fakeExtra{name: "grep", kind: kind.Network},
	}
	tests := []struct {
		typ, prompt string
		want        []string
		report      string
	}{
		{typ: subagent.General, prompt: "file it", report: "REPORT: filed",
			want: []string{"bash", "read_file", "write_file", "edit_file", "glob", "grep", "TodoWrite", "mcp__gh__create_issue", "mcp__fs__stat"}},
		{typ: subagent.Explore, prompt: "look", report: "REPORT: looked",
			want: []string{"read_file", "glob", "grep", "mcp__fs__stat"}},
		{typ: "inherits", prompt: "look", report: "REPORT: looked",
			want: []string{"bash", "read_file", "write_file", "edit_file", "glob", "grep", "TodoWrite", "mcp__gh__create_issue", "mcp__fs__stat"}},
		{typ: "denier", prompt: "look", report: "REPORT: looked",
			want: []string{"bash", "read_file", "glob", "grep", "TodoWrite", "mcp__fs__stat"}},
		{typ: "lister", prompt: "look", report: "REPORT: looked",
			want: []string{"read_file", "mcp__gh__create_issue"}},
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			f := setup(t, script)
			writeAgent(t, filepath.Join(f.ws.Dir(), ".claude", "agents", "inherits.md"), "---\ndescription: d\n---\nYou help.\n")
			writeAgent(t, filepath.Join(f.ws.Dir(), ".claude", "agents", "denier.md"), "---\ndescription: d\ndisallowedTools: Write, Edit, mcp__gh\n---\nYou help.\n")
			writeAgent(t, filepath.Join(f.ws.Dir(), ".claude", "agents", "lister.md"), "---\ndescription: d\ntools: mcp__gh__create_issue, Read\n---\nYou help.\n")
			cat, warns := subagent.Discover(f.ws.Dir(), subagent.Options{NoUser: true})
			if len(warns) != 0 {
				t.Fatalf("warnings: %v", warns)
			}
			f.runner.Agents = cat
			f.runner.Extra = extra
			report, err := f.runner.Run(context.Background(), tool.TaskArgs{SubagentType: tt.typ, Prompt: tt.prompt})
			if err != nil {
				t.Fatal(err)
			}
			if report != tt.report {
				t.Errorf("report = %q, want %q", report, tt.report)
			}
			sub := calls(t, f.srv, f.runner.Name(tt.typ))
			if len(sub) == 0 {
				t.Fatal("the subagent made no call")
			}
			if diff := cmp.Diff(tt.want, sub[0].toolNames()); diff != "" {
				t.Errorf("tools offered (-want +got):\n%s", diff)
			}
			for _, r := range f.srv.Requests() {
				if hasResultImage(t, r.Body, "image/png", "iVBORw==") {
					sawImage.Store(true)
				}
			}
		})
	}
	if !sawImage.Load() {
		t.Error("the MCP tool's image never reached the model as an image block in its tool_result")
	}
	if n := created.Load(); n != 1 {
		t.Errorf("the MCP tool ran %d times, want 1 (by the general-purpose subagent)", n)
	}
}

// hasResultImage reports whether a request body has a tool_result holding
// the given base64 image.
func hasResultImage(t *testing.T, body []byte, mediaType, data string) bool {
	t.Helper()
	var req struct {
		Messages []struct {
			Content []struct {
				Type    string `json:"type"`
				Content []struct {
					Type   string `json:"type"`
					Source struct {
						Type      string `json:"type"`
						MediaType string `json:"media_type"`
						Data      string `json:"data"`
					} `json:"source"`
				} `json:"content"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	for _, m := range req.Messages {
		for _, b := range m.Content {
			for _, c := range b.Content {
				if b.Type == "tool_result" && c.Type == "image" && c.Source.Type == "base64" && c.Source.MediaType == mediaType && c.Source.Data == data {
					return true
				}
			}
		}
	}
	return false
}
