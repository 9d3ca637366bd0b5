// Package subagent runs the Task tool's subagents: a fresh agent with an
// empty conversation, a tool set chosen by its type, a cap on its model
// calls and no Task tool of its own (no recursion), whose final report is all
// its parent sees. In the background it runs as one of the parent's jobs.
//
// It builds on agent and tool; it must never depend on teams or the store.
package subagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/shell"
	"github.com/troupe-dev/troupe/internal/todo"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

// The built-in subagent types, named as Claude Code names them.
const (
	// Explore may only read: the tools of kind read (read_file, glob, grep).
	Explore = "explore"
	// General may also run commands and change files.
	General = "general-purpose"
)

// aliases are other names of the built-in types: troupe's older "general"
// and Claude Code's capitalised "Explore".
var aliases = map[string]string{"general": General, "Explore": Explore}

// resolve returns the built-in type typ names (an alias resolved), and
// whether it is one.
func resolve(typ string) (string, bool) {
	if a, ok := aliases[typ]; ok {
		typ = a
	}
	_, ok := types[typ]
	return typ, ok
}

// DefaultMaxIterations is the model calls a subagent may make when the
// Runner does not say.
const DefaultMaxIterations = 30

// JobKind is the kind of a background subagent's job.
const JobKind = "subagent"

// ErrUnknownType is returned for a subagent_type that is not one of Types.
var ErrUnknownType = errors.New("unknown subagent type")

// types maps each type to the kinds of tool it is given (nil: every kind)
// and its framing. A type's tools are chosen by what they declare they do,
// so a new read tool reaches explore subagents without an edit here.
var types = map[string]struct {
	kinds        []kind.Kind
	instructions string
}{
	Explore: {
		kinds: []kind.Kind{kind.Read},
		instructions: "You can only read: find and read what the task asks about, but change nothing; " +
			"you have no tool that writes or runs commands.",
	},
	General: {
		instructions: "You may read, run commands and change files as the task needs; change nothing it does not need.",
	},
}

// candidates are the tools a subagent may be given, in the order offered:
// the builtins and a TodoWrite over list. Never Task: subagents start no
// subagents.
func candidates(list *todo.List) []tool.Tool {
	return append(tool.Builtins(), tool.TodoWriteTool(list))
}

// typeTools returns the names of the tools built-in type typ is given, in
// the order offered: the candidates of its kinds.
func typeTools(typ string) []string {
	kinds := types[typ].kinds
	var out []string
	for _, t := range candidates(nil) {
		if kinds == nil || slices.Contains(kinds, t.Kind()) {
			out = append(out, t.Spec().Name)
		}
	}
	return out
}

