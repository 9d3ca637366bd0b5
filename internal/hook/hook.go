// Package hook runs the hooks of troupe's settings the way Claude Code
// runs them: the event goes as JSON on stdin to `bash -c COMMAND` in the
// workspace, in Claude Code's shape (its tool names, tool_input and
// tool_response objects, session_id, transcript_path, …, with troupe's
// team fields as extras); exit 0 continues (stdout may hold a JSON
// decision), exit 2 blocks with stderr as the reason given to the model
// (to the user on events that cannot be blocked), any other exit is a
// reported, non-blocking error. Every hook runs in its own process group
// and is killed with it at its timeout, so a broken or slow hook is
// reported and never hangs an agent. The hooks of one event run in
// parallel; any block wins.
//
// It knows agent calls and tool results (for the gate and post-tool
// adapters) but nothing of teams: who an agent is comes in a Who. It must
// never depend on team, store or cli.
package hook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/settings"
)

// DefaultTimeout is a hook's timeout when its settings give none (as in
// Claude Code).
const DefaultTimeout = 60 * time.Second

// Event is what a hook receives on stdin: Claude Code's hook input, field
// for field (snake_case; tool names and inputs in Claude Code's shape),
// with troupe's team fields as extras.
type Event struct {
	SessionID      string `json:"session_id"`
	TranscriptPath string `json:"transcript_path"`
	Cwd            string `json:"cwd"`
	PermissionMode string `json:"permission_mode,omitempty"`
	Name           string `json:"hook_event_name"`
	// AgentID and AgentType name a subagent or a teammate; empty for
	// the session's main agent (the lead).
	AgentID   string `json:"agent_id,omitempty"`
	AgentType string `json:"agent_type,omitempty"`

	// troupe's extras.
	AgentName string `json:"agent_name,omitempty"`
	TeamName  string `json:"team_name,omitempty"`
	AgentRole string `json:"agent_role,omitempty"`
	// TeammateName repeats AgentName for the team events (TeammateIdle,
	// TaskCreated, TaskCompleted), as Claude Code names it there.
	TeammateName string `json:"teammate_name,omitempty"`

	// Tool events. ToolName is Claude Code's name ("Write"); ToolInput
	// is in Claude Code's shape (ToolName and claudeInput make them).
	ToolName  string          `json:"tool_name,omitempty"`
	ToolInput json.RawMessage `json:"tool_input,omitempty"`
	// tool is troupe's name of the tool, which a matcher listing names
	// may also give ("read_file").
	tool string
	// ToolResponse is PostToolUse's: the tool's tool.Result.Response
	// (Claude Code's per-tool object) or, for tools without one, an
	// object with the result's text.
	ToolResponse any    `json:"tool_response,omitempty"`
	ToolUseID    string `json:"tool_use_id,omitempty"`
	// Error and IsInterrupt are PostToolUseFailure's.
	Error       string `json:"error,omitempty"`
	IsInterrupt *bool  `json:"is_interrupt,omitempty"`

	Prompt string `json:"prompt,omitempty"`

	// Stop and SubagentStop. StopHookActive is always present on them.
	StopHookActive       *bool   `json:"stop_hook_active,omitempty"`
	LastAssistantMessage *string `json:"last_assistant_message,omitempty"`
	AgentTranscriptPath  string  `json:"agent_transcript_path,omitempty"`

	// SessionStart (Source: startup|resume|clear|compact, Model),
	// SessionEnd (Reason), PreCompact (Trigger: manual|auto,
	// CustomInstructions, always present), Notification.
	Source             string  `json:"source,omitempty"`
	Model              string  `json:"model,omitempty"`
	Reason             string  `json:"reason,omitempty"`
	Trigger            string  `json:"trigger,omitempty"`
	CustomInstructions *string `json:"custom_instructions,omitempty"`
	Message            string  `json:"message,omitempty"`
	Title              string  `json:"title,omitempty"`
	NotificationType   string  `json:"notification_type,omitempty"`

	Task *Task `json:"task,omitempty"`
	// The task again, flat, as Claude Code's task events have it.
	TaskID          string `json:"task_id,omitempty"`
	TaskSubject     string `json:"task_subject,omitempty"`
	TaskDescription string `json:"task_description,omitempty"`
}

