package hook

import (
	"context"
	"strings"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/settings"
	"github.com/troupe-dev/troupe/internal/tool"
)

// Who is the agent hooks are run for.
type Who struct {
	Agent string // "team-lead", "alice"
	Team  string
	Role  string
	// Mode returns the agent's permission mode now (nil: none given).
	Mode           func() string
	SessionID      string
	TranscriptPath string
}

// Event returns an event of the given name filled with who.
func (w Who) Event(name string) Event {
	ev := Event{Name: name, AgentName: w.Agent, TeamName: w.Team, AgentRole: w.Role,
		SessionID: w.SessionID, TranscriptPath: w.TranscriptPath}
	if w.Mode != nil {
		ev.PermissionMode = w.Mode()
	}
	return ev
}

// Gate returns an agent.Gate that runs the PreToolUse hooks before next. A
// block (exit 2, "decision": "block", "permissionDecision": "deny")
// refuses the call with the hook's reason, which the model sees. A hook's
// "allow" or "ask" is passed to next through ctx
// (permission.WithHookDecision), so a permission.Gate can honour it
// without letting it lift a deny rule or a mode's limit. next may be nil
// (allow).
func (r *Runner) Gate(who Who, next agent.Gate) agent.Gate {
	return func(ctx context.Context, call agent.Call) agent.Decision {
		if r.Has(settings.PreToolUse) {
			ev := who.Event(settings.PreToolUse)
			ev.ToolName, ev.ToolInput, ev.ToolUseID = call.Name, call.Input, call.ID
			out := r.Run(ctx, ev)
			if out.Blocked {
				return agent.Decision{Reason: "blocked by a PreToolUse hook: " + out.Reason}
			}
			if out.Permission != "" {
				ctx = permission.WithHookDecision(ctx, out.Permission, out.PermissionReason)
			}
		}
		if next == nil {
			return agent.Decision{Allow: true}
		}
		return next(ctx, call)
	}
}

// AfterTool returns an agent.Config.AfterTool that runs the PostToolUse
// hooks with the call's result. The tool has already run, so nothing is
// undone: a hook's block reason and additional context are added to the
// result for the model to read.
func (r *Runner) AfterTool(who Who) func(ctx context.Context, call agent.Call, res *tool.Result) {
	if r == nil {
		return nil
	}
	return func(ctx context.Context, call agent.Call, res *tool.Result) {
		if !r.Has(settings.PostToolUse) {
			return
		}
		ev := who.Event(settings.PostToolUse)
		ev.ToolName, ev.ToolInput, ev.ToolUseID = call.Name, call.Input, call.ID
		ev.ToolResponse = &ToolResponse{Content: res.Content, IsError: res.IsError}
		out := r.Run(ctx, ev)
		var add []string
		if out.Blocked {
			add = append(add, "PostToolUse hook: "+out.Reason)
		}
		add = append(add, out.Context...)
		if len(add) > 0 {
			res.Content = strings.TrimRight(res.Content, "\n") + "\n\n" + strings.Join(add, "\n")
		}
	}
}

// UserPromptSubmit runs the hooks of a prompt about to reach the model. A
// block means the prompt is not sent (tell the user Reason); Context is
// to be added to it.
func (r *Runner) UserPromptSubmit(ctx context.Context, who Who, prompt string) Outcome {
	ev := who.Event(settings.UserPromptSubmit)
	ev.Prompt = prompt
	return r.Run(ctx, ev)
}

// Stop runs the Stop hooks (SubagentStop when subagent) of an agent whose
// model ended its turn. A block means: do not stop, give Reason to the
// model and run on. active says the agent is already running on because
// of a Stop hook, so that a hook can avoid looping.
func (r *Runner) Stop(ctx context.Context, who Who, subagent, active bool) Outcome {
	name := settings.Stop
	if subagent {
		name = settings.SubagentStop
	}
	ev := who.Event(name)
	ev.StopHookActive = active
	return r.Run(ctx, ev)
}

// TeammateIdle runs the hooks of a teammate about to go idle. A block
// means: do not go idle, give Reason to the teammate and run on.
func (r *Runner) TeammateIdle(ctx context.Context, who Who) Outcome {
	return r.Run(ctx, who.Event(settings.TeammateIdle))
}

// TaskCreated runs the hooks of a task just created. A block means the
// creation is refused with Reason (the caller deletes the task).
func (r *Runner) TaskCreated(ctx context.Context, who Who, t Task) Outcome {
	ev := who.Event(settings.TaskCreated)
	ev.Task = &t
	return r.Run(ctx, ev)
}

// TaskCompleted runs the hooks of a task about to be completed. A block
// means: the task stays open, and Reason goes to the model.
func (r *Runner) TaskCompleted(ctx context.Context, who Who, t Task) Outcome {
	ev := who.Event(settings.TaskCompleted)
	ev.Task = &t
	return r.Run(ctx, ev)
}