// Types returns the built-in subagent types, sorted (aliases left out).
func Types() []string {
	out := make([]string, 0, len(types))
	for t := range types {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Runner starts subagents for one parent agent. Its fields are read-only
// once it is in use; it is safe for concurrent use.
type Runner struct {
	Provider  llm.Provider
	Model     string
	Workspace *tool.Workspace
	// Parent is the parent agent's name; a subagent is named
	// "<parent>:<type>" ("team-lead:explore").
	Parent string
	// MaxIterations caps a subagent's model calls (0: 30).
	MaxIterations int
	// MaxTokens is the output limit of one call (0: provider default).
	MaxTokens int
	// Gate, if set, checks the subagent's tool calls as it checks the
	// parent's: a subagent never has more permission than its parent.
	Gate agent.Gate
	// Compactor, if set, keeps a long subagent's context in bounds.
	Compactor agent.Compactor
	// Observe receives the subagent's events (nil: none); it must be safe
	// for concurrent use, since background subagents run beside the parent.
	Observe func(agent.Event)
	// Stop, if set, is asked when the subagent's model ends its turn
	// (SubagentStop hooks): again sends it back to work with reason, at most
	// three times. active says it already runs on because of a Stop.
	// last is the text of its last reply.
	Stop func(ctx context.Context, name, last string, active bool) (reason string, again bool)
	// Start, if set, is called before a subagent of type typ runs
	// (SubagentStart hooks): the context it returns is the run's (its
	// gate, AfterTool and Stop see it), the blocks go with the prompt.
	Start func(ctx context.Context, name, typ string) (context.Context, []llm.Block)
	// Hidden, if set, is the parent's tool.Env.Hidden: paths a search must
	// leave out.
	Hidden func(tool, rel string) bool
	// ShellEnv and Sandbox are the parent's: how the subagent's bash
	// commands run (tool.Env).
	ShellEnv []string
	Sandbox  *shell.Sandbox
	// AfterTool, if set, sees each call that ran, as the parent's does
	// (PostToolUse hooks, the artifact guard's look at bash writes).
	AfterTool func(ctx context.Context, call agent.Call, res *tool.Result)
	// Agents are the custom types (.claude/agents) beside the built-in
	// ones; nil: none.
	Agents *Catalog
	// ResolveModel, if set, turns a custom type's model (an alias such as
	// "sonnet", or an id) into the model to call; nil uses ModelAliases.
	ResolveModel func(string) string
	// TranscriptDir, if set, is asked at each run for the directory its
	// transcript goes in ("": none); the file is <Parent>-sub-<id>.jsonl,
	// and RunOf the run's context names it (SubagentStop's
	// agent_transcript_path).
	TranscriptDir func(ctx context.Context) string
	// OnTranscriptError, if set, hears a transcript that could not be
	// written; the run goes on without it.
	OnTranscriptError func(path string, err error)
	// Extra are the parent's tools from outside troupe (MCP servers'),
	// offered after a subagent's own: all of them to a general-purpose
	// subagent, those of its kinds to a built-in type that is limited to
	// some (explore: read only), and to a custom type those it names, or
	// when it lists no tools all but those it disallows (Definition.AllMCP).
	Extra []tool.Tool
}

// spec is what a run of one type needs.
type spec struct {
	typ   string
	tools []string
	// extra says which of the Runner's Extra tools the type is given.
	extra        func(tool.Tool) bool
	instructions string
	model        string
	maxTurns     int
}

// lookup finds typ among the built-in and the custom types.
func (r *Runner) lookup(typ string) (spec, error) {
	typ = strings.TrimSpace(typ)
	if typ == "" {
		typ = General
	}
	if t, ok := resolve(typ); ok {
		kinds := types[t].kinds
		extra := func(x tool.Tool) bool { return kinds == nil || slices.Contains(kinds, x.Kind()) }
		return spec{typ: t, tools: typeTools(t), extra: extra, instructions: types[t].instructions, model: r.Model}, nil
	}
	if def, ok := r.Agents.Get(typ); ok {
		sp := spec{typ: def.Name, tools: def.Tools, instructions: def.Prompt, model: r.Model, maxTurns: def.MaxTurns}
		sp.extra = func(x tool.Tool) bool {
			name := x.Spec().Name
			if !def.AllMCP {
				return slices.Contains(def.Tools, name)
			}
			for _, d := range def.DisallowedMCP {
				if name == d || strings.HasPrefix(name, d+"__") {
					return false
				}
			}
			return true
		}
		if sp.tools == nil {
			sp.tools = typeTools(General)
		}
		if m := def.Model; m != "" && m != "inherit" {
			switch {
			case r.ResolveModel != nil:
				sp.model = r.ResolveModel(m)
			case ModelAliases[m] != "":
				sp.model = ModelAliases[m]
			default:
				sp.model = m
			}
		}
		return sp, nil
	}
	return spec{}, fmt.Errorf("%w %q; the types are: %s", ErrUnknownType, typ, strings.Join(r.typeNames(), ", "))
}

// typeNames are the built-in and custom type names, sorted.
func (r *Runner) typeNames() []string {
	out := append(Types(), r.Agents.Names()...)
	slices.Sort(out)
	return out
}

// Name is the name of the parent's subagent of type typ.
func (r *Runner) Name(typ string) string {
	parent := r.Parent
	if parent == "" {
		parent = "agent"
	}
	return parent + ":" + typ
}

// Run runs one subagent to the end and returns its final report: the last
// text it wrote, with a note when it ran out of iterations. An error means
// it could not run or its model calls failed; the report may then hold what
// it wrote before.
func (r *Runner) Run(ctx context.Context, args tool.TaskArgs) (string, error) {
	return r.RunFor(ctx, nil, args)
}

// RunFor is Run for a parent whose tool environment is parent: the
// subagent's writes pass the parent's write checks (CheckWrite,
// CheckCommand: the file leases others hold), so that a subagent can do
// nothing to the workspace its parent would be refused. A nil parent
// checks nothing.
func (r *Runner) RunFor(ctx context.Context, parent *tool.Env, args tool.TaskArgs) (string, error) {
	spec, err := r.lookup(args.SubagentType)
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(args.Prompt) == "" {
		return "", fmt.Errorf("subagent %s: %w", r.Name(spec.typ), agent.ErrEmptyInput)
	}
	name := r.Name(spec.typ)
	list := new(todo.List)
	tools := tool.NewRegistry(toolsNamed(spec.tools, list)...)
	for _, x := range r.Extra {
		if _, taken := tools.Get(x.Spec().Name); !taken && spec.extra(x) {
			tools.Add(x)
		}
	}
	iterations := r.MaxIterations
	if iterations <= 0 {
		iterations = DefaultMaxIterations
	}
	if spec.maxTurns > 0 {
		iterations = spec.maxTurns
	}
	run := Run{ID: newRunID(), Name: name, Type: ClaudeType(spec.typ)}
	var tr *transcript
	if r.TranscriptDir != nil {
		if dir := r.TranscriptDir(ctx); dir != "" {
			run.TranscriptPath = filepath.Join(dir, transcriptFile(r.Parent, run.ID))
			tr = &transcript{path: run.TranscriptPath}
			defer func() {
				if err := tr.close(); err != nil && r.OnTranscriptError != nil {
					r.OnTranscriptError(tr.path, err)
				}
			}()
		}
	}
	ctx = context.WithValue(ctx, runKey{}, run)
	var record func(llm.Message)
	if tr != nil {
		record = tr.record
	}
	id := agent.Identity{Name: name}
	prompt := agent.Prompt{Identity: id, Instructions: instructions(r.Parent, spec.instructions)}
	if r.Workspace != nil {
		prompt.Workspace = r.Workspace.Dir()
	}
	var boundaries []agent.Boundary
	if slices.Contains(spec.tools, todo.ToolName) {
		boundaries = append(boundaries, agent.TodoReminder(list))
	}
	a, err := agent.New(agent.Config{
		Name:       name,
		Provider:   r.Provider,
		Model:      spec.model,
		System:     prompt.String(),
		Tools:      tools,
		Env:        r.env(name, parent),
		MaxTurns:   iterations,
		MaxTokens:  r.MaxTokens,
		Gate:       r.Gate,
		AfterTool:  r.AfterTool,
		Boundaries: boundaries,
		Observe:    r.Observe,
		Record:     record,
		Identity:   id.Line(),
		Compactor:  r.Compactor,
	})
	if err != nil {
		return "", fmt.Errorf("subagent %s: %w", name, err)
	}
	input := []llm.Block{llm.TextBlock(args.Prompt)}
	if r.Start != nil {
		var extra []llm.Block
		ctx, extra = r.Start(ctx, name, spec.typ)
		input = append(input, extra...)
	}
	res, err := a.Run(ctx, input...)
	for i := 0; err == nil && r.Stop != nil && i < 3; i++ {
		reason, again := r.Stop(ctx, name, res.Text, i > 0)
		if !again {
			break
		}
		var more *agent.Result
		more, err = a.Run(ctx, llm.TextBlock("A SubagentStop hook sent you back to work: "+reason))
		if more != nil && more.Text != "" {
			res.Text = more.Text
		}
	}
	text := ""
	if res != nil {
		text = strings.TrimSpace(res.Text)
	}
	switch {
	case errors.Is(err, agent.ErrMaxTurns):
		note := fmt.Sprintf("[%s stopped after %d iterations without finishing; its work may be incomplete.]", name, iterations)
		if text == "" {
			return note, nil
		}
		return text + "\n\n" + note, nil
	case err != nil:
		return text, fmt.Errorf("subagent %s: %w", name, err)
	case text == "":
		return fmt.Sprintf("[%s ended without a report.]", name), nil
	}
	return text, nil
}

// env is the tool environment of subagent name under parent's checks.
func (r *Runner) env(name string, parent *tool.Env) *tool.Env {
	e := &tool.Env{Workspace: r.Workspace, Agent: name, Hidden: r.Hidden, ShellEnv: r.ShellEnv, Sandbox: r.Sandbox}
	if parent != nil {
		// The checks judge the parent's name (whose leases are its
		// own): a subagent writes on its parent's behalf.
		e.CheckWrite, e.CheckCommand = parent.CheckWrite, parent.CheckCommand
	}
	return e
}

// Tools returns the tools a subagent of type typ is given, in the order the
// model is offered them; list backs its TodoWrite, if it has one.
func Tools(typ string, list *todo.List) ([]tool.Tool, error) {
	t, ok := resolve(typ)
	if !ok {
		return nil, fmt.Errorf("%w %q; the types are: %s", ErrUnknownType, typ, strings.Join(Types(), ", "))
	}
	return toolsNamed(typeTools(t), list), nil
}

// toolsNamed returns the subagent tools of the given names, in the order
// the model is offered them.
func toolsNamed(names []string, list *todo.List) []tool.Tool {
	var out []tool.Tool
	for _, t := range candidates(list) {
		if slices.Contains(names, t.Spec().Name) {
			out = append(out, t)
		}
	}
	return out
}

func instructions(parent, typ string) string {
	if parent == "" {
		parent = "another agent"
	} else {
		parent = fmt.Sprintf("'%s'", parent)
	}
	return fmt.Sprintf(`You are a subagent started by %s for one task, given in the first message. %s
When the task is done, end your turn with a report of what you found or did: it is the only part of your work %s will see, so make it complete and concrete (paths, names, results), and say what you could not do.`,
		parent, typ, parent)
}

// Handler returns the Subagent handler of the Task tool over r. In the
// foreground the result is the subagent's report; with run_in_background the
// subagent becomes a job on the caller's Env.Jobs (kind "subagent") and the
// result is its id, for TaskOutput and TaskStop.
func Handler(r *Runner) func(ctx context.Context, env *tool.Env, args tool.TaskArgs) tool.Result {
	return func(ctx context.Context, env *tool.Env, args tool.TaskArgs) tool.Result {
		spec, err := r.lookup(args.SubagentType)
		if err != nil {
			return tool.Errorf("Task: %v", err)
		}
		typ := spec.typ
		desc := strings.TrimSpace(args.Description)
		if desc == "" {
			desc = typ + " subagent"
		}
		if !args.RunInBackground {
			report, err := r.RunFor(ctx, env, args)
			if err != nil {
				if report != "" {
					return tool.Errorf("Task: %v\nIts last words:\n%s", err, report)
				}
				return tool.Errorf("Task: %v", err)
			}
			return tool.OK(report)
		}
		if env == nil || env.Jobs == nil {
			return tool.Errorf("run_in_background is not available to this agent; run the subagent in the foreground")
		}
		id := env.Jobs.Start(JobKind, desc, func(ctx context.Context, out io.Writer) error {
			report, err := r.RunFor(ctx, env, args)
			if report != "" {
				_, _ = io.WriteString(out, report)
			}
			return err
		})
		return tool.OK(fmt.Sprintf("Started background subagent %s (%s): %s\nRead its report with TaskOutput (task_id %q); stop it with TaskStop.", id, r.Name(typ), desc, id))
	}
}
