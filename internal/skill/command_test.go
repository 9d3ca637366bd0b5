package skill

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDiscoverClaudeUserSkillsAndCommands(t *testing.T) {
	ws := tempDir(t)
	claude := tempDir(t)
	writeFile(t, filepath.Join(claude, "skills", "tidy", "SKILL.md"), "Tidy the imports.\n")
	writeFile(t, filepath.Join(ws, ".claude", "commands", "fix-issue.md"), "---\nargument-hint: [issue] [priority]\ndescription: Fix an issue\n---\nFix issue #$1 with priority $2. All: $ARGUMENTS\n")
	writeFile(t, filepath.Join(ws, ".claude", "commands", "frontend", "component.md"), "Make a component.\n")
	writeFile(t, filepath.Join(ws, ".claude", "commands", "secret.md"), "---\ndisable-model-invocation: true\n---\nOnly for people.\n")
	writeFile(t, filepath.Join(claude, "commands", "tidy.md"), "A command shadowed by the skill.\n")
	writeFile(t, filepath.Join(claude, "commands", "mine.md"), "Personal command.\n")
	writeFile(t, filepath.Join(ws, ".claude", "commands", "Bad Name.md"), "x\n")

	set, warns := Discover(ws, Options{NoUser: false, UserDir: tempDir(t), ClaudeDir: claude})
	got := warningStrings(warns)
	if len(got) != 2 || !strings.Contains(got[0], "Bad Name.md: invalid skill name") || !strings.Contains(got[1], `duplicate skill "tidy"`) {
		t.Errorf("warnings = %q", got)
	}
	if diff := cmp.Diff([]string{"component", "fix-issue", "mine", "secret", "tidy"}, set.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	if sk, _ := set.Get("tidy"); sk.Command || sk.Description != "Tidy the imports." || sk.Dir != filepath.Join(claude, "skills", "tidy") {
		t.Errorf("tidy = %+v, want the ~/.claude skill named after its folder", sk)
	}
	if sk, _ := set.Get("fix-issue"); !sk.Command || sk.ArgumentHint != "[issue] [priority]" || sk.Dir != ".claude/commands" {
		t.Errorf("fix-issue = %+v", sk)
	}
	if p := set.Prompt(); strings.Contains(p, "secret") || !strings.Contains(p, "- component: Make a component.") {
		t.Errorf("prompt:\n%s", p)
	}
	want := []Command{
		{Name: "component", Description: "Make a component."},
		{Name: "fix-issue", Description: "Fix an issue", ArgumentHint: "[issue] [priority]"},
		{Name: "mine", Description: "Personal command."},
		{Name: "secret", Description: "Only for people."},
		{Name: "tidy", Description: "Tidy the imports."},
	}
	if diff := cmp.Diff(want, set.Commands()); diff != "" {
		t.Errorf("Commands (-want +got):\n%s", diff)
	}
}

func TestExpand(t *testing.T) {
	ws := tempDir(t)
	cmds := filepath.Join(ws, ".claude", "commands")
	writeFile(t, filepath.Join(cmds, "fix.md"), "Fix issue #$1 (priority $2) of $ARGUMENTS. First: $ARGUMENTS[0]; $5 is missing; $ stays; $HOME stays.")
	writeFile(t, filepath.Join(cmds, "plain.md"), "Review the diff.")
	writeFile(t, filepath.Join(cmds, "named.md"), "---\narguments: name type\n---\nMake $name of type $type in ${CLAUDE_SKILL_DIR}; $name-x and $typeface stay.")
	set, _ := Discover(ws, Options{NoUser: true})
	tests := []struct {
		name, cmd, args, want string
		ok                    bool
	}{
		{"placeholders", "fix", `42 "very high"`, `Fix issue #very high (priority $2) of 42 "very high". First: 42; $5 is missing; $ stays; $HOME stays.`, true},
		{"no args", "fix", "", "Fix issue #$1 (priority $2) of . First: $ARGUMENTS[0]; $5 is missing; $ stays; $HOME stays.", true},
		{"named", "named", "Button 'a form'", "Make Button of type a form in " + cmds + "; $name-x and $typeface stay.", true},
		{"appended", "plain", "focus on tests", "Review the diff.\n\nARGUMENTS: focus on tests", true},
		{"plain without args", "plain", "  ", "Review the diff.", true},
		{"unknown", "nope", "x", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := set.Expand(tt.cmd, tt.args)
			if ok != tt.ok {
				t.Fatalf("ok = %v", ok)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Expand (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseNamed(f *testing.F) {
	f.Add([]byte("---\nname: x\ndescription: d\nargument-hint: [a]\n---\nbody $1 $ARGUMENTS[2]"), "x y")
	f.Add([]byte("no front matter\n\nbody"), "")
	f.Fuzz(func(t *testing.T, data []byte, args string) {
		sk, err := ParseNamed(data, "fallback")
		if err != nil {
			return
		}
		if !nameRE().MatchString(sk.Name) || sk.Description == "" {
			t.Fatalf("accepted a skill without a valid name and description: %+v", sk)
		}
		body, _ := substitute(sk.Body, args, splitArgs(args), sk.Arguments)
		_ = body
	})
}
