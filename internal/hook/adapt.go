package hook

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

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
	// AgentID and AgentType name a teammate (empty for the lead).
	AgentID   string
	AgentType string
	// Fill, if set, completes every event at the time it fires with what
	// may change during a session (the lead's team, once it has one).
	Fill func(*Event)
}

// Event returns an event of the given name filled with who.
func (w Who) Event(name string) Event {
	ev := Event{Name: name, AgentName: w.Agent, TeamName: w.Team, AgentRole: w.Role,
		SessionID: w.SessionID, TranscriptPath: w.TranscriptPath, AgentID: w.AgentID, AgentType: w.AgentType}
	if w.Mode != nil {
		ev.PermissionMode = w.Mode()
	}
	if w.Fill != nil {
		w.Fill(&ev)
	}
	return ev
}

// Subagent is a subagent run, as its hooks' events name it.
type Subagent struct {
	ID             string // unique per run
	Type           string // "general-purpose", "Explore", …
	TranscriptPath string // "" when it has none
}

type subagentKey struct{}

// WithSubagent returns ctx marked as the context of subagent s's run: the
// events of the calls made with it carry s's agent_id and agent_type.
func WithSubagent(ctx context.Context, s Subagent) context.Context {
	return context.WithValue(ctx, subagentKey{}, s)
}

// event is w.Event, with the subagent ctx belongs to, if any.
func (w Who) event(ctx context.Context, name string) Event {
	ev := w.Event(name)
	if s, ok := ctx.Value(subagentKey{}).(Subagent); ok {
		ev.AgentID, ev.AgentType = s.ID, s.Type
	}
	return ev
}

// toolEvent fills ev with call in Claude Code's terms.
func (r *Runner) toolEvent(ev *Event, call agent.Call) {
	ev.ToolName, ev.ToolInput, ev.ToolUseID = ToolName(call.Name), claudeInput(call.Name, call.Input, r.cfg.Dir), call.ID
	ev.tool = call.Name
}

// pending holds PreToolUse additional context until the call's result is
// there to carry it.
type pending struct {
	mu sync.Mutex
	m  map[string][]string
}

func (p *pending) put(id string, ctx []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string][]string{}
	}
	p.m[id] = append(p.m[id], ctx...)
}

func (p *pending) take(id string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.m[id]
	delete(p.m, id)
	return out
}

// Gate returns an agent.Gate that runs the PreToolUse hooks before next. A
// block (exit 2, "decision": "block", "permissionDecision": "deny")
// refuses the call with the hook's reason, which the model sees. An
// updatedInput replaces the call's input, mapped back to troupe's shape,
// before next sees it: the permission check judges the call that will run,
// and the tool runs with it. A hook's "allow" or "ask" is passed to next
// through ctx (permission.WithHookDecision), so a permission.Gate can
// honour it without letting it lift a deny rule or a mode's limit.
// "continue": false refuses the call and halts the agent (agent.Halt).
// next may be nil (allow).
func (r *Runner) Gate(who Who, next agent.Gate) agent.Gate {
	return func(ctx context.Context, call agent.Call) agent.Decision {
		var updated json.RawMessage
		if r.Has(settings.PreToolUse) {
			ev := who.event(ctx, settings.PreToolUse)
			r.toolEvent(&ev, call)
			out := r.Run(ctx, ev)
			if out.Stop {
				agent.Halt(ctx, out.StopReason)
				return agent.Decision{Reason: "a PreToolUse hook stopped the agent"}
			}
			if out.Blocked {
				return agent.Decision{Reason: "blocked by a PreToolUse hook: " + out.Reason}
			}
			if len(out.UpdatedInput) > 0 {
				in, err := troupeInput(call.Name, out.UpdatedInput)
				if err != nil {
					return agent.Decision{Reason: "a PreToolUse hook's " + err.Error()}
				}
				call.Input, updated = in, in
			}
			if len(out.Context) > 0 {
				r.pending.put(call.ID, out.Context)
			}
			if out.Permission != "" {
				ctx = permission.WithHookDecision(ctx, out.Permission, out.PermissionReason)
			}
		}
		d := agent.Decision{Allow: true}
		if next != nil {
			d = next(ctx, call)
		}
		if d.Allow && d.Input == nil {
			d.Input = updated
		}
		if !d.Allow && r != nil {
			r.pending.take(call.ID)
		}
		return d
	}
}