// ToolResponse is the tool_response of a tool that gives no structured
// response of its own.
type ToolResponse struct {
	Content string `json:"content"`
	IsError bool   `json:"is_error"`
}

// Task is a board task as task hooks see it.
type Task struct {
	ID          string `json:"id"`
	Subject     string `json:"subject"`
	Description string `json:"description,omitempty"`
	Owner       string `json:"owner,omitempty"`
	Status      string `json:"status,omitempty"`
}

// Outcome is what the hooks of one event decided together.
type Outcome struct {
	// Blocked: a hook exited 2, said "decision": "block" or denied the
	// permission, on an event that can be blocked. What blocking means is
	// the event's: a tool call is refused, a prompt is dropped, a task
	// stays open, an idle teammate goes back to work, a stopping agent
	// carries on. Reason is for the model (for UserPromptSubmit: for the
	// user). On events that cannot be blocked, exit 2's stderr goes to
	// Messages instead.
	Blocked bool
	Reason  string
	// Permission is a PreToolUse hook's permission decision (deny > ask >
	// allow), "" when none gave one.
	Permission       permission.Effect
	PermissionReason string
	// UpdatedInput is a PreToolUse hook's updatedInput, or the one of a
	// PermissionRequest hook's allow decision: the tool's new input, in
	// Claude Code's shape. The last hook to give one wins.
	UpdatedInput json.RawMessage
	// Behavior is a PermissionRequest hook's decision ("allow" or
	// "deny"; deny wins), Message its message for the model, Interrupt
	// that a deny also stops the agent.
	Behavior  string
	Message   string
	Interrupt bool
	// Stop: a hook said "continue": false; the agent should stop. Its
	// StopReason is for the user, not the model.
	Stop       bool
	StopReason string
	// SuppressOutput: a hook asked that its output be kept out of the
	// transcript view.
	SuppressOutput bool
	// Context is additional context for the model (additionalContext,
	// and the plain stdout of UserPromptSubmit and SessionStart hooks).
	Context []string
	// Messages are for the user: systemMessage texts, and the stderr of
	// exit 2 on events that cannot be blocked.
	Messages []string
	// Runs are the hooks that ran.
	Runs []Result
}

// Errors are the problems of the hooks that ran (timeouts, failures); none
// of them blocked.
func (o Outcome) Errors() []error {
	var out []error
	for _, r := range o.Runs {
		if r.Err != nil {
			out = append(out, r.Err)
		}
	}
	return out
}

// Config configures a Runner.
type Config struct {
	// Hooks are the configured hooks (settings.Settings.Hooks).
	Hooks []settings.Hook
	// Dir is the workspace: the hooks' working directory and cwd.
	Dir string
	// DefaultTimeout applies to hooks without their own (default
	// DefaultTimeout).
	DefaultTimeout time.Duration
	// Shell runs the commands (default "bash").
	Shell string
	// Env is added to the inherited environment. TROUPE_PROJECT_DIR and
	// CLAUDE_PROJECT_DIR (the workspace) are always set.
	Env []string
	// Report receives every hook that ran, from the goroutine that ran
	// it (journal, warnings). Nil: none.
	Report func(Event, Result)
	// Show receives what hooks say to the user (systemMessage, a
	// stopReason, a blocked prompt's reason, stderr of exit 2 where it
	// goes to the user). Nil: dropped.
	Show func(ev Event, text string)
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Ask answers prompt hooks; nil: they are reported and not run,
	// unless SetAsker gives one. Agent hooks run on what SetAgent gives.
	Ask Asker
}

// Runner runs configured hooks. A nil *Runner runs nothing. It is safe for
// concurrent use.
type Runner struct {
	cfg      Config
	hooks    []compiled
	warnings []string
	pending  pending // PreToolUse context waiting for its call's result
	asker    atomic.Pointer[Asker]
	agent    atomic.Pointer[AgentConfig] // what agent hooks run on (SetAgent)
}

