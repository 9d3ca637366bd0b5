package team

import (
	"context"
	"fmt"

	"github.com/troupe-dev/troupe/internal/agent"
)

// Permission modes (set per agent at spawn).
const (
	PermDefault     = "default"           // writing tools and bash ask first
	PermAcceptEdits = "acceptEdits"       // file edits allowed; bash asks
	PermPlan        = "plan"              // read-only until a plan is approved
	PermBypass      = "bypassPermissions" // everything allowed
	PermDelegate    = "delegate"          // the lead only: management tools only
)

// StatusWaiting is a member blocked on a permission answer.
const StatusWaiting = "waiting"

var (
	permissionModes = []string{PermDefault, PermAcceptEdits, PermPlan, PermBypass, PermDelegate}
	teammateModes   = []string{PermDefault, PermAcceptEdits, PermPlan, PermBypass}
)

func validPermissionMode(m string) bool {
	for _, x := range permissionModes {
		if x == m {
			return true
		}
	}
	return false
}

// writingTools change the workspace or run commands.
var writingTools = map[string]bool{"bash": true, "write_file": true, "edit_file": true}

func writes(tool string) bool { return writingTools[tool] }

// needsPermission reports whether a call of tool must be approved first in
// mode.
func needsPermission(mode, tool string) bool {
	switch mode {
	case PermBypass:
		return false
	case PermAcceptEdits:
		return tool == "bash"
	default: // default, plan (after approval)
		return writes(tool)
	}
}

// managementTools are the lead's tools in delegate mode.
var managementTools = map[string]bool{
	"TeamCreate": true, "TeamDelete": true, "Task": true, "SendMessage": true,
	"TaskCreate": true, "TaskUpdate": true, "TaskList": true, "TaskGet": true,
	"TaskOutput": true, "TaskStop": true, "TodoWrite": true,
}

// leadGate enforces the lead's own mode. Delegate mode allows management
// tools only; the limit is the lead's and never reaches teammates. A headless
// lead has no one to ask, so a call its mode would ask about is refused.
func leadGate(delegate bool, mode string) agent.Gate {
	if delegate || mode == PermDelegate {
		return func(_ context.Context, c agent.Call) agent.Decision {
			if managementTools[c.Name] {
				return agent.Decision{Allow: true}
			}
			return agent.Decision{Reason: "delegate mode: the lead only manages the team; ask a teammate to do this"}
		}
	}
	if mode == PermBypass {
		return nil
	}
	return func(_ context.Context, c agent.Call) agent.Decision {
		if !needsPermission(mode, c.Name) {
			return agent.Decision{Allow: true}
		}
		return agent.Decision{Reason: fmt.Sprintf("permission mode %s: %s needs approval and no one is attached to give it", mode, c.Name)}
	}
}
