package store

import (
	"reflect"
	"slices"
	"time"
)

// Heartbeats are the one part of the roster that changes on a clock: every
// running member's, every HeartbeatEvery. A backend keeps them apart from
// the roster it stores (a file's mtime, a key with a TTL), so that a beat
// is not a write of the roster that wakes every reader of it: UpdateRoster
// tells a change of heartbeats alone with HeartbeatsForward and writes only
// those, and ReadRoster folds the kept heartbeats back in with
// WithHeartbeats. A heartbeat moved back (a member marked stale on
// purpose) is a change of the roster, and drops the kept one.

// WithHeartbeats sets each member's HeartbeatAt to its kept heartbeat when
// that is later than the one the roster holds (set by the member's last
// change of status).
func WithHeartbeats(r *Roster, beats map[string]time.Time) {
	if len(beats) == 0 {
		return
	}
	for i := range r.Members {
		if at, ok := beats[r.Members[i].Name]; ok && at.After(r.Members[i].HeartbeatAt) {
			r.Members[i].HeartbeatAt = at
		}
	}
}

// HeartbeatsForward reports whether next differs from cur in heartbeats
// alone, moved forward, and then which members' heartbeats moved and to
// when. A heartbeat moved back is a change of the roster: false.
func HeartbeatsForward(cur, next *Roster) (map[string]time.Time, bool) {
	if len(cur.Members) != len(next.Members) {
		return nil, false
	}
	var fwd map[string]time.Time
	for i := range next.Members {
		c, n := &cur.Members[i], &next.Members[i]
		switch {
		case n.HeartbeatAt.Equal(c.HeartbeatAt):
			if !SameMember(c, n) {
				return nil, false
			}
		case n.HeartbeatAt.After(c.HeartbeatAt):
			m := *n
			m.HeartbeatAt = c.HeartbeatAt
			if !SameMember(c, &m) {
				return nil, false
			}
			if fwd == nil {
				fwd = map[string]time.Time{}
			}
			fwd[n.Name] = n.HeartbeatAt
		default:
			return nil, false
		}
	}
	if len(fwd) == 0 {
		return nil, false
	}
	a, b := *cur, *next
	a.Members, b.Members = nil, nil
	return fwd, reflect.DeepEqual(a, b)
}

// HeartbeatsBack returns the members whose heartbeat next moves back from
// cur's: their kept heartbeats are to be dropped.
//
// It is asked on every change of the roster, so it costs one pass: a
// member is looked for at its own index first (a change keeps the order),
// and by name only when a change moved it.
func HeartbeatsBack(cur, next *Roster) []string {
	var (
		back   []string
		byName map[string]*Member
	)
	for i := range next.Members {
		n := &next.Members[i]
		var c *Member
		if i < len(cur.Members) && cur.Members[i].Name == n.Name {
			c = &cur.Members[i]
		} else {
			if byName == nil {
				byName = make(map[string]*Member, len(cur.Members))
				for j := range cur.Members {
					byName[cur.Members[j].Name] = &cur.Members[j]
				}
			}
			c = byName[n.Name]
		}
		if c != nil && n.HeartbeatAt.Before(c.HeartbeatAt) {
			back = append(back, n.Name)
		}
	}
	return back
}

// memberFields are the fields of Member that SameMember compares.
var memberFields = []string{"Name", "Role", "Model", "Provider", "BudgetTokens", "BudgetUSD", "MCPServers",
	"AgentType", "Status", "PlanModeRequired", "PermissionMode", "CWD", "Worktree", "Branch", "MergeMode",
	"Placement", "Key", "PID", "HeartbeatAt", "JoinedAt"}

// memberFieldsKnown is true while Member has exactly memberFields: a field
// added since makes SameMember fall back to reflection.
var memberFieldsKnown = func() bool {
	t := reflect.TypeFor[Member]()
	if t.NumField() != len(memberFields) {
		return false
	}
	for i, name := range memberFields {
		if t.Field(i).Name != name {
			return false
		}
	}
	return true
}()

// SameMember reports whether a and b are the same record. Backends ask it
// of every member on every change of the roster: field by field it costs a
// few comparisons, where reflect.DeepEqual made a change of a large team's
// roster cost milliseconds. Times compare with ==, as DeepEqual does: a
// record read back from disk is not the same as one with a monotonic
// reading.
func SameMember(a, b *Member) bool {
	if !memberFieldsKnown {
		return reflect.DeepEqual(*a, *b)
	}
	return a.Name == b.Name && a.Role == b.Role && a.Model == b.Model && a.Provider == b.Provider &&
		a.BudgetTokens == b.BudgetTokens && a.BudgetUSD == b.BudgetUSD &&
		slices.Equal(a.MCPServers, b.MCPServers) && (a.MCPServers == nil) == (b.MCPServers == nil) &&
		a.AgentType == b.AgentType && a.Status == b.Status && a.PlanModeRequired == b.PlanModeRequired &&
		a.PermissionMode == b.PermissionMode && a.CWD == b.CWD && a.Worktree == b.Worktree &&
		a.Branch == b.Branch && a.MergeMode == b.MergeMode && a.Placement == b.Placement && a.Key == b.Key && a.PID == b.PID &&
		a.HeartbeatAt == b.HeartbeatAt && a.JoinedAt == b.JoinedAt
}
