package team_test

import (
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/usage"
)

// chattyLeadScript: the lead spawns bob, who has nothing to do, and then
// keeps checking the board, call after call. Told to batch, it stops.
const chattyLeadScript = `
rules:
  - agent: team-lead
    contains: "coordination-notice"
    times: 0
    reply: [{text: "Batching from now on."}]
  - agent: team-lead
    contains: "Check on bob"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: chat}}
      - tool_use: {name: Task, input: {team_name: chat, name: bob, description: helper, prompt: "Say you are ready."}}
  - agent: team-lead
    times: 30
    reply:
      - tool_use: {name: TaskList, input: {}}
  - agent: team-lead
    times: 0
    reply: [{text: "Done checking."}]
  - agent: bob
    times: 0
    reply: [{text: "Ready."}]
`

// TestCoordinationGovernor: a lead whose own calls are most of the team's
// tokens over the last 20 calls is told once, with the figures, at its
// next boundary; the notice is journaled and troupe usage lists it. With
// the share set to 1 it is never told.
func TestCoordinationGovernor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		maxShare float64
		wantText string
		want     int // notices journaled
	}{
		{name: "default share", maxShare: 0, wantText: "Batching from now on.", want: 1},
		{name: "share 1 never warns", maxShare: 1, wantText: "Done checking.", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := start(t, chattyLeadScript, func(c *team.Config) {
				c.Rules = &team.Rules{TeamRules: team.TeamRules{MaxCoordinationShare: tt.maxShare}}
			})
			res := f.run("Check on bob.")
			if res.Text != tt.wantText {
				t.Errorf("lead's last text = %q, want %q", res.Text, tt.wantText)
			}
			evs := f.journal()
			var got []teamevent.Coordination
			for _, e := range evs {
				env, err := teamevent.Decode(e)
				if err != nil {
					t.Fatal(err)
				}
				if c, ok := env.Event.(teamevent.Coordination); ok {
					got = append(got, c)
				}
			}
			if len(got) != tt.want {
				t.Fatalf("%d coordination notices journaled, want %d: %+v", len(got), tt.want, got)
			}
			if rt := usage.Runtime(evs); len(rt.Governor) != tt.want {
				t.Errorf("troupe usage lists %d coordination warnings, want %d", len(rt.Governor), tt.want)
			}
			if tt.want == 0 {
				return
			}
			c := got[0]
			if c.Window != team.GovernorWindow || c.MaxShare != team.DefaultMaxCoordinationShare || c.Share <= c.MaxShare ||
				c.CoordinationTokens > c.TeamTokens {
				t.Errorf("notice figures = %+v", c)
			}
			// The lead's model saw the figures.
			found := false
			for _, body := range f.requests("team-lead") {
				if strings.Contains(lastUserTurn(t, body), "coordination-notice") && strings.Contains(body, "over its last 20 model calls") {
					found = true
				}
			}
			if !found {
				t.Error("no lead request carried the coordination notice with its figures")
			}
		})
	}
}
