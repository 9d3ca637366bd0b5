package permission

import (
	"context"

	"github.com/troupe-dev/troupe/internal/agent"
)

// GateConfig configures the permission gate of one agent.
type GateConfig struct {
	Policy *Policy
	// Mode returns the agent's mode now (plan until a plan is approved,
	// delegate when the lead is switched to it). Nil: Default.
	Mode func() Mode
	// Ask puts a call that needs approval to whoever can give it (the
	// human when one is attached, else the lead) and returns the answer.
	// Nil: nobody can be asked and the call is refused.
	Ask func(ctx context.Context, call agent.Call, v Verdict) agent.Decision
	// Record receives every decision (the team journal). Nil: none.
	Record func(ctx context.Context, call agent.Call, v Verdict, d agent.Decision)
}

// Gate returns an agent.Gate that checks every call against the policy and
// mode, asks when the verdict is Ask, and records the decision. A
// PreToolUse hook's permission decision, when one is in ctx (see
// WithHookDecision), is honoured: a hook's allow answers an Ask without
// asking, a hook's ask turns an Allow into a question; neither lifts a hard
// refusal.
func Gate(cfg GateConfig) agent.Gate {
	return func(ctx context.Context, call agent.Call) agent.Decision {
		mode := Default
		if cfg.Mode != nil {
			mode = cfg.Mode()
		}
		v := cfg.Policy.Check(mode, call)
		if hd, ok := ctx.Value(hookKey{}).(hookDecision); ok && !v.Hard {
			switch {
			case hd.effect == Deny:
				v = Verdict{Effect: Deny, Rule: "PreToolUse hook", Mode: mode, Reason: hd.reason}
			case hd.effect == Allow && (v.Effect == Ask || v.Effect == Deny && mode == DontAsk):
				// A hook's allow is an approval given beforehand, which is
				// what dontAsk wants instead of a question.
				v = Verdict{Effect: Allow, Rule: "PreToolUse hook", Mode: mode, Reason: nonEmpty(hd.reason, "allowed by a PreToolUse hook")}
			case hd.effect == Ask && v.Effect == Allow && mode != Bypass:
				v = Verdict{Effect: Ask, Rule: "PreToolUse hook", Mode: mode, Reason: nonEmpty(hd.reason, "a PreToolUse hook asks for approval")}
			}
		}
		var d agent.Decision
		switch v.Effect {
		case Allow:
			d = agent.Decision{Allow: true}
		case Deny:
			d = agent.Decision{Reason: v.Reason}
		case Ask:
			if cfg.Ask == nil {
				d = agent.Decision{Reason: Unattended(v)}
			} else {
				d = cfg.Ask(ctx, call, v)
			}
		}
		if cfg.Record != nil {
			cfg.Record(ctx, call, v, d)
		}
		return d
	}
}

// Unattended is the refusal of a call that asks when no one can answer
// (headless): why it asks, and the rule that would allow it.
func Unattended(v Verdict) string {
	msg := v.Reason + "; it needs approval and no one is attached to give it"
	if v.Suggest != "" {
		msg += "; to allow it, " + v.Suggest
	}
	return msg
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

type hookKey struct{}

type hookDecision struct {
	effect Effect
	reason string
}

// WithHookDecision returns ctx carrying a PreToolUse hook's permission
// decision for the permission gate that runs next.
func WithHookDecision(ctx context.Context, e Effect, reason string) context.Context {
	return context.WithValue(ctx, hookKey{}, hookDecision{effect: e, reason: reason})
}

// Chain runs gates in order; the first refusal wins. Nil gates are skipped.
func Chain(gates ...agent.Gate) agent.Gate {
	return func(ctx context.Context, call agent.Call) agent.Decision {
		for _, g := range gates {
			if g == nil {
				continue
			}
			if d := g(ctx, call); !d.Allow {
				return d
			}
		}
		return agent.Decision{Allow: true}
	}
}
