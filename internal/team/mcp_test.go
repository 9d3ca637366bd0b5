package team_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/pattern"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

// fakeMCPEnv makes a teammate process of the test binary have the fake
// MCP tools, limited by its --mcp-servers as `troupe agent` limits them.
const fakeMCPEnv = "TROUPE_TEST_FAKE_MCP"

// fakeMCP is an MCP server's tool as the session would be given it.
type fakeMCP struct{ name string }

func (f fakeMCP) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: f.name, Description: "fake", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (fakeMCP) ReadOnly() bool  { return false }
func (fakeMCP) Kind() kind.Kind { return kind.Network }
func (fakeMCP) Run(context.Context, *tool.Env, json.RawMessage) tool.Result {
	return tool.OK("done")
}

func fakeMCPTools() []tool.Tool {
	return []tool.Tool{fakeMCP{"mcp__gh__create_issue"}, fakeMCP{"mcp__gh__list_issues"}, fakeMCP{"mcp__fs__stat"}}
}

// processMCPTools are a teammate process's MCP tools: none unless the test
// asks for them, else the fakes of the servers its command line names.
func processMCPTools(servers []string) []tool.Tool {
	if os.Getenv(fakeMCPEnv) == "" {
		return nil
	}
	var out []tool.Tool
	for _, t := range fakeMCPTools() {
		s := strings.Split(t.Spec().Name, "__")[1]
		if len(servers) == 0 || slices.Contains(servers, s) {
			out = append(out, t)
		}
	}
	return out
}

// TestSpawnMCPServers: a spawn's mcp_servers limits the MCP tools the
// teammate is offered to those servers', and the roster records it; without
// it the teammate gets all of the lead's; a server the lead has no tools of
// is refused with the list.
func TestSpawnMCPServers(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, mode option) {
		f := startMode(t, mode, `
rules:
  - agent: team-lead
    contains: "Hand out tools"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: tools}}
      - tool_use: {name: Task, input: {team_name: tools, name: alice, description: a, prompt: "Hello alice.", mcp_servers: [gh]}}
      - tool_use: {name: Task, input: {team_name: tools, name: bob, description: b, prompt: "Hello bob."}}
      - tool_use: {name: Task, input: {team_name: tools, name: carol, description: c, prompt: "Hello carol.", mcp_servers: [nope]}}
  - agent: team-lead
    contains: "is not an MCP server"
    reply: [{text: "Handed out."}]
  - agent: alice
    reply: [{text: "Hi."}]
  - agent: bob
    reply: [{text: "Hi."}]
`, func(c *team.Config) {
			c.Tools = fakeMCPTools()
			c.AgentEnv = append(c.AgentEnv, fakeMCPEnv+"=1")
		})
		res := f.run("Hand out tools.")
		if res.Text != "Handed out." {
			t.Errorf("lead's last text = %q", res.Text)
		}
		lead := f.requests("team-lead")
		if last := lead[len(lead)-1]; !strings.Contains(last, `mcp_servers: \"nope\" is not an MCP server with tools in this session; the servers are: fs, gh`) {
			t.Errorf("carol's spawn was not refused with the servers; lead's last call:\n%s", last)
		}
		for _, tt := range []struct {
			name string
			want []string
		}{
			{"alice", []string{"mcp__gh__create_issue", "mcp__gh__list_issues"}},
			{"bob", []string{"mcp__gh__create_issue", "mcp__gh__list_issues", "mcp__fs__stat"}},
		} {
			reqs := f.requests(tt.name)
			if len(reqs) == 0 {
				t.Fatalf("%s made no model call", tt.name)
			}
			var body struct {
				Tools []struct {
					Name string `json:"name"`
				} `json:"tools"`
			}
			if err := json.Unmarshal([]byte(reqs[0]), &body); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tl := range body.Tools {
				if strings.HasPrefix(tl.Name, "mcp__") {
					got = append(got, tl.Name)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s's MCP tools (-want +got):\n%s", tt.name, diff)
			}
		}
		r := f.roster()
		var got [][]string
		for _, n := range []string{"alice", "bob"} {
			m, ok := rosterMember(r, n)
			if !ok {
				t.Fatalf("%s is not on the roster", n)
			}
			got = append(got, m.MCPServers)
		}
		if diff := cmp.Diff([][]string{{"gh"}, nil}, got); diff != "" {
			t.Errorf("roster's mcp_servers of alice, bob (-want +got):\n%s", diff)
		}
		if _, ok := rosterMember(r, "carol"); ok {
			t.Error("carol is on the roster though her spawn was refused")
		}
	})
}

// TestPatternRoleMCPServers: a pattern's role may name the MCP servers its
// teammates get; a spawn of that role without mcp_servers gets only those.
func TestPatternRoleMCPServers(t *testing.T) {
	t.Parallel()
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Review it"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: rev, pattern: reviewers}}
      - tool_use: {name: Task, input: {team_name: rev, name: dana, role: reviewer, description: d, prompt: "Hello dana."}}
  - agent: team-lead
    reply: [{text: "Spawned."}]
  - agent: dana
    reply: [{text: "Hi."}]
`, func(c *team.Config) {
		dir := filepath.Join(c.Workspace.Dir(), ".troupe", "patterns")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "reviewers.yaml"), []byte("lead_works: true\nsize: 1\nroles: [{name: reviewer, mcp_servers: [fs]}]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		c.Rules = &team.Rules{Patterns: pattern.Load(dir)}
		c.Tools = fakeMCPTools()
	})
	f.run("Review it.")
	reqs := f.requests("dana")
	if len(reqs) == 0 {
		t.Fatal("dana made no model call")
	}
	var body struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal([]byte(reqs[0]), &body); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tl := range body.Tools {
		if strings.HasPrefix(tl.Name, "mcp__") {
			got = append(got, tl.Name)
		}
	}
	if diff := cmp.Diff([]string{"mcp__fs__stat"}, got); diff != "" {
		t.Errorf("the reviewer's MCP tools (-want +got):\n%s", diff)
	}
}
