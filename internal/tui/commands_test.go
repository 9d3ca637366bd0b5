package tui

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestUserCommands: "/name args" of a user's command sends its expansion to
// the lead and shows what was typed; built-in commands keep their meaning.
func TestUserCommands(t *testing.T) {
	expand := func(name, args string) (string, bool) {
		switch name {
		case "fix-issue":
			return "Fix issue " + args, true
		case "tasks":
			return "never: a built-in wins", true
		}
		return "", false
	}
	m, _, ctl := newTest(t, Options{
		Commands: []Command{{Name: "fix-issue", ArgumentHint: "[issue]", Description: "Fix an issue"}},
		Expand:   expand,
	})
	typeLine(m, "/fix-issue 42")
	if last := lastEntry(m); last.kind != entryUser || last.text != "/fix-issue 42" {
		t.Errorf("chat shows %+v, want the typed command", last)
	}
	typeLine(m, "/tasks")
	typeLine(m, "/unknown x")
	if last := lastEntry(m); last.kind != entryError {
		t.Errorf("unknown command gave %+v", last)
	}
	if diff := cmp.Diff([]string{"submit Fix issue 42", "snapshot"}, ctl.calls); diff != "" {
		t.Errorf("controller calls (-want +got):\n%s", diff)
	}
	if help := strings.Join(m.helpLines(), "\n"); !strings.Contains(help, "/fix-issue") || !strings.Contains(help, "Fix an issue") {
		t.Errorf("help does not list the command:\n%s", help)
	}
}