type compiled struct {
	settings.Hook
	all   bool           // "", "*": everything
	exact []string       // a matcher of names: one of them exactly
	re    *regexp.Regexp // any other matcher: unanchored
}

// ErrBadMatcher is wrapped by the warnings about matchers that are not
// valid regular expressions.
var ErrBadMatcher = errors.New("bad hook matcher")

// namesOnly is Claude Code's test for a matcher that lists exact names.
var namesOnly = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_|]+$`) })

// New prepares a Runner. As in Claude Code, a matcher of letters, digits,
// "_" and "|" lists exact names, "" and "*" match everything, and anything
// else is an unanchored regular expression. A hook whose matcher is not a
// valid one is skipped with a warning (Warnings) that names it and its
// file; it never stops troupe. Hooks of a type troupe does not run (http)
// are reported by package settings when loaded. The
// error is always nil; it stays so that callers need not change.
func New(cfg Config) (*Runner, error) {
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = DefaultTimeout
	}
	if cfg.Shell == "" {
		cfg.Shell = "bash"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Dir != "" {
		cfg.Env = append([]string{"TROUPE_PROJECT_DIR=" + cfg.Dir, "CLAUDE_PROJECT_DIR=" + cfg.Dir}, cfg.Env...)
	}
	r := &Runner{cfg: cfg}
	for _, h := range cfg.Hooks {
		switch {
		case h.Type == "command":
		case (h.Type == "prompt" || h.Type == "agent") && strings.TrimSpace(h.Prompt) != "":
		default:
			continue // kept in settings, reported there; not run
		}
		c := compiled{Hook: h}
		switch m := strings.TrimSpace(h.Matcher); {
		case m == "" || m == "*":
			c.all = true
		case namesOnly().MatchString(m):
			c.exact = strings.Split(m, "|")
		default:
			re, err := regexp.Compile(m)
			if err != nil {
				r.warnings = append(r.warnings, fmt.Sprintf("%v %q for %s in %s: %v; this hook is skipped",
					ErrBadMatcher, h.Matcher, h.Event, h.Source, err))
				continue
			}
			c.re = re
		}
		r.hooks = append(r.hooks, c)
	}
	return r, nil
}

// Warnings are the problems New found with the configured hooks (each
// hook it skips, and why).
func (r *Runner) Warnings() []string {
	if r == nil {
		return nil
	}
	return append([]string(nil), r.warnings...)
}

// Has reports whether any hook is configured for the event.
func (r *Runner) Has(event string) bool {
	if r == nil {
		return false
	}
	for _, h := range r.hooks {
		if h.Event == event {
			return true
		}
	}
	return false
}

// matchTargets are what an event's matcher is compared with, as in Claude
// Code; an event with none ignores its matchers.
func matchTargets(ev Event) ([]string, bool) {
	switch ev.Name {
	case settings.PreToolUse, settings.PostToolUse, settings.PostToolUseFailure, settings.PermissionRequest:
		names := []string{ev.ToolName}
		if ev.ToolName == subagentTool {
			names = append(names, "Task")
		}
		return names, true
	case settings.SessionStart:
		return []string{ev.Source}, true
	case settings.SessionEnd:
		return []string{ev.Reason}, true
	case settings.PreCompact:
		return []string{ev.Trigger}, true
	case settings.Notification:
		return []string{ev.NotificationType}, true
	case settings.SubagentStart, settings.SubagentStop:
		return []string{ev.AgentType}, true
	}
	return nil, false
}

func (c compiled) matches(ev Event, targets []string) bool {
	if c.all {
		return true
	}
	for _, t := range targets {
		if c.re != nil && c.re.MatchString(t) || slices.Contains(c.exact, t) {
			return true
		}
	}
	// troupe's own tool names, listed exactly, still work; a regular
	// expression sees only Claude Code's, as it would there.
	return ev.tool != "" && slices.Contains(c.exact, ev.tool)
}

// matching returns the hooks to run for ev, identical commands once.
func (r *Runner) matching(ev Event) []settings.Hook {
	var out []settings.Hook
	seen := map[string]bool{}
	targets, filtered := matchTargets(ev)
	for _, h := range r.hooks {
		key := h.Type + "\x00" + h.Command + "\x00" + h.Prompt
		if h.Event != ev.Name || seen[key] {
			continue
		}
		if filtered && !h.matches(ev, targets) {
			continue
		}
		seen[key] = true
		out = append(out, h.Hook)
	}
	return out
}

// Run runs the hooks of ev.Name that match, in parallel, and returns what
// they decided. It returns when every hook has ended: on its own, at its
// timeout, or when ctx ends.
func (r *Runner) Run(ctx context.Context, ev Event) Outcome {
	if r == nil {
		return Outcome{}
	}
	hooks := r.matching(ev)
	if len(hooks) == 0 {
		return Outcome{}
	}
	if ev.Cwd == "" {
		ev.Cwd = r.cfg.Dir
	}
	switch ev.Name {
	case settings.TeammateIdle, settings.TaskCreated, settings.TaskCompleted:
		if ev.TeammateName == "" {
			ev.TeammateName = ev.AgentName
		}
	}
	if t := ev.Task; t != nil {
		ev.TaskID, ev.TaskSubject, ev.TaskDescription = t.ID, t.Subject, t.Description
	}
	stdin, err := json.Marshal(ev)
	if err != nil { // only a tool input that is not JSON gets here
		ev.ToolInput = nil
		stdin, _ = json.Marshal(ev)
	}
	results := make([]Result, len(hooks))
	var wg sync.WaitGroup
	for i, h := range hooks {
		wg.Go(func() {
			if h.Type == "command" {
				results[i] = r.exec(ctx, h, stdin)
			} else {
				results[i] = r.askHook(ctx, h, stdin)
			}
			interpret(&results[i])
			if r.cfg.Report != nil {
				r.cfg.Report(ev, results[i])
			}
		})
	}
	wg.Wait()
	out := merge(ev.Name, results)
	if r.cfg.Show != nil {
		for _, m := range out.Messages {
			r.cfg.Show(ev, m)
		}
		if out.Stop {
			r.cfg.Show(ev, nonEmpty(out.StopReason, ev.Name+" hook stopped the agent"))
		}
	}
	return out
}

// output is the JSON a hook may print on stdout.
type output struct {
	Continue           *bool  `json:"continue"`
	StopReason         string `json:"stopReason"`
	SuppressOutput     bool   `json:"suppressOutput"`
	SystemMessage      string `json:"systemMessage"`
	Decision           string `json:"decision"`
	Reason             string `json:"reason"`
	HookSpecificOutput *struct {
		PermissionDecision       string          `json:"permissionDecision"`
		PermissionDecisionReason string          `json:"permissionDecisionReason"`
		AdditionalContext        string          `json:"additionalContext"`
		UpdatedInput             json.RawMessage `json:"updatedInput"`
		// Decision is PermissionRequest's.
		Decision *struct {
			Behavior     string          `json:"behavior"`
			UpdatedInput json.RawMessage `json:"updatedInput"`
			Message      string          `json:"message"`
			Interrupt    bool            `json:"interrupt"`
		} `json:"decision"`
	} `json:"hookSpecificOutput"`
}

// blockable are the events a hook can block (exit 2 or "decision":
// "block"); on the others, exit 2 only shows stderr to the user.
var blockable = map[string]bool{
	settings.PreToolUse: true, settings.PostToolUse: true, settings.PostToolUseFailure: true,
	settings.PermissionRequest: true, settings.UserPromptSubmit: true, settings.Stop: true,
	settings.SubagentStop: true, settings.TeammateIdle: true, settings.TaskCreated: true,
	settings.TaskCompleted: true,
}

// plainContext are the events whose hooks' plain stdout (exit 0, not
// JSON) is context for the model.
var plainContext = map[string]bool{settings.UserPromptSubmit: true, settings.SessionStart: true}

// interpret reports an exit status other than 0 and 2 as a problem.
func interpret(res *Result) {
	if res.Err == nil && res.ExitCode != 0 && res.ExitCode != 2 {
		msg := fmt.Sprintf("%s failed with exit status %d", describe(res.Hook), res.ExitCode)
		if line := firstLine(res.Stderr, 200); line != "" {
			msg += ": " + line
		}
		res.Err = errors.New(msg)
	}
}

// merge combines the hooks' results: any block wins, deny beats ask beats
// allow, "continue": false wins over everything.
func merge(event string, results []Result) Outcome {
	o := Outcome{Runs: results}
	var reasons, permReasons, stopReasons []string
	rank := map[permission.Effect]int{"": 0, permission.Allow: 1, permission.Ask: 2, permission.Deny: 3}
	setPerm := func(e permission.Effect, reason string) {
		if rank[e] > rank[o.Permission] {
			o.Permission = e
			permReasons = nil
		}
		if e == o.Permission && reason != "" {
			permReasons = append(permReasons, reason)
		}
	}
	block := func(reason string) {
		if blockable[event] {
			o.Blocked = true
			reasons = append(reasons, reason)
		} else {
			o.Messages = append(o.Messages, reason)
		}
	}
	for i := range results {
		res := &results[i]
		if res.Err != nil {
			continue
		}
		if res.ExitCode == 2 {
			block(nonEmpty(strings.TrimSpace(res.Stderr), describe(res.Hook)+" exited with status 2"))
			continue
		}
		out := strings.TrimSpace(res.Stdout)
		if !strings.HasPrefix(out, "{") {
			if out != "" && plainContext[event] {
				o.Context = append(o.Context, out)
			}
			continue
		}
		var js output
		if err := json.Unmarshal([]byte(out), &js); err != nil {
			res.Err = fmt.Errorf("%s printed JSON that could not be read (%v); its output was ignored", describe(res.Hook), err)
			continue
		}
		switch js.Decision {
		case "block":
			block(nonEmpty(js.Reason, describe(res.Hook)+" blocked"))
		case "approve":
			setPerm(permission.Allow, js.Reason)
		}
		if h := js.HookSpecificOutput; h != nil {
			switch h.PermissionDecision {
			case "deny":
				block(nonEmpty(h.PermissionDecisionReason, describe(res.Hook)+" denied the call"))
				setPerm(permission.Deny, h.PermissionDecisionReason)
			case "ask":
				setPerm(permission.Ask, h.PermissionDecisionReason)
			case "allow":
				setPerm(permission.Allow, h.PermissionDecisionReason)
			}
			if len(h.UpdatedInput) > 0 && string(h.UpdatedInput) != "null" {
				o.UpdatedInput = h.UpdatedInput
			}
			if d := h.Decision; d != nil && event == settings.PermissionRequest {
				switch d.Behavior {
				case "deny":
					o.Behavior = "deny"
					o.Message = joinNonEmpty(o.Message, nonEmpty(d.Message, describe(res.Hook)+" denied the call"))
					o.Interrupt = o.Interrupt || d.Interrupt
				case "allow":
					if o.Behavior == "" {
						o.Behavior = "allow"
					}
					if len(d.UpdatedInput) > 0 && string(d.UpdatedInput) != "null" {
						o.UpdatedInput = d.UpdatedInput
					}
				}
			}
			if h.AdditionalContext != "" {
				o.Context = append(o.Context, h.AdditionalContext)
			}
		}
		if js.Continue != nil && !*js.Continue {
			o.Stop = true
			if js.StopReason != "" {
				stopReasons = append(stopReasons, js.StopReason)
			}
		}
		o.SuppressOutput = o.SuppressOutput || js.SuppressOutput
		if js.SystemMessage != "" {
			o.Messages = append(o.Messages, js.SystemMessage)
		}
	}
	o.Reason = strings.Join(reasons, "\n")
	o.PermissionReason = strings.Join(permReasons, "\n")
	o.StopReason = strings.Join(stopReasons, "\n")
	return o
}

func joinNonEmpty(a, b string) string {
	if a == "" {
		return b
	}
	return a + "\n" + b
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
