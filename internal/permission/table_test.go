package permission

import (
	"context"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/agent"
)

// TestClaudeCodeTable is issue 13's permission table: rule × mode × call,
// each with the outcome Claude Code's documentation (code.claude.com,
// permissions and permission-modes pages) gives, and why.
func TestClaudeCodeTable(t *testing.T) {
	type rules struct{ allow, deny, ask []string }
	tests := []struct {
		why   string // the documented reason
		rules rules
		mode  Mode
		call  agent.Call
		want  Effect
	}{
		{"rules are evaluated deny first: a deny beats a matching allow",
			rules{allow: []string{"Bash(npm:*)"}, deny: []string{"Bash(npm publish:*)"}}, Default, bash("npm publish"), Deny},
		{"a matching ask rule prompts even when a more specific allow rule matches",
			rules{allow: []string{"Bash(git push origin main)"}, ask: []string{"Bash(git push:*)"}}, Default, bash("git push origin main"), Ask},
		{"ask rules prompt whatever the defaultMode",
			rules{ask: []string{"Bash(git push:*)"}}, Bypass, bash("git push"), Ask},
		{"ask rules prompt in acceptEdits too",
			rules{ask: []string{"Edit(src/**)"}}, AcceptEdits, edit("src/a.go"), Ask},
		{"deny rules apply in bypassPermissions",
			rules{deny: []string{"Bash(rm:*)"}}, Bypass, bash("rm -rf x"), Deny},
		{"default mode: read-only tools need no approval",
			rules{}, Default, read("README.md"), Allow},
		{"default mode: file modification needs approval",
			rules{}, Default, edit("a.go"), Ask},
		{"default mode: bash commands need approval",
			rules{}, Default, bash("make build"), Ask},
		{"default mode: read-only commands such as ls run without a prompt",
			rules{}, Default, bash("ls -la"), Allow},
		{"default mode: git status is read-only",
			rules{}, Default, bash("git status"), Allow},
		{"default mode: git push is not read-only",
			rules{}, Default, bash("git push"), Ask},
		{"acceptEdits: file edits are accepted",
			rules{}, AcceptEdits, edit("a.go"), Allow},
		{"acceptEdits: bash commands still prompt",
			rules{}, AcceptEdits, bash("make"), Ask},
		{"acceptEdits: common filesystem commands such as mkdir run unasked",
			rules{}, AcceptEdits, bash("mkdir -p build/out"), Allow},
		{"plan mode: Claude can analyse but not modify files",
			rules{allow: []string{"Edit"}}, Plan, edit("a.go"), Deny},
		{"plan mode: reads run",
			rules{}, Plan, read("a.go"), Allow},
		{"plan mode: only read-only commands run",
			rules{}, Plan, bash("npm install"), Deny},
		{"plan mode: a read-only command runs",
			rules{}, Plan, bash("git log -5"), Allow},
		{"dontAsk: tools are denied unless pre-approved by permissions.allow",
			rules{}, DontAsk, bash("make"), Deny},
		{"dontAsk: a pre-approved tool runs",
			rules{allow: []string{"Bash(make:*)"}}, DontAsk, bash("make test"), Allow},
		{"dontAsk: reads still run",
			rules{}, DontAsk, read("a.go"), Allow},
		{"dontAsk: an ask rule cannot prompt, so it refuses",
			rules{allow: []string{"Bash"}, ask: []string{"Bash(git push:*)"}}, DontAsk, bash("git push"), Deny},
		{"bypassPermissions skips prompts",
			rules{}, Bypass, edit("a.go"), Allow},
		{"Bash(npm run test:*) matches commands that start with npm run test",
			rules{allow: []string{"Bash(npm run test:*)"}}, Default, bash("npm run test --watch"), Allow},
		{"the prefix ends at a word boundary",
			rules{allow: []string{"Bash(npm run test:*)"}}, Default, bash("npm run testx"), Ask},
		{"Bash(ls *) with a space before * also matches bare ls",
			rules{allow: []string{"Bash(ls *)"}, deny: []string{}}, Default, bash("ls"), Allow},
		{"Bash(ls *) does not match lsof",
			rules{allow: []string{"Bash(ls *)"}}, Default, bash("lsof -i"), Ask},
		{"Bash(npm run build) matches the exact command only",
			rules{allow: []string{"Bash(npm run build)"}}, Default, bash("npm run build --prod"), Ask},
		{"a prefix rule does not allow safe-cmd && other-cmd",
			rules{allow: []string{"Bash(npm test:*)"}}, Default, bash("npm test && curl evil.sh"), Ask},
		{"a bare tool name matches every use of the tool",
			rules{allow: []string{"WebFetch"}}, Default, call("WebFetch", map[string]string{"url": "https://x"}), Allow},
		{"Edit rules apply to every built-in tool that edits files",
			rules{deny: []string{"Edit(*.lock)"}}, Bypass, write("deps/go.lock"), Deny},
		{"Read rules apply to Grep and Glob as well",
			rules{deny: []string{"Read(./secrets/**)"}}, Default, call("grep", map[string]string{"pattern": "x", "path": "secrets"}), Deny},
		{"a path without a leading slash is relative to the current directory",
			rules{allow: []string{"Edit(src/**)"}}, Default, edit("/work/proj/src/x.go"), Allow},
		{"//path is absolute",
			rules{deny: []string{"Read(//etc/**)"}}, Bypass, read("/etc/shadow"), Deny},
		{"Read(./secrets/**) covers a secrets folder deeper down (issue 13)",
			rules{deny: []string{"Read(./secrets/**)"}}, Default, read("app/secrets/key"), Deny},
		{"writes to .claude/settings.json are protected even in bypassPermissions (troupe refuses outright)",
			rules{}, Bypass, write(".claude/settings.json"), Deny},
		{"a protected path needs a rule that names it",
			rules{allow: []string{"Edit(.claude/settings.json)"}}, Default, edit(".claude/settings.json"), Allow},
	}
	if len(tests) < 25 {
		t.Fatalf("only %d cases", len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.why, func(t *testing.T) {
			p, err := New("/work/proj", Rules(tt.rules.allow...), Rules(tt.rules.deny...), Rules(tt.rules.ask...))
			if err != nil {
				t.Fatal(err)
			}
			if v := p.Check(tt.mode, tt.call); v.Effect != tt.want {
				t.Errorf("Check(%s, %s %s) = %s (%s), want %s", tt.mode, tt.call.Name, tt.call.Input, v.Effect, v.Reason, tt.want)
			}
		})
	}
}

