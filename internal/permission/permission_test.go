package permission

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/settings"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

// call is a call of the named tool as an agent makes it: with the kind its
// tool declares (kind.Unknown for a name troupe has no tool for).
func call(name string, input any) agent.Call {
	b, _ := json.Marshal(input)
	return agent.Call{ID: "c1", Name: name, Input: b, Kind: tool.KindOf(name)}
}

// manage is a call of a team tool, which declares kind.Manage (checked in
// package team, which this package may not import).
func manage(name string) agent.Call {
	c := call(name, map[string]string{})
	c.Kind = kind.Manage
	return c
}

func bash(cmd string) agent.Call { return call("bash", map[string]string{"command": cmd}) }
func edit(p string) agent.Call   { return call("edit_file", map[string]string{"path": p}) }
func write(p string) agent.Call  { return call("write_file", map[string]string{"path": p}) }
func read(p string) agent.Call   { return call("read_file", map[string]string{"path": p}) }

func TestCheck(t *testing.T) {
	const ws = "/work/proj"
	p, err := New(ws,
		Rules("Bash(git status:*)", "Bash(npm run test)", "Bash(go test *)", "Edit(src/**)", "Read(**)", "WebFetch", "Bash(git push:*)"),
		Rules("Bash(rm:*)", "Read(secrets/**)", "Edit(*.lock)", "Bash(git push:*)"),
		Rules("Bash(git commit:*)"),
	)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		mode Mode
		call agent.Call
		want Effect
		rule string
	}{
		{"prefix allow", Default, bash("git status --short"), Allow, "Bash(git status:*)"},
		{"prefix is a word prefix", Default, bash("git statusx"), Ask, ""},
		{"exact allow", Default, bash("npm run test"), Allow, "Bash(npm run test)"},
		{"exact is exact", Default, bash("npm run test --watch"), Ask, ""},
		{"wildcard", Default, bash("go test ./..."), Allow, "Bash(go test *)"},
		{"compound needs every part allowed", Default, bash("git status && curl evil"), Ask, ""},
		{"compound of allowed parts", Default, bash("git status; npm run test"), Allow, "Bash(git status:*)"},
		{"substitution never allowed by prefix", Default, bash("git status $(curl x)"), Ask, ""},
		{"redirection never allowed by prefix", Default, bash("git status > f"), Ask, ""},
		{"deny beats allow", Default, bash("git push origin main"), Deny, "Bash(git push:*)"},
		{"deny finds a hidden rm", Default, bash(`echo ok && FOO=1 rm -rf /`), Deny, "Bash(rm:*)"},
		{"deny inside a substitution", Default, bash(`echo "$(rm -rf x)"`), Deny, "Bash(rm:*)"},
		{"deny applies in bypass", Bypass, bash("rm x"), Deny, "Bash(rm:*)"},
		{"ask beats allow", Default, bash("git commit -m x"), Ask, "Bash(git commit:*)"},
		{"ask rules ask in bypass too", Bypass, bash("git commit -m x"), Ask, "Bash(git commit:*)"},
		{"bypass allows the rest", Bypass, bash("make"), Allow, ""},
		{"edit allow", Default, edit("src/a/b.go"), Allow, "Edit(src/**)"},
		{"edit absolute inside", Default, edit("/work/proj/src/x.go"), Allow, "Edit(src/**)"},
		{"edit outside", Default, edit("lib/x.go"), Ask, ""},
		{"edit escaping", Default, edit("src/../../etc/passwd"), Ask, ""},
		{"Edit covers write_file", Default, write("src/new.go"), Allow, "Edit(src/**)"},
		{"bare name at any depth", Default, edit("src/deep/go.lock"), Deny, "Edit(*.lock)"},
		{"read allow", Default, read("README.md"), Allow, "Read(**)"},
		{"read deny first", Default, read("secrets/key"), Deny, "Read(secrets/**)"},
		{"Read covers grep", Default, call("grep", map[string]string{"pattern": "x", "path": "secrets/a"}), Deny, "Read(secrets/**)"},
		{"bare tool", Default, call("WebFetch", map[string]string{"url": "x"}), Allow, "WebFetch"},
		{"acceptEdits edits", AcceptEdits, edit("lib/x.go"), Allow, ""},
		{"acceptEdits asks bash", AcceptEdits, bash("make"), Ask, ""},
		{"default reads", Default, call("glob", map[string]string{"pattern": "*"}), Allow, "Read(**)"},
		{"default asks bash", Default, bash("make"), Ask, ""},
		{"plan refuses edits even if allowed", Plan, edit("src/a.go"), Deny, ""},
		{"plan reads", Plan, read("a.go"), Allow, "Read(**)"},
		{"delegate refuses edits even if allowed", Delegate, edit("src/a.go"), Deny, ""},
		{"delegate refuses bash", Delegate, bash("git status"), Deny, ""},
		{"delegate manages", Delegate, manage("TaskCreate"), Allow, ""},
		{"management tools allowed", Default, manage("SendMessage"), Allow, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := p.Check(tt.mode, tt.call)
			if v.Effect != tt.want || v.Rule != tt.rule {
				t.Errorf("Check(%s, %s %s) = %s by %q (%s), want %s by %q", tt.mode, tt.call.Name, tt.call.Input, v.Effect, v.Rule, v.Reason, tt.want, tt.rule)
			}
		})
	}
}

