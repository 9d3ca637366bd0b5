package agent_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/agent"
)

func TestSplitSystem(t *testing.T) {
	prompt := func(name string) (string, string) {
		id := agent.Identity{Name: name, Role: "dev", Team: "t"}
		return agent.Prompt{Identity: id, Workspace: "/w", Instructions: "Work the board."}.String(), id.Line()
	}
	aSys, aID := prompt("alice")
	bSys, bID := prompt("bob")
	aShared, aTail := agent.SplitSystem(aSys, aID)
	bShared, bTail := agent.SplitSystem(bSys, bID)
	if aShared != bShared {
		t.Errorf("teammates of one role do not share the system prompt:\n%q\n%q", aShared, bShared)
	}
	if diff := cmp.Diff([]string{aID, bID}, []string{aTail, bTail}); diff != "" {
		t.Errorf("tails (-want +got):\n%s", diff)
	}
	if aShared+"" == aSys || aTail+"\n\n"+aShared != aSys {
		t.Errorf("the split is not the prompt cut in two: %q + %q", aTail, aShared)
	}

	tests := []struct{ name, system, identity, shared, tail string }{
		{"no identity", "Be terse.", "", "Be terse.", ""},
		{"replaced prompt", "Be terse.", "You are 'team-lead', the lead of team 't'.", "Be terse.", ""},
		{"identity alone", "You are 'x', a coding agent run by troupe.\n\n", "You are 'x', a coding agent run by troupe.",
			"You are 'x', a coding agent run by troupe.\n\n", ""},
	}
	for _, tt := range tests {
		shared, tail := agent.SplitSystem(tt.system, tt.identity)
		if shared != tt.shared || tail != tt.tail {
			t.Errorf("%s: got %q, %q; want %q, %q", tt.name, shared, tail, tt.shared, tt.tail)
		}
	}
}