// Ask wraps the function that puts a call needing approval to someone
// (permission.GateConfig.Ask). PermissionRequest hooks answer first: a
// hook's allow (with its updatedInput, if any) or deny settles the call,
// and a deny with interrupt also halts the agent. When none decides, the
// Notification hooks (notification_type permission_prompt) fire and ask is
// asked; a nil ask refuses, as permission.Gate does without one.
func (r *Runner) Ask(who Who, ask func(context.Context, agent.Call, permission.Verdict) agent.Decision) func(context.Context, agent.Call, permission.Verdict) agent.Decision {
	if !r.Has(settings.PermissionRequest) && !r.Has(settings.Notification) {
		return ask
	}
	return func(ctx context.Context, call agent.Call, v permission.Verdict) agent.Decision {
		out := r.PermissionRequest(ctx, who, call)
		switch {
		case out.Stop:
			agent.Halt(ctx, out.StopReason)
			return agent.Decision{Reason: "a PermissionRequest hook stopped the agent"}
		case out.Blocked:
			return agent.Decision{Reason: "denied by a PermissionRequest hook: " + out.Reason}
		case out.Behavior == "deny":
			if out.Interrupt {
				agent.Halt(ctx, out.Message)
			}
			return agent.Decision{Reason: "denied by a PermissionRequest hook: " + out.Message}
		case out.Behavior == "allow":
			d := agent.Decision{Allow: true}
			if len(out.UpdatedInput) > 0 {
				in, err := troupeInput(call.Name, out.UpdatedInput)
				if err != nil {
					return agent.Decision{Reason: "a PermissionRequest hook's " + err.Error()}
				}
				d.Input = in
			}
			return d
		}
		if ask == nil {
			return agent.Decision{Reason: v.Reason + ", and no one is attached to give it"}
		}
		r.Notification(ctx, who, "permission_prompt", "Claude needs your permission to use "+ToolName(call.Name), "Permission needed")
		return ask(ctx, call, v)
	}
}

// PermissionRequest runs the hooks of a call about to be put to someone
// for approval.
func (r *Runner) PermissionRequest(ctx context.Context, who Who, call agent.Call) Outcome {
	if !r.Has(settings.PermissionRequest) {
		return Outcome{}
	}
	ev := who.event(ctx, settings.PermissionRequest)
	r.toolEvent(&ev, call)
	return r.Run(ctx, ev)
}

// Notification runs the Notification hooks: typ is Claude Code's
// notification_type (permission_prompt, idle_prompt, …).
func (r *Runner) Notification(ctx context.Context, who Who, typ, message, title string) Outcome {
	if !r.Has(settings.Notification) {
		return Outcome{}
	}
	ev := who.event(ctx, settings.Notification)
	ev.NotificationType, ev.Message, ev.Title = typ, message, title
	return r.Run(ctx, ev)
}

// response is what PostToolUse hooks get as tool_response.
func response(res *tool.Result) any {
	if res.Response != nil {
		return res.Response
	}
	return ToolResponse{Content: res.Content, IsError: res.IsError}
}

// AfterTool returns an agent.Config.AfterTool that runs the PostToolUse
// hooks with the call's result, or the PostToolUseFailure hooks when the
// result is an error. The tool has already run, so nothing is undone: a
// hook's block reason (exit 2's stderr, "decision": "block"'s reason) and
// additional context, and a PreToolUse hook's additional context, are
// added to the result for the model to read. "continue": false halts the
// agent once the round's results are in.
func (r *Runner) AfterTool(who Who) func(ctx context.Context, call agent.Call, res *tool.Result) {
	if r == nil {
		return nil
	}
	return func(ctx context.Context, call agent.Call, res *tool.Result) {
		add := r.pending.take(call.ID)
		name := settings.PostToolUse
		if res.IsError {
			name = settings.PostToolUseFailure
		}
		if r.Has(name) {
			ev := who.event(ctx, name)
			r.toolEvent(&ev, call)
			if res.IsError {
				interrupted := ctx.Err() != nil
				ev.Error, ev.IsInterrupt = res.Content, &interrupted
			} else {
				ev.ToolResponse = response(res)
			}
			out := r.Run(ctx, ev)
			if out.Blocked {
				add = append(add, name+" hook: "+out.Reason)
			}
			add = append(add, out.Context...)
			if out.Stop {
				agent.Halt(ctx, out.StopReason)
			}
		}
		if len(add) > 0 {
			res.Content = strings.TrimRight(res.Content, "\n") + "\n\n" + strings.Join(add, "\n")
		}
	}
}

