package team

import (
	"context"

	"github.com/troupe-dev/troupe/internal/tool"
)

// Env is one teammate's environment: where it works, under which rules,
// and how it is launched. It is the seam for where teammates run: a
// per-teammate git worktree or a remote machine is one more Placement, and
// nothing else in the team changes.
type Env struct {
	// Workspace is its root: its file tools resolve paths there, its
	// commands start there, and the roster records it as its cwd.
	Workspace *tool.Workspace
	// Rules are its permission rules, hooks, guard and patterns (nil: the
	// permission modes only).
	Rules *Rules
	// Command is its launcher in process mode (Config.TeammateMode): the
	// command line that runs it, `troupe agent` and its state flags, to
	// which --team, --name, --workspace and the key's descriptor are
	// appended (a remote machine: a command that runs it there). In
	// process mode it is required; in-process teammates are goroutines of
	// the lead's process and ignore it.
	Command []string
	// Environ is added to its process's environment.
	Environ []string
}

// Placement gives each teammate its Env when it is spawned or resumed.
type Placement interface {
	Place(ctx context.Context, team, member string) (Env, error)
}

// SharedPlacement runs every teammate in the lead's workspace under the
// session's rules: in process, or as a process when Command is set. It is
// the default (Config.Placement nil).
type SharedPlacement struct {
	Workspace *tool.Workspace
	Rules     *Rules
	Command   []string
	Environ   []string
}

// Place implements Placement.
func (p SharedPlacement) Place(context.Context, string, string) (Env, error) {
	return Env{Workspace: p.Workspace, Rules: p.Rules, Command: p.Command, Environ: p.Environ}, nil
}

// placement is cfg's Placement, or the shared default.
func placement(cfg Config) Placement {
	if cfg.Placement != nil {
		return cfg.Placement
	}
	p := SharedPlacement{Workspace: cfg.Workspace, Rules: cfg.Rules}
	if cfg.TeammateMode == ModeProcess {
		p.Command, p.Environ = cfg.AgentCommand, cfg.AgentEnv
	}
	return p
}
