package cli

import (
	"fmt"
	"strings"
	"sync"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
)

// tally counts a team run from its journal events as they happen, so the
// counts survive TeamDelete.
type tally struct {
	mu        sync.Mutex
	teams     []string
	tasks     map[string]bool
	completed map[string]bool
	teammates map[string]bool
	messages  int
}

func newTally() *tally {
	return &tally{tasks: map[string]bool{}, completed: map[string]bool{}, teammates: map[string]bool{}}
}

func (t *tally) observe(e store.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	str := e.Field
	switch e.Type {
	case "team_create":
		t.teams = append(t.teams, e.Team)
	case "task_create":
		t.tasks[e.Team+"#"+str("task")] = true
	case "complete":
		t.completed[e.Team+"#"+str("task")] = true
	case "spawn":
		t.teammates[e.Team+"/"+str("member")] = true
	case "send":
		if typ := str("msg_type"); typ != store.TypeIdleNotification {
			t.messages++
		}
	}
}

func (t *tally) summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.teams) == 0 {
		return ""
	}
	return fmt.Sprintf("team %s: %d/%d tasks completed, %d teammates, %d messages",
		strings.Join(t.teams, ", "), len(t.completed), len(t.tasks), len(t.teammates), t.messages)
}

// observeWithTeam fills in the team of the lead's events (the lead has no
// team until TeamCreate).
func observeWithTeam(sess func() *team.Session, next func(agent.Event)) func(agent.Event) {
	return func(ev agent.Event) {
		if ev.Team == "" {
			if s := sess(); s != nil {
				ev.Team = s.TeamName()
			}
		}
		next(ev)
	}
}