// UserPromptSubmit runs the hooks of a prompt about to reach the model. A
// block means the prompt is dropped: it is not sent, and Reason is for the
// user (Claude Code erases the prompt; the run itself succeeds). Context
// is to be added to it. Stop means: do not run at all.
func (r *Runner) UserPromptSubmit(ctx context.Context, who Who, prompt string) Outcome {
	ev := who.Event(settings.UserPromptSubmit)
	ev.Prompt = prompt
	out := r.Run(ctx, ev)
	if out.Blocked && r != nil && r.cfg.Show != nil {
		r.cfg.Show(ev, "prompt blocked: "+out.Reason)
	}
	return out
}

// Stopping is an agent whose model ended its turn, for Stop and
// SubagentStop hooks.
type Stopping struct {
	// Subagent: a subagent stops (SubagentStop), named by Agent.
	Subagent bool
	Agent    Subagent
	// Active: the agent already runs on because of a Stop hook, so that
	// a hook can avoid looping (stop_hook_active).
	Active bool
	// LastMessage is the text of the agent's last reply.
	LastMessage string
}

// StopHooks runs the Stop hooks, or the SubagentStop hooks of a subagent.
// A block means: do not stop, give Reason to the model and run on.
func (r *Runner) StopHooks(ctx context.Context, who Who, s Stopping) Outcome {
	name := settings.Stop
	if s.Subagent {
		name = settings.SubagentStop
	}
	ev := who.event(ctx, name)
	active, last := s.Active, s.LastMessage
	ev.StopHookActive, ev.LastAssistantMessage = &active, &last
	if s.Subagent {
		ev.AgentID, ev.AgentType, ev.AgentTranscriptPath = s.Agent.ID, s.Agent.Type, s.Agent.TranscriptPath
	}
	return r.Run(ctx, ev)
}

// Stop runs the Stop hooks (SubagentStop when subagent) of an agent whose
// model ended its turn; see StopHooks.
func (r *Runner) Stop(ctx context.Context, who Who, subagent, active bool) Outcome {
	return r.StopHooks(ctx, who, Stopping{Subagent: subagent, Active: active})
}

// SubagentStart runs the hooks of a subagent about to start. Context is
// for the subagent's model.
func (r *Runner) SubagentStart(ctx context.Context, who Who, s Subagent) Outcome {
	if !r.Has(settings.SubagentStart) {
		return Outcome{}
	}
	ev := who.Event(settings.SubagentStart)
	ev.AgentID, ev.AgentType = s.ID, s.Type
	return r.Run(ctx, ev)
}

// SessionStart runs the hooks of a session starting: source is startup,
// resume, clear or compact. Context is for the model (plain stdout too).
// It cannot block.
func (r *Runner) SessionStart(ctx context.Context, who Who, source, model string) Outcome {
	if !r.Has(settings.SessionStart) {
		return Outcome{}
	}
	ev := who.Event(settings.SessionStart)
	ev.Source, ev.Model = source, model
	return r.Run(ctx, ev)
}

// SessionEnd runs the hooks of a session ending; reason is Claude Code's
// (clear, logout, prompt_input_exit, other, …). It cannot block.
func (r *Runner) SessionEnd(ctx context.Context, who Who, reason string) Outcome {
	if !r.Has(settings.SessionEnd) {
		return Outcome{}
	}
	ev := who.Event(settings.SessionEnd)
	ev.Reason = reason
	return r.Run(ctx, ev)
}

// PreCompact runs the hooks of a compaction about to start: trigger is
// manual or auto, instructions what the user asked the summary to dwell
// on ("" for auto).
func (r *Runner) PreCompact(ctx context.Context, who Who, trigger, instructions string) Outcome {
	if !r.Has(settings.PreCompact) {
		return Outcome{}
	}
	ev := who.event(ctx, settings.PreCompact)
	ev.Trigger, ev.CustomInstructions = trigger, &instructions
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

// SubagentOf returns the subagent ctx was marked with by WithSubagent.
func SubagentOf(ctx context.Context) (Subagent, bool) {
	s, ok := ctx.Value(subagentKey{}).(Subagent)
	return s, ok
}