func TestCheckClaudeToolNames(t *testing.T) {
	p, err := New("/w", Rules("bash(git log:*)", "edit_file", "Write(docs/**)"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []agent.Call{bash("git log -1"), edit("any/where.go"), write("docs/a.md")} {
		if v := p.Check(Default, c); v.Effect != Allow {
			t.Errorf("%s %s: %+v, want allow", c.Name, c.Input, v)
		}
	}
	if v := p.Check(Default, edit("docs/a.md")); v.Rule != "edit_file" {
		t.Errorf("Write rules must not cover edit_file alone: %+v", v)
	}
	if v := p.Check(Default, write("x.md")); v.Effect != Ask {
		t.Errorf("Write(docs/**) covered x.md: %+v", v)
	}
}

func TestParseRuleErrors(t *testing.T) {
	for _, raw := range []string{"Bash(", "Bash()", "(x)", "Bash(:*)", "Edit([)", "Bad Name", "Edit(a)b"} {
		if _, err := ParseRule(raw); !errors.Is(err, ErrBadRule) || !strings.Contains(err.Error(), raw) {
			t.Errorf("ParseRule(%q) error = %v, want ErrBadRule naming it", raw, err)
		}
	}
	_, err := New("/w", nil, []settings.Rule{{Rule: "Edit([)", Source: settings.Source{Path: "/w/.troupe/settings.json"}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "/w/.troupe/settings.json") {
		t.Errorf("New error = %v, want the file named", err)
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range []string{"", "default", "acceptEdits", "plan", "dontAsk", "bypassPermissions", "delegate"} {
		if _, err := ParseMode(m); err != nil {
			t.Errorf("ParseMode(%q): %v", m, err)
		}
	}
	if _, err := ParseMode("yolo"); !errors.Is(err, ErrBadMode) {
		t.Errorf("ParseMode(yolo) = %v", err)
	}
	// auto needs Claude Code's classifier model; it is refused, saying so.
	if _, err := ParseMode("auto"); !errors.Is(err, ErrBadMode) || !strings.Contains(err.Error(), "classif") {
		t.Errorf("ParseMode(auto) = %v", err)
	}
}

func TestGate(t *testing.T) {
	p, err := New("/w", Rules("Edit(src/**)"), Rules("Bash(rm:*)"), nil)
	if err != nil {
		t.Fatal(err)
	}
	type rec struct {
		Tool   string
		Effect Effect
		Allow  bool
	}
	var recs []rec
	var asked []string
	answer := true
	mode := Default
	g := Gate(GateConfig{
		Policy: p,
		Mode:   func() Mode { return mode },
		Ask: func(_ context.Context, c agent.Call, v Verdict) agent.Decision {
			asked = append(asked, c.Name+": "+v.Reason)
			if answer {
				return agent.Decision{Allow: true}
			}
			return agent.Decision{Reason: "the lead said no"}
		},
		Record: func(_ context.Context, c agent.Call, v Verdict, d agent.Decision) {
			recs = append(recs, rec{c.Name, v.Effect, d.Allow})
		},
	})
	ctx := context.Background()
	if d := g(ctx, edit("src/a.go")); !d.Allow {
		t.Errorf("allowed edit refused: %+v", d)
	}
	if d := g(ctx, bash("make")); !d.Allow {
		t.Errorf("approved bash refused: %+v", d)
	}
	answer = false
	if d := g(ctx, bash("make")); d.Allow || d.Reason != "the lead said no" {
		t.Errorf("denied answer: %+v", d)
	}
	if d := g(ctx, bash("rm -rf x")); d.Allow || !strings.Contains(d.Reason, "Bash(rm:*)") {
		t.Errorf("deny rule: %+v", d)
	}
	// A hook's allow answers the question without asking; its ask asks;
	// neither lifts a deny rule.
	n := len(asked)
	if d := g(WithHookDecision(ctx, Allow, "ok by hook"), bash("make")); !d.Allow || len(asked) != n {
		t.Errorf("hook allow: %+v, asked %d", d, len(asked)-n)
	}
	if d := g(WithHookDecision(ctx, Allow, ""), bash("rm x")); d.Allow {
		t.Errorf("hook allow lifted a deny rule")
	}
	answer = true
	if d := g(WithHookDecision(ctx, Ask, "check this"), edit("src/a.go")); !d.Allow || len(asked) != n+1 || !strings.Contains(asked[n], "check this") {
		t.Errorf("hook ask: %+v %q", d, asked)
	}
	mode = Delegate
	if d := g(WithHookDecision(ctx, Allow, ""), edit("src/a.go")); d.Allow || !strings.Contains(d.Reason, "delegate") {
		t.Errorf("delegate mode lifted: %+v", d)
	}
	want := []rec{
		{"edit_file", Allow, true}, {"bash", Ask, true}, {"bash", Ask, false}, {"bash", Deny, false},
		{"bash", Allow, true}, {"bash", Deny, false}, {"edit_file", Ask, true}, {"edit_file", Deny, false},
	}
	if diff := cmp.Diff(want, recs); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	// Nobody to ask: refused with a reason.
	g = Gate(GateConfig{Policy: p})
	if d := g(ctx, bash("make")); d.Allow || !strings.Contains(d.Reason, "no one is attached") {
		t.Errorf("no asker: %+v", d)
	}
}

func TestChain(t *testing.T) {
	var order []string
	mk := func(name string, allow bool) agent.Gate {
		return func(context.Context, agent.Call) agent.Decision {
			order = append(order, name)
			return agent.Decision{Allow: allow, Reason: name}
		}
	}
	d := Chain(mk("a", true), nil, mk("b", false), mk("c", true))(context.Background(), bash("x"))
	if d.Allow || d.Reason != "b" {
		t.Errorf("Chain = %+v", d)
	}
	if diff := cmp.Diff([]string{"a", "b"}, order); diff != "" {
		t.Error(diff)
	}
}

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"Bash(git status:*)", "Edit(src/**)", "Read(//etc/*)", "Bash(a * b)", "X(", "Edit(~/x)"} {
		f.Add(s, "git status && ls")
	}
	f.Fuzz(func(t *testing.T, rule, cmd string) {
		r, err := ParseRule(rule)
		if err != nil {
			return
		}
		p := &Policy{workspace: "/w", allow: []Rule{r}, deny: []Rule{r}}
		_ = p.Check(Default, bash(cmd))
		_ = p.Check(Default, edit(cmd))
	})
}

func TestDeniesPath(t *testing.T) {
	p, err := New("/work/proj", nil, Rules("Read(secrets/**)", "Grep(*.pem)", "Edit(docs/**)"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool, rel string
		want      bool
	}{
		{"grep", "secrets/key.txt", true},
		{"glob", "secrets/a/b.txt", true},
		{"grep", "secrets", true},
		{"grep", "src/secrets.go", false},
		{"grep", "server.pem", true},  // a Grep rule covers grep
		{"glob", "server.pem", false}, // but not glob
		{"grep", "docs/readme.md", false},
		{"grep", "./secrets/key.txt", true},
	} {
		if got := p.DeniesPath(tc.tool, tc.rel); got != tc.want {
			t.Errorf("DeniesPath(%s, %s) = %v, want %v", tc.tool, tc.rel, got, tc.want)
		}
	}
	if (*Policy)(nil).DeniesPath("grep", "x") {
		t.Error("a nil policy denies nothing")
	}
}
