package team

import (
	"testing"

	"github.com/troupe-dev/troupe/internal/subagent"
	"github.com/troupe-dev/troupe/internal/todo"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

// TestEveryToolHasAKind: every tool an agent of a team can be given (the
// lead's, a teammate's, each subagent type's) says what it does, so the
// permission engine, the guard and the subagent types never meet one of
// unknown kind among troupe's own; the team tools are management.
func TestEveryToolHasAKind(t *testing.T) {
	t.Parallel()
	b := &binding{}
	regs := map[string]*tool.Registry{
		RoleLead:     leadRegistry(b, &todo.List{}, nil, tool.TaskHandlers{}),
		RoleTeammate: teammateRegistry(b, &todo.List{}),
	}
	for _, typ := range subagent.Types() {
		ts, err := subagent.Tools(typ, &todo.List{})
		if err != nil {
			t.Fatal(err)
		}
		regs[RoleSubagent+":"+typ] = tool.NewRegistry(ts...)
	}
	team := map[string]bool{"TeamCreate": true, "TeamDelete": true, "SendMessage": true,
		"TaskCreate": true, "TaskUpdate": true, "TaskList": true, "TaskGet": true}
	for role, r := range regs {
		if len(r.Names()) == 0 {
			t.Errorf("%s has no tools", role)
		}
		for _, name := range r.Names() {
			k := r.Kind(name)
			if k == kind.Unknown {
				t.Errorf("%s's tool %s declares no kind", role, name)
			}
			if team[name] && k != kind.Manage {
				t.Errorf("team tool %s is of kind %s, want manage", name, k)
			}
		}
	}
}
