package team

import (
	"strings"

	"github.com/troupe-dev/troupe/internal/permission"
)

// Permission modes (set per agent at spawn); the rules live in package
// permission.
const (
	PermDefault     = string(permission.Default)     // writing tools and bash ask first
	PermAcceptEdits = string(permission.AcceptEdits) // file edits allowed; bash asks
	PermPlan        = string(permission.Plan)        // read-only until a plan is approved
	PermBypass      = string(permission.Bypass)      // nothing asks; deny rules still refuse
	PermDelegate    = string(permission.Delegate)    // the lead only: management tools only
)

// StatusWaiting is a member blocked on a permission answer.
const StatusWaiting = "waiting"

func validPermissionMode(m string) bool {
	_, err := permission.ParseMode(m)
	return err == nil && m != ""
}

func modeNames(ms []permission.Mode) string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m)
	}
	return strings.Join(out, ", ")
}
