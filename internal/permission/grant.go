package permission

import "github.com/troupe-dev/troupe/internal/agent"

// Grantable reports whether a lead in mode may grant a teammate's call
// that asked, and why: the lead may grant what its own rules would allow
// or ask, never what a deny rule, a protected path or its own mode's limit
// refuses (seed 004: an approval must not lift the lead's own limits).
//
// Delegate mode is the exception: it keeps the lead's own hands off the
// work, not its authority over the team, and a delegate lead that could
// grant nothing would leave its teammates unable to run anything that
// asks; its calls are judged as in default mode. A dontAsk lead may grant
// what would have asked: dontAsk only says no one is asked on its own
// behalf.
func (p *Policy) Grantable(mode Mode, call agent.Call) (bool, string) {
	if mode == Delegate {
		mode = Default
	}
	v := p.Check(mode, call)
	switch {
	case v.Effect != Deny:
		return true, v.Reason
	case !v.Hard && mode == DontAsk:
		return true, v.Reason
	}
	return false, "the lead may not grant this: " + v.Reason
}