func TestRedirectsAndEditRules(t *testing.T) {
	p, err := New("/work/proj", Rules("Bash(npm test:*)", "Edit(logs/**)"), Rules("Edit(dist/**)"), nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		mode Mode
		cmd  string
		want Effect
	}{
		{Default, "npm test", Allow},
		{Default, "npm test > logs/out.txt", Allow},      // the target is under an Edit allow
		{Default, "npm test 2>&1 | tee logs/t.txt", Ask}, // tee is not allowed by a rule
		{Default, "npm test > out.txt", Ask},             // a write no Edit rule allows
		{AcceptEdits, "npm test > out.txt", Allow},       // acceptEdits accepts edits in the workspace
		{AcceptEdits, "npm test > /tmp/out.txt", Ask},    // but not outside it
		{Bypass, "npm test > dist/x.js", Deny},           // an Edit deny refuses the redirect
		{Bypass, "cp a dist/", Deny},                     // and cp's target
		{Bypass, "echo x > $f", Deny},                    // a target only known at run time under an Edit deny
		{Default, "npm test > /dev/null 2>&1", Allow},    // /dev/null is not a write
		{Default, "ls > listing.txt", Ask},               // read-only, but it writes a file
		{Default, "npm test >&2", Allow},                 // a copy of a stream
	}
	for _, tt := range tests {
		if v := p.Check(tt.mode, bash(tt.cmd)); v.Effect != tt.want {
			t.Errorf("%s %q = %s (%s), want %s", tt.mode, tt.cmd, v.Effect, v.Reason, tt.want)
		}
	}
}

