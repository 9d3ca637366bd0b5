package subagent_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/subagent"
	"github.com/troupe-dev/troupe/internal/tool"
)

func writeAgent(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestParseDefinition(t *testing.T) {
	tests := []struct {
		name, data string
		want       subagent.Definition
		notes      []string
		err        string
	}{
		{
			name:  "comma tools in the file's order become the general order",
			data:  "---\nname: reviewer\ndescription: Reviews code\ntools: Grep, Read, Bash(git diff:*), WebFetch, Agent(x)\nmodel: haiku\nmaxTurns: 4\n---\n\nYou review.\n",
			want:  subagent.Definition{Name: "reviewer", Description: "Reviews code", Prompt: "You review.", Tools: []string{"bash", "read_file", "grep"}, Model: "haiku", MaxTurns: 4},
			notes: []string{`tool "WebFetch" is not available to troupe's subagents; left out`},
		},
		{
			name: "no tools: every general tool; disallowed removed",
			data: "---\ndescription: d\ndisallowedTools: [Write, Edit, mcp__gh]\n---\nBody",
			want: subagent.Definition{Name: "fallback", Description: "d", Prompt: "Body", Tools: []string{"bash", "read_file", "glob", "grep", "TodoWrite"},
				AllMCP: true, DisallowedMCP: []string{"mcp__gh"}},
		},
		{
			name: "nothing said about tools: nil (all)",
			data: "---\nname: a\ndescription: d\nmodel: inherit\n---\n",
			want: subagent.Definition{Name: "a", Description: "d", Model: "inherit", AllMCP: true},
		},
		{name: "no front matter", data: "hello", err: "no front matter"},
		{name: "unclosed", data: "---\nname: a\n", err: "not closed"},
		{name: "no description", data: "---\nname: a\n---\n", err: "no description"},
		{name: "bad name", data: "---\nname: Bad Name\ndescription: d\n---\n", err: `name "Bad Name"`},
		{name: "bad yaml", data: "---\nname: [\n---\n", err: "front matter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, notes, err := subagent.ParseDefinition([]byte(tt.data), "fallback")
			if tt.err != "" {
				if err == nil || !errors.Is(err, subagent.ErrInvalidAgent) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("definition (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.notes, notes); diff != "" {
				t.Errorf("notes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDiscoverAgents(t *testing.T) {
	ws, user := t.TempDir(), t.TempDir()
	writeAgent(t, filepath.Join(ws, ".claude", "agents", "reviewer.md"), "---\nname: reviewer\ndescription: Project reviewer\n---\nP")
	writeAgent(t, filepath.Join(ws, ".claude", "agents", "sub", "tester.md"), "---\ndescription: Runs tests\n---\nT")
	writeAgent(t, filepath.Join(ws, ".claude", "agents", "general.md"), "---\ndescription: shadows a built-in\n---\nX")
	writeAgent(t, filepath.Join(user, "agents", "reviewer.md"), "---\nname: reviewer\ndescription: User reviewer\n---\nU")
	writeAgent(t, filepath.Join(user, "agents", "mine.md"), "---\nname: mine\ndescription: Mine\n---\nM")
	c, warns := subagent.Discover(ws, subagent.Options{ClaudeDir: user})
	if diff := cmp.Diff([]string{"mine", "reviewer", "tester"}, c.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	if d, _ := c.Get("reviewer"); d.Description != "Project reviewer" {
		t.Errorf("reviewer = %+v, want the project's", d)
	}
	if len(warns) != 2 || !strings.Contains(warns[0].String(), "built-in") || !strings.Contains(warns[1].String(), "takes precedence") {
		t.Errorf("warnings = %v", warns)
	}
	if p := c.Prompt(); !strings.Contains(p, "- tester: Runs tests") {
		t.Errorf("prompt:\n%s", p)
	}
}

// TestCustomAgentRuns: a .claude/agents type runs with its tools, model and
// prompt.
func TestCustomAgentRuns(t *testing.T) {
	f := setup(t, `
rules:
  - agent: "team-lead:reviewer"
    reply: [{text: "LGTM"}]
  - agent: "team-lead:general-purpose"
    reply: [{text: "done"}]
`)
	ws := t.TempDir()
	writeAgent(t, filepath.Join(ws, ".claude", "agents", "reviewer.md"), "---\nname: reviewer\ndescription: Reviews\ntools: Read, Grep\nmodel: opus\n---\nYou are a strict reviewer.\n")
	cat, warns := subagent.Discover(ws, subagent.Options{NoUser: true})
	if len(warns) != 0 {
		t.Fatal(warns)
	}
	f.runner.Agents = cat
	f.runner.Model = "parent-model"
	report, err := f.runner.Run(context.Background(), tool.TaskArgs{Prompt: "Review it", SubagentType: "reviewer"})
	if err != nil || report != "LGTM" {
		t.Fatalf("report %q, err %v", report, err)
	}
	// The old name of the general type still works.
	if _, err := f.runner.Run(context.Background(), tool.TaskArgs{Prompt: "Do it", SubagentType: "general"}); err != nil {
		t.Fatal(err)
	}
	sub := calls(t, f.srv, "team-lead:reviewer")
	if len(sub) != 1 {
		t.Fatalf("%d calls", len(sub))
	}
	if diff := cmp.Diff([]string{"read_file", "grep"}, sub[0].toolNames()); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if sub[0].Model != subagent.ModelAliases["opus"] {
		t.Errorf("model = %q", sub[0].Model)
	}
	if sys := sub[0].System[0].Text; !strings.Contains(sys, "You are a strict reviewer.") {
		t.Errorf("system prompt lacks the agent's body:\n%s", sys)
	}
	if gen := calls(t, f.srv, "team-lead:general-purpose"); len(gen) != 1 || gen[0].Model != "parent-model" {
		t.Errorf("general-purpose calls = %+v", gen)
	}
	_, err = f.runner.Run(context.Background(), tool.TaskArgs{Prompt: "x", SubagentType: "wizard"})
	if err == nil || !strings.Contains(err.Error(), "explore, general-purpose, reviewer") {
		t.Errorf("err = %v", err)
	}
}

func FuzzParseDefinition(f *testing.F) {
	f.Add([]byte("---\nname: a\ndescription: d\ntools: Read, Bash(x:*)\nmodel: sonnet\n---\nbody"))
	f.Add([]byte("---\ntools: [1, {a: b}]\ndisallowedTools: 3\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		def, _, err := subagent.ParseDefinition(data, "x")
		if err != nil {
			if !errors.Is(err, subagent.ErrInvalidAgent) {
				t.Fatalf("error does not wrap ErrInvalidAgent: %v", err)
			}
			return
		}
		if def.Name == "" || def.Description == "" {
			t.Fatalf("accepted %+v", def)
		}
	})
}
