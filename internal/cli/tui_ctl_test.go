package cli

import (
	"testing"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
)

// TestSessionCtlNoTeam: once the team is deleted, what the UI is told when
// it asks for the team says the team finished and was archived, not that
// there is no team yet; a new team ends that.
func TestSessionCtlNoTeam(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		events []string
		want   string
	}{
		{"no team yet", nil, team.ErrNoTeam.Error()},
		{"deleted", []string{"team_create", "team_delete"}, "team blog finished and was archived (troupe usage blog shows its usage); ask the lead for a new team"},
		{"a new team after", []string{"team_create", "team_delete", "team_create"}, team.ErrNoTeam.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &sessionCtl{}
			for _, typ := range tt.events {
				c.observe(store.Event{Type: typ, Team: "blog"})
			}
			if got := c.noTeam(team.ErrNoTeam).Error(); got != tt.want {
				t.Errorf("noTeam = %q, want %q", got, tt.want)
			}
		})
	}
}
