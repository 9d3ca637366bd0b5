package team

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/guard"
	"github.com/troupe-dev/troupe/internal/hook"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/pattern"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/persona"
	"github.com/troupe-dev/troupe/internal/shell"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

// Rules is what a workspace's settings make the runtime enforce: the
// permission policy, the hooks, the artifact guard and the team patterns.
// The zero value (or nil) enforces only the permission modes.
type Rules struct {
	Policy   *permission.Policy
	Hooks    *hook.Runner
	Guard    *guard.Guard
	Patterns *pattern.Set
	// Themes are the persona themes (nil: no characters); History is the
	// user's theme history, read and written when a team is formed.
	Themes  *persona.Set
	History *persona.History
	// DefaultMode is a teammate's mode when its spawn names none (empty:
	// the lead's).
	DefaultMode string
	// DefaultPattern is recorded for a team created without one.
	DefaultPattern string
	// TeammateModel is a teammate's model when neither its spawn nor its
	// pattern role names one.
	TeammateModel string
	// StateDir is the file store's state directory, from which hooks are
	// given each agent's transcript_path ("": none).
	StateDir string

	TeamRules
	ShellRules
}

// TeamRules are the settings that bound how a team's agents work beside
// one another: how much of the tokens the lead's coordination may take,
// and what a write into another agent's file lease does.
type TeamRules struct {
	// MaxCoordinationShare is the share of the team's tokens the lead's
	// coordination may take over the governor's window before the lead is
	// told to batch (team.maxCoordinationShare; 0: the default, 0.5).
	MaxCoordinationShare float64
	// Leases is what a write to a path another agent's in-progress task
	// holds does (team.leases; "": refuse).
	Leases LeaseMode
}

// ShellRules groups what every agent's bash commands run with and how
// their effect on protected files is checked afterwards: all of it applies
// to the bash tool alone.
type ShellRules struct {
	// ShellEnv is the environment of every agent's bash commands: the
	// scrubbed process environment plus the settings' env (nil: the
	// scrubbed process environment).
	ShellEnv []string
	// Sandbox, when set, runs every bash command in bubblewrap.
	Sandbox *shell.Sandbox
	// Watch, when set, is looked at after every bash command: a protected
	// file it changed is named in the result and given to
	// OnProtectedChange (the user is told).
	Watch             *FileWatch
	OnProtectedChange func(paths []string)
}

// FileWatch remembers what a set of files looked like (existence, size,
// modification time) and says which changed since it last looked.
type FileWatch struct {
	mu    sync.Mutex
	paths []string
	seen  map[string]string
}

// NewFileWatch looks at paths now; later changes are what Changed reports.
func NewFileWatch(paths []string) *FileWatch {
	w := &FileWatch{paths: paths, seen: map[string]string{}}
	for _, p := range paths {
		w.seen[p] = fingerprint(p)
	}
	return w
}

// Changed returns the paths that changed since the last look, and takes
// the new state as the next baseline.
func (w *FileWatch) Changed() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, p := range w.paths {
		if f := fingerprint(p); f != w.seen[p] {
			w.seen[p] = f
			out = append(out, p)
		}
	}
	return out
}

func fingerprint(p string) string {
	st, err := os.Lstat(p)
	if err != nil {
		return "absent"
	}
	return fmt.Sprintf("%d %d %s", st.Size(), st.ModTime().UnixNano(), st.Mode())
}

func (r *Rules) hooks() *hook.Runner {
	if r == nil {
		return nil
	}
	return r.Hooks
}

// gate chains the PreToolUse hooks, the artifact guard and the permission
// policy for one agent. The hooks come first so that a hook's updatedInput
// is what the guard and the policy judge; a call that needs asking goes to
// the PermissionRequest hooks before ask.
func (r *Rules) gate(ws *tool.Workspace, who hook.Who, mode func() permission.Mode,
	ask func(ctx context.Context, call agent.Call, v permission.Verdict) agent.Decision,
	record func(ctx context.Context, call agent.Call, v permission.Verdict, d agent.Decision)) agent.Gate {
	var (
		pol *permission.Policy
		g   *guard.Guard
	)
	if r != nil {
		pol, g = r.Policy, r.Guard
	}
	pg := permission.Gate(permission.GateConfig{Policy: pol, Mode: mode, Ask: r.hooks().Ask(who, ask), Record: record})
	return r.hooks().Gate(who, g.Gate(ws, pg))
}

// afterTool is what sees each call of an agent that ran: the artifact
// guard's look at what a bash command wrote, then the PostToolUse hooks.
func (r *Rules) afterTool(ws *tool.Workspace, who hook.Who) func(ctx context.Context, call agent.Call, res *tool.Result) {
	var g *guard.Guard
	if r != nil {
		g = r.Guard
	}
	var checks []func(ctx context.Context, call agent.Call, res *tool.Result)
	for _, c := range []func(ctx context.Context, call agent.Call, res *tool.Result){g.AfterBash(ws), r.protectedCheck(), r.hooks().AfterTool(who)} {
		if c != nil {
			checks = append(checks, c)
		}
	}
	switch len(checks) {
	case 0:
		return nil
	case 1:
		return checks[0]
	}
	return func(ctx context.Context, call agent.Call, res *tool.Result) {
		for _, c := range checks {
			c(ctx, call, res)
		}
	}
}

