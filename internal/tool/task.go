package tool

import (
	"context"
	_ "embed"
	"encoding/json"
	"strings"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

//go:embed task.md
var taskDescription string

// TaskArgs are the arguments of a Task call.
type TaskArgs struct {
	Description      string   `json:"description" required:"true" desc:"A few words saying what the agent will do, shown in logs and job lists."`
	Prompt           string   `json:"prompt" required:"true" desc:"The complete brief for the agent; it sees nothing else of your conversation."`
	SubagentType     string   `json:"subagent_type" desc:"explore (read-only) or general (the default). Subagents only."`
	RunInBackground  bool     `json:"run_in_background" desc:"Start a subagent as a background job and return its id at once; read it with TaskOutput."`
	TeamName         string   `json:"team_name" desc:"Spawn a persistent teammate in this team instead of a subagent; needs name."`
	Name             string   `json:"name" desc:"The teammate's name; with team_name."`
	Role             string   `json:"role" desc:"The teammate's role, e.g. backend developer; with team_name."`
	Model            string   `json:"model" desc:"The model the teammate uses; default: yours."`
	PlanModeRequired bool     `json:"plan_mode_required" desc:"The teammate must have its plan approved before it changes anything."`
	PermissionMode   string   `json:"permission_mode" desc:"The teammate's permission mode."`
	BudgetTokens     int64    `json:"budget_tokens" desc:"Stop the teammate's model calls once it has used this many tokens (it goes idle and you are told)."`
	BudgetUSD        float64  `json:"budget_usd" desc:"Stop the teammate's model calls once it has spent this many US dollars."`
	MCPServers       []string `json:"mcp_servers" desc:"The MCP servers whose tools the teammate is given; absent or empty: all of yours."`
	Isolation        string   `json:"isolation" enum:"shared|worktree|remote" desc:"worktree: the teammate works in its own git worktree and branch, committed per task and merged back by the runtime; remote: it runs on another machine, an agent waiting in a pool (see pool), in its own clone whose branch is pushed per task and merged back by the runtime; shared: in your checkout. Default: the team's setting."`
	Pool             string   `json:"pool" desc:"With isolation remote: the pool of waiting agents (troupe agent --join URL --wait --pool NAME) to take the teammate from; default: default."`
}

// TaskHandlers do the work of the Task tool, which only decodes and routes:
// the tool package knows nothing of agents or teams.
type TaskHandlers struct {
	// Subagent runs a call without team_name (internal/subagent.Handler).
	// Nil: subagents are refused.
	Subagent func(ctx context.Context, env *Env, args TaskArgs) Result
	// Teammate runs a call with team_name and name. Nil: teams are
	// refused.
	Teammate func(ctx context.Context, env *Env, args TaskArgs) Result
	// Teammates runs consecutive calls with team_name and name of one
	// message together, with one result per call. Nil: each goes to
	// Teammate.
	Teammates func(ctx context.Context, envs []*Env, args []TaskArgs) []Result
}

type taskTool struct{ h TaskHandlers }

var taskSpec = lazySpec[TaskArgs]("Task", taskDescription)

// TaskTool returns the Task tool over h.
func TaskTool(h TaskHandlers) Tool { return taskTool{h: h} }

func (taskTool) Spec() llm.ToolSpec { return taskSpec() }
func (taskTool) ReadOnly() bool     { return false }
func (taskTool) Kind() kind.Kind    { return kind.Manage }

func (t taskTool) Run(ctx context.Context, env *Env, input json.RawMessage) Result {
	args, teammate, res, ok := t.decode(ctx, input)
	switch {
	case !ok:
		return res
	case teammate:
		return t.h.Teammate(ctx, env, args)
	}
	return t.h.Subagent(ctx, env, args)
}

var _ Batcher = taskTool{}

// RunBatch runs the Task calls of one message in order, except that
// consecutive teammate spawns go to Teammates together. Subagents still
// run one after another.
func (t taskTool) RunBatch(ctx context.Context, envs []*Env, inputs []json.RawMessage) []Result {
	out := make([]Result, len(inputs))
	var (
		at    []int
		tenvs []*Env
		targs []TaskArgs
	)
	flush := func() {
		if len(at) == 0 {
			return
		}
		res := t.h.Teammates(ctx, tenvs, targs)
		for k, i := range at {
			if k < len(res) {
				out[i] = res[k]
			} else {
				out[i] = Errorf("Task: no result for this teammate")
			}
		}
		at, tenvs, targs = nil, nil, nil
	}
	for i, input := range inputs {
		args, teammate, res, ok := t.decode(ctx, input)
		switch {
		case !ok:
			out[i] = res
		case teammate && t.h.Teammates != nil:
			at, tenvs, targs = append(at, i), append(tenvs, envs[i]), append(targs, args)
		case teammate:
			out[i] = t.h.Teammate(ctx, envs[i], args)
		default:
			flush()
			out[i] = t.h.Subagent(ctx, envs[i], args)
		}
	}
	flush()
	return out
}

// decode checks a call's arguments and says whether it spawns a teammate
// (or runs a subagent); when it can do neither, res says why.
func (t taskTool) decode(ctx context.Context, input json.RawMessage) (args TaskArgs, teammate bool, res Result, ok bool) {
	args, res, ok = decodeArgs[TaskArgs]("Task", input)
	if !ok {
		return args, false, res, false
	}
	args.TeamName, args.Name = strings.TrimSpace(args.TeamName), strings.TrimSpace(args.Name)
	if strings.TrimSpace(args.Prompt) == "" {
		return args, false, Errorf(`invalid arguments for Task: "prompt" must not be empty`), false
	}
	if err := ctx.Err(); err != nil {
		return args, false, Errorf("Task was not run: %v", err), false
	}
	switch {
	case args.TeamName != "" && args.Name != "":
		if t.h.Teammate == nil {
			return args, false, Errorf("Task: teams are not available to this agent, so no teammate can be spawned; leave out team_name and name to run a subagent instead"), false
		}
		return args, true, Result{}, true
	case args.TeamName != "":
		return args, false, Errorf(`invalid arguments for Task: "team_name" needs "name", the teammate's name; leave out team_name to run a subagent`), false
	case args.Name != "":
		return args, false, Errorf(`invalid arguments for Task: "name" is only for a teammate and needs "team_name"; leave out name to run a subagent`), false
	}
	if t.h.Subagent == nil {
		return args, false, Errorf("Task: subagents are not available to this agent"), false
	}
	return args, false, Result{}, true
}