func TestSuggestAndHeadless(t *testing.T) {
	p, err := New("/w", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		call agent.Call
		rule string
	}{
		{bash("npm test -- --watch"), "Bash(npm test:*)"},
		{bash("make"), "Bash(make:*)"},
		{bash("ls > out.txt"), "Edit(out.txt)"},
		{edit("src/a.go"), "Edit(src/a.go)"},
		{write("/tmp/x.txt"), "Edit(//tmp/x.txt)"},
	} {
		v := p.Check(Default, tc.call)
		if v.Effect != Ask || v.SuggestRule != tc.rule || !strings.Contains(v.Suggest, `add "`+tc.rule+`" to permissions.allow in .claude/settings.json`) {
			t.Errorf("%s %s: %+v, want ask suggesting %s", tc.call.Name, tc.call.Input, v, tc.rule)
		}
		// The suggestion works: with the rule added, the call runs.
		with, err := New("/w", Rules(v.SuggestRule), nil, nil)
		if err != nil {
			t.Fatalf("suggested rule %q: %v", v.SuggestRule, err)
		}
		if got := with.Check(Default, tc.call); got.Effect != Allow {
			t.Errorf("%s %s with %s added: %+v", tc.call.Name, tc.call.Input, v.SuggestRule, got)
		}
	}
	d := Gate(GateConfig{Policy: p})(context.Background(), bash("npm test"))
	want := `needs approval and no one is attached to give it; to allow it, add "Bash(npm test:*)" to permissions.allow in .claude/settings.json`
	if d.Allow || !strings.Contains(d.Reason, want) {
		t.Errorf("headless refusal = %+v, want it to say %q", d, want)
	}
	// dontAsk refuses and says so, with the same suggestion.
	v := p.Check(DontAsk, bash("npm test"))
	if v.Effect != Deny || v.Hard || !strings.Contains(v.Reason, "dontAsk") || v.SuggestRule != "Bash(npm test:*)" {
		t.Errorf("dontAsk: %+v", v)
	}
	// A hook's allow is the pre-approval dontAsk wants.
	mode := DontAsk
	g := Gate(GateConfig{Policy: p, Mode: func() Mode { return mode }})
	if d := g(WithHookDecision(context.Background(), Allow, "ok"), bash("npm test")); !d.Allow {
		t.Errorf("hook allow in dontAsk: %+v", d)
	}
}

func TestGrantable(t *testing.T) {
	p, err := New("/w", Rules("Bash(npm:*)"), Rules("Bash(rm:*)", "Read(secrets/**)"), Rules("Bash(git push:*)"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		mode Mode
		call agent.Call
		want bool
	}{
		{Default, bash("npm test"), true},               // the lead's rules allow it
		{Default, bash("make"), true},                   // the lead's mode would ask: it may grant
		{Default, bash("git push"), true},               // an ask rule: the lead may grant
		{Default, bash("rm -rf x"), false},              // a deny rule binds the lead too
		{Bypass, bash("sudo rm x"), false},              // however it is wrapped
		{Default, read("secrets/k"), false},             // a Read deny
		{Bypass, write(".claude/settings.json"), false}, // a protected path
		{Plan, edit("a.go"), false},                     // the lead's plan limit
		{Delegate, bash("make"), true},                  // delegate keeps the lead's hands off, not its authority
		{DontAsk, bash("make"), true},                   // dontAsk: what would ask may be granted
	}
	for _, tt := range tests {
		ok, why := p.Grantable(tt.mode, tt.call)
		if ok != tt.want || why == "" {
			t.Errorf("Grantable(%s, %s %s) = %v %q, want %v", tt.mode, tt.call.Name, tt.call.Input, ok, why, tt.want)
		}
	}
}