// protectedCheck flags, after a bash command, a protected file it changed
// anyway (through a path the permission engine could not read, with no
// sandbox to stop it): the change is named in the command's result and
// reported, and it is not applied to the run (settings are snapshotted).
func (r *Rules) protectedCheck() func(ctx context.Context, call agent.Call, res *tool.Result) {
	if r == nil || r.Watch == nil {
		return nil
	}
	return func(_ context.Context, call agent.Call, res *tool.Result) {
		if call.Kind != kind.Execute && call.Kind != kind.Unknown {
			return // only a command (or a tool that never said what it does) writes behind the engine's back
		}
		changed := r.Watch.Changed()
		if len(changed) == 0 {
			return
		}
		if r.OnProtectedChange != nil {
			r.OnProtectedChange(changed)
		}
		res.IsError = true
		res.Content = strings.TrimRight(res.Content, "\n") + "\n\ntroupe: this command changed protected files (" + strings.Join(changed, ", ") +
			"), which configure the agents; the change is not applied to this run and has been reported to the user. Do not change them."
	}
}

// toolEnv is the tool environment of one agent: its workspace, the paths
// its searches leave out, and how its commands run (environment and
// sandbox). It is the one place an agent's surroundings are decided.
func (r *Rules) toolEnv(ws *tool.Workspace, agentName, team string, jobs *tool.Jobs) *tool.Env {
	env := &tool.Env{Workspace: ws, Agent: agentName, Team: team, Jobs: jobs, Hidden: r.hidden()}
	if r != nil {
		env.ShellEnv, env.Sandbox = r.ShellEnv, r.Sandbox
	}
	return env
}

func (r *Rules) policy() *permission.Policy {
	if r == nil {
		return nil
	}
	return r.Policy
}

func (r *Rules) shellEnv() []string {
	if r == nil {
		return nil
	}
	return r.ShellEnv
}

func (r *Rules) sandbox() *shell.Sandbox {
	if r == nil {
		return nil
	}
	return r.Sandbox
}

// hidden is what searches leave out: the paths a deny rule forbids the
// searching tool (nil when no rule could).
func (r *Rules) hidden() func(tool, rel string) bool {
	if r == nil || r.Policy == nil {
		return nil
	}
	return r.Policy.DeniesPath
}

// manageOnly reports whether the team's pattern has the lead only manage.
// A missing or unknown pattern blocks nothing (fail open).
func (r *Rules) manageOnly(p string) bool {
	if r == nil || r.Patterns == nil || p == "" {
		return false
	}
	return r.Patterns.ManageOnly(p)
}

// roleModel is the model a pattern gives a role, if any.
func (r *Rules) roleModel(p, role string) string {
	ro, _ := r.patternRole(p, role)
	return ro.Model
}

// patternIsolation is where pattern p's teammates work ("" when it does
// not say).
func (r *Rules) patternIsolation(p string) string {
	if r == nil || r.Patterns == nil || p == "" {
		return ""
	}
	pat, _ := r.Patterns.Lookup(p)
	return pat.Isolation
}

// patternRole is role as pattern p defines it, if it does.
func (r *Rules) patternRole(p, role string) (pattern.Role, bool) {
	if r == nil || r.Patterns == nil || p == "" {
		return pattern.Role{}, false
	}
	pat, ok := r.Patterns.Lookup(p)
	if !ok {
		return pattern.Role{}, false
	}
	for _, ro := range pat.Roles {
		if strings.EqualFold(ro.Name, role) {
			return ro, true
		}
	}
	return pattern.Role{}, false
}

// recordDecision journals a permission decision.
func recordDecision(j func(ctx context.Context, ev teamevent.Event), name string) func(context.Context, agent.Call, permission.Verdict, agent.Decision) {
	return func(ctx context.Context, call agent.Call, v permission.Verdict, d agent.Decision) {
		if v.Effect == permission.Allow && v.Rule == "" {
			return // the mode's plain default: nothing worth a journal line
		}
		ev := teamevent.PermissionCheck{Member: name, Tool: call.Name, Effect: string(v.Effect),
			Rule: v.Rule, Source: v.Source, Reason: v.Reason, Allowed: d.Allow, ToolUseID: call.ID}
		if !d.Allow && json.Valid(call.Input) {
			ev.Input = json.RawMessage(call.Input) // for the run's permission_denials
		}
		j(ctx, ev)
	}
}

// stopLoop runs the Stop hooks after the session's main agent (the lead)
// ended a turn on its own; a hook that blocks sends it back to work with
// its reason, at most three times. A run a hook halted ("continue": false)
// does not get them. run returns the text of the run it made.
func stopLoop(ctx context.Context, hooks *hook.Runner, who hook.Who, res *agent.Result, run func([]llm.Block) (*agent.Result, error)) {
	for i := 0; i < 3 && hooks.Has("Stop") && res != nil && !res.WasHalted; i++ {
		out := hooks.StopHooks(ctx, who, hook.Stopping{Active: i > 0, LastMessage: res.Text})
		if !out.Blocked || out.Stop {
			return
		}
		again, err := run([]llm.Block{llm.TextBlock("A Stop hook sent you back to work: " + out.Reason)})
		if err != nil || again == nil {
			return
		}
		res = again
	}
}
