package permission

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

// decision is what a test wants of a verdict: its effect and whether it is
// hard (no hook or answer may lift it).
type decision struct {
	Effect Effect
	Hard   bool
}

var (
	allow  = decision{Effect: Allow}
	ask    = decision{Effect: Ask}
	refuse = decision{Effect: Deny}             // dontAsk: what would ask
	limit  = decision{Effect: Deny, Hard: true} // a mode's hard limit
)

// TestKindDecisions is the mode's default for each kind, on a tool the rule
// syntax does not name (so no Bash, Read or Edit rule reaches it and only
// the kind decides), with no rules.
func TestKindDecisions(t *testing.T) {
	modes := []Mode{Default, AcceptEdits, Plan, DontAsk, Bypass, Delegate}
	want := map[kind.Kind][]decision{
		//            default acceptEdits plan  dontAsk bypass delegate
		kind.Read:    {allow, allow, allow, allow, allow, limit},
		kind.Edit:    {ask, ask, limit, refuse, allow, limit}, // acceptEdits cannot check its paths
		kind.Execute: {ask, ask, limit, refuse, allow, limit},
		kind.Network: {ask, ask, ask, refuse, allow, limit},
		kind.Manage:  {allow, allow, allow, allow, allow, allow},
		kind.Unknown: {ask, ask, limit, refuse, allow, limit},
	}
	p, err := New("/work/proj", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kind.All() {
		c := agent.Call{Name: "mcp__srv__do", Input: []byte(`{"path":"a.go","command":"ls"}`), Kind: k}
		var got []decision
		for _, m := range modes {
			v := p.Check(m, c)
			got = append(got, decision{v.Effect, v.Hard})
		}
		if diff := cmp.Diff(want[k], got); diff != "" {
			t.Errorf("kind %s over modes %v (-want +got):\n%s", k, modes, diff)
		}
	}
}

// TestUnknownToolFailsClosed: a tool that has not said what it does, such
// as an MCP tool troupe knows nothing of, asks where asking is possible,
// is refused where it is not, and runs in bypassPermissions; rules still
// decide it as any other tool.
func TestUnknownToolFailsClosed(t *testing.T) {
	const name = "mcp__github__create_issue"
	mcp := agent.Call{Name: name, Input: []byte(`{"title":"x"}`)} // no kind: unknown
	if mcp.Kind != kind.Unknown {
		t.Fatalf("the zero kind is %s, want unknown", mcp.Kind)
	}
	type rules struct{ allow, deny, ask []string }
	tests := []struct {
		why   string
		rules rules
		mode  Mode
		want  decision
	}{
		{"default asks", rules{}, Default, ask},
		{"acceptEdits asks: it may do more than edit", rules{}, AcceptEdits, ask},
		{"plan refuses: it may change anything", rules{}, Plan, limit},
		{"dontAsk refuses what would ask", rules{}, DontAsk, refuse},
		{"delegate keeps to management", rules{}, Delegate, limit},
		{"bypassPermissions runs it, as Claude Code does", rules{}, Bypass, allow},
		{"an ask rule still asks in bypassPermissions", rules{ask: []string{name}}, Bypass, ask},
		{"a deny rule refuses in bypassPermissions", rules{deny: []string{name}}, Bypass, limit},
		{"an allow rule naming it lets it run", rules{allow: []string{name}}, Default, allow},
		{"an allow rule is the pre-approval dontAsk wants", rules{allow: []string{name}}, DontAsk, allow},
		{"no allow rule lifts plan's limit", rules{allow: []string{name}}, Plan, limit},
	}
	for _, tt := range tests {
		t.Run(tt.why, func(t *testing.T) {
			p, err := New("/work/proj", Rules(tt.rules.allow...), Rules(tt.rules.deny...), Rules(tt.rules.ask...))
			if err != nil {
				t.Fatal(err)
			}
			v := p.Check(tt.mode, mcp)
			if got := (decision{v.Effect, v.Hard}); got != tt.want {
				t.Errorf("Check(%s, %s) = %+v (%s), want %+v", tt.mode, name, got, v.Reason, tt.want)
			}
		})
	}
	// What asks says why and how to allow it.
	p, _ := New("/w", nil, nil, nil)
	v := p.Check(Default, mcp)
	if v.SuggestRule != name || !containsAll(v.Reason, "kind is unknown", name) {
		t.Errorf("unknown tool's verdict = %+v, want it to say its kind is unknown and suggest %s", v, name)
	}
}

// TestPathToolsByKind: for the tools Read and Edit rules name, the call's
// kind says whether it may write. One that came without its kind (a name
// relayed from elsewhere) is not trusted to only read: protected paths
// hold against it, and it asks.
func TestPathToolsByKind(t *testing.T) {
	p, err := New("/work/proj", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	unknown := func(c agent.Call) agent.Call { c.Kind = kind.Unknown; return c }
	tests := []struct {
		why  string
		mode Mode
		call agent.Call
		want decision
	}{
		{"reading settings is no write", Bypass, read(".claude/settings.json"), allow},
		{"writing them is", Bypass, write(".claude/settings.json"), limit},
		{"a path tool of unknown kind meets protected paths", Bypass, unknown(read(".claude/settings.json")), limit},
		{"a path tool of unknown kind asks", Default, unknown(read("a.go")), ask},
		{"and plan refuses it", Plan, unknown(read("a.go")), limit},
		{"acceptEdits accepts an edit whose path it checked", AcceptEdits, edit("a.go"), allow},
	}
	for _, tt := range tests {
		t.Run(tt.why, func(t *testing.T) {
			v := p.Check(tt.mode, tt.call)
			if got := (decision{v.Effect, v.Hard}); got != tt.want {
				t.Errorf("Check(%s, %s %s kind %s) = %+v (%s), want %+v", tt.mode, tt.call.Name, tt.call.Input, tt.call.Kind, got, v.Reason, tt.want)
			}
		})
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestMCPServerRules: as Claude Code documents, "mcp__github" and
// "mcp__github__*" name every tool of the github server, and a full tool
// name names that tool only; none reaches another server.
func TestMCPServerRules(t *testing.T) {
	call := func(name string) agent.Call { return agent.Call{Name: name, Input: []byte(`{}`), Kind: kind.Network} }
	tests := []struct {
		allow string
		tool  string
		want  Effect
	}{
		{"mcp__github", "mcp__github__create_issue", Allow},
		{"mcp__github__*", "mcp__github__create_issue", Allow},
		{"mcp__github__create_issue", "mcp__github__create_issue", Allow},
		{"mcp__github__create_issue", "mcp__github__delete_repo", Ask},
		{"mcp__github", "mcp__githubber__x", Ask},
		{"mcp__github", "mcp__gitlab__create_issue", Ask},
	}
	for _, tt := range tests {
		p, err := New(t.TempDir(), Rules(tt.allow), nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", tt.allow, err)
		}
		if got := p.Check(Default, call(tt.tool)); got.Effect != tt.want {
			t.Errorf("allow %s, call %s: %s (%s), want %s", tt.allow, tt.tool, got.Effect, got.Reason, tt.want)
		}
	}
	p, err := New(t.TempDir(), nil, Rules("mcp__github__*"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Check(Bypass, call("mcp__github__push")); got.Effect != Deny {
		t.Errorf("deny mcp__github__* in bypass: %s", got.Effect)
	}
}
