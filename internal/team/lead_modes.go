package team

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

// approveDissolve puts TeamDelete to the human when one is attached (the
// terminal UI): seed 004 dissolves a team only on the user's explicit
// instruction. asked is false when nobody is there to ask (a headless run
// dissolves its team at the end, as it always has).
func (s *Session) approveDissolve(ctx context.Context, input json.RawMessage) (d agent.Decision, asked bool) {
	if s.cfg.AskHuman == nil || s.TeamName() == "" {
		return agent.Decision{Allow: true}, false
	}
	d = s.cfg.AskHuman(ctx, agent.Call{Name: "TeamDelete", Input: input, Kind: kind.Manage},
		fmt.Sprintf("dissolving team %s shuts every teammate down; it needs your explicit approval", s.TeamName()))
	return d, true
}

// switchDelegate puts the lead in delegate mode (Shift+Tab once its team
// exists): from its next call on it has management tools only, the gate
// deciding at each call. The mode it leaves is kept to go back to.
func (s *Session) switchDelegate() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur.team == nil {
		return fmt.Errorf("team: delegate mode limits a team's lead to managing it; there is no team yet (create one first)")
	}
	if s.cfg.PermissionMode != PermDelegate {
		s.cur.beforeDelegate = s.cfg.PermissionMode
	}
	s.cfg.PermissionMode = PermDelegate
	return nil
}

// inheritedMode is the mode a teammate spawned without one gets from the
// lead: the lead's, or the one it had before delegate mode, which is the
// lead's alone.
func (s *Session) inheritedMode() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.PermissionMode == PermDelegate {
		if s.cur.beforeDelegate != "" {
			return s.cur.beforeDelegate
		}
		return PermDefault
	}
	return s.cfg.PermissionMode
}

// leaveTeamModes undoes, once the team is deleted, what only a team's lead
// has: delegate mode goes back to the mode before it, and the team's
// persona words leave the artifact guard. The pattern's guard went with
// the team (setTeam).
func (s *Session) leaveTeamModes() {
	s.mu.Lock()
	if s.cfg.PermissionMode == PermDelegate && !s.cfg.Delegate {
		s.cfg.PermissionMode = s.cur.beforeDelegate
		if s.cfg.PermissionMode == "" {
			s.cfg.PermissionMode = PermDefault
		}
	}
	s.cur.beforeDelegate = ""
	s.mu.Unlock()
	s.cfg.Rules.playTheme("", nil)
}
