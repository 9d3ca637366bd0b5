// Package hook runs the hook commands of troupe's settings (Claude Code's
// hook protocol): the event goes as JSON on stdin to `bash -c COMMAND` in
// the workspace; exit 0 continues (stdout may hold a JSON decision), exit 2
// blocks with stderr as the reason given to the model, any other exit is a
// reported, non-blocking error. Every hook runs in its own process group
// and is killed with it at its timeout, so a broken or slow hook is
// reported and never hangs an agent. The hooks of one event run in
// parallel; any block wins.
//
// It knows agent calls and tool results (for the gate and post-tool
// adapters) but nothing of teams: who an agent is comes in a Who.
package hook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/settings"
)

// DefaultTimeout is a hook's timeout when its settings give none (as in
// Claude Code).
const DefaultTimeout = 60 * time.Second

// Event is what a hook receives on stdin, in Claude Code's snake_case.
type Event struct {
	Name           string `json:"hook_event_name"`
	SessionID      string `json:"session_id,omitempty"`
	TranscriptPath string `json:"transcript_path,omitempty"`
	Cwd            string `json:"cwd"`
	PermissionMode string `json:"permission_mode,omitempty"`

	AgentName string `json:"agent_name,omitempty"`
	TeamName  string `json:"team_name,omitempty"`
	AgentRole string `json:"agent_role,omitempty"`
	// TeammateName repeats AgentName for the team events (TeammateIdle,
	// TaskCreated, TaskCompleted), as Claude Code names it there.
	TeammateName string `json:"teammate_name,omitempty"`

	ToolName     string          `json:"tool_name,omitempty"`
	ToolInput    json.RawMessage `json:"tool_input,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	ToolResponse *ToolResponse   `json:"tool_response,omitempty"`

	Prompt         string `json:"prompt,omitempty"`
	StopHookActive bool   `json:"stop_hook_active,omitempty"`

	Task *Task `json:"task,omitempty"`
	// The task again, flat, as Claude Code's TaskCompleted input has it.
	TaskID          string `json:"task_id,omitempty"`
	TaskSubject     string `json:"task_subject,omitempty"`
	TaskDescription string `json:"task_description,omitempty"`
}

// ToolResponse is a tool's result as PostToolUse hooks see it.
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
	// permission. What blocking means is the event's: a tool call is
	// refused, a task stays open, an idle teammate goes back to work, a
	// stopping agent carries on. Reason is for the model.
	Blocked bool
	Reason  string
	// Permission is a PreToolUse hook's permission decision (deny > ask >
	// allow), "" when none gave one.
	Permission       permission.Effect
	PermissionReason string
	// Stop: a hook said "continue": false; the agent should stop.
	Stop       bool
	StopReason string
	// Context is additional context for the model (additionalContext,
	// and the plain stdout of UserPromptSubmit hooks).
	Context []string
	// Messages are systemMessage texts, for the user.
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
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Runner runs configured hooks. A nil *Runner runs nothing. It is safe for
// concurrent use.
type Runner struct {
	cfg   Config
	hooks []compiled
}

type compiled struct {
	settings.Hook
	matcher *regexp.Regexp // nil: every tool
}

// ErrBadMatcher is wrapped by New's errors.
var ErrBadMatcher = errors.New("bad hook matcher")

// New prepares a Runner. A matcher that is not a valid regular expression
// is an error naming it and its file: a security hook that silently never
// runs would be worse than a refusal to start.
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
		if h.Type != "command" {
			continue // kept in settings, reported there; not run
		}
		c := compiled{Hook: h}
		if m := strings.TrimSpace(h.Matcher); m != "" && m != "*" {
			re, err := regexp.Compile(`^(?:` + m + `)$`)
			if err != nil {
				return nil, fmt.Errorf("%w %q for %s in %s: %v", ErrBadMatcher, h.Matcher, h.Event, h.Source, err)
			}
			c.matcher = re
		}
		r.hooks = append(r.hooks, c)
	}
	return r, nil
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

// toolEvents are the events whose matcher is a tool name.
func toolEvent(e string) bool { return e == settings.PreToolUse || e == settings.PostToolUse }

// matching returns the hooks to run for ev, identical commands once.
func (r *Runner) matching(ev Event) []settings.Hook {
	var out []settings.Hook
	seen := map[string]bool{}
	for _, h := range r.hooks {
		if h.Event != ev.Name || seen[h.Command] {
			continue
		}
		if h.matcher != nil && toolEvent(ev.Name) &&
			!h.matcher.MatchString(ev.ToolName) && !h.matcher.MatchString(permission.ClaudeName(ev.ToolName)) {
			continue
		}
		seen[h.Command] = true
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
			results[i] = r.exec(ctx, h, stdin)
			interpret(&results[i])
			if r.cfg.Report != nil {
				r.cfg.Report(ev, results[i])
			}
		})
	}
	wg.Wait()
	return merge(ev.Name, results)
}

// output is the JSON a hook may print on stdout.
type output struct {
	Continue           *bool  `json:"continue"`
	StopReason         string `json:"stopReason"`
	SystemMessage      string `json:"systemMessage"`
	Decision           string `json:"decision"`
	Reason             string `json:"reason"`
	HookSpecificOutput *struct {
		PermissionDecision       string `json:"permissionDecision"`
		PermissionDecisionReason string `json:"permissionDecisionReason"`
		AdditionalContext        string `json:"additionalContext"`
	} `json:"hookSpecificOutput"`
}

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
// allow.
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
	for i := range results {
		res := &results[i]
		if res.Err != nil {
			continue
		}
		if res.ExitCode == 2 {
			o.Blocked = true
			reason := strings.TrimSpace(res.Stderr)
			if reason == "" {
				reason = describe(res.Hook) + " exited with status 2"
			}
			reasons = append(reasons, reason)
			continue
		}
		out := strings.TrimSpace(res.Stdout)
		if !strings.HasPrefix(out, "{") {
			if out != "" && event == settings.UserPromptSubmit {
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
			o.Blocked = true
			reasons = append(reasons, nonEmpty(js.Reason, describe(res.Hook)+" blocked"))
		case "approve":
			setPerm(permission.Allow, js.Reason)
		}
		if h := js.HookSpecificOutput; h != nil {
			switch h.PermissionDecision {
			case "deny":
				o.Blocked = true
				reasons = append(reasons, nonEmpty(h.PermissionDecisionReason, describe(res.Hook)+" denied the call"))
				setPerm(permission.Deny, h.PermissionDecisionReason)
			case "ask":
				setPerm(permission.Ask, h.PermissionDecisionReason)
			case "allow":
				setPerm(permission.Allow, h.PermissionDecisionReason)
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
		if js.SystemMessage != "" {
			o.Messages = append(o.Messages, js.SystemMessage)
		}
	}
	o.Reason = strings.Join(reasons, "\n")
	o.PermissionReason = strings.Join(permReasons, "\n")
	o.StopReason = strings.Join(stopReasons, "\n")
	return o
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
