// Package tool defines what a tool is to an agent, the registry that offers
// tools to a model, and the builtin tools (one file each). A tool failure the
// model should see is a Result with IsError set; a Go error is never returned
// from Run.
//
// It must never depend on agents or teams: anything a team-aware tool needs
// comes through Env or through the tool's own constructor.
package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/shell"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

// Tool is something a model may call.
type Tool interface {
	// Spec is what the model is offered: name, description, input schema.
	Spec() llm.ToolSpec
	// ReadOnly reports whether the tool never changes anything, so that
	// several calls may run in parallel and plan mode may allow it.
	ReadOnly() bool
	// Kind says what the tool does (read, edit, execute, network,
	// manage). The permission engine, the artifact guard and the subagent
	// types decide by it; kind.Unknown is treated as able to do anything.
	Kind() kind.Kind
	// Run executes one call. It must honour ctx and never panic on bad
	// input: malformed arguments are an error Result.
	Run(ctx context.Context, env *Env, input json.RawMessage) Result
}

// Batcher is a tool whose consecutive calls in one model message are run
// together: the agent announces and gates each call in order as it would
// alone, hands the calls it allows to RunBatch at once, in the message's
// order, and answers each in order. RunBatch returns one result per call;
// it must honour ctx and never panic on bad input, as Run.
type Batcher interface {
	Tool
	RunBatch(ctx context.Context, envs []*Env, inputs []json.RawMessage) []Result
}

// Env is what a tool call may use of its agent's surroundings.
type Env struct {
	// Workspace confines every file access.
	Workspace *Workspace
	// Agent and Team name the caller ("team-lead", "alice"); Team may be
	// empty for a single agent.
	Agent string
	Team  string
	// ToolUseID is the id of the call being run.
	ToolUseID string
	// Jobs tracks the agent's background work; nil when the agent has
	// none (background requests are then refused).
	Jobs *Jobs
	// RequestCompact asks the agent to compact its conversation (replace
	// it by a summary, dwelling on focus) before its next model call; nil
	// when the agent cannot compact. Safe for concurrent use.
	RequestCompact func(focus string)
	// Hidden, when set, reports the workspace-relative paths that tool may
	// not read (a permission rule denies them): glob and grep leave them
	// out of a search over a folder that holds them.
	Hidden func(tool, rel string) bool
	// ShellEnv is the environment of bash commands, foreground and
	// background (shell.Environ of the process's environment and the
	// settings' env); nil means shell.Environ(os.Environ(), nil): never the
	// provider keys nor troupe's own variables.
	ShellEnv []string
	// Sandbox, when set, runs every bash command in it; a command is
	// refused, never run outside, when the sandbox cannot be had.
	Sandbox *shell.Sandbox
	// Shell, when set (and no Sandbox is), runs foreground bash commands
	// in this long-lived session, which keeps the working directory and
	// shell variables from one call to the next; its owner closes it. A
	// call made while another runs in it, and background commands, run
	// on their own as without it.
	Shell *shell.Session
	// CheckWrite, when set, is asked before write_file or edit_file
	// changes a file, with its workspace-relative slash path; an error
	// refuses the write before it happens (a file lease another agent
	// holds).
	CheckWrite func(ctx context.Context, rel string) error
	// CheckCommand, when set, is asked before bash runs a command, with
	// the directory the command starts in; an error refuses the command
	// before it runs (it would write a file another agent's lease holds).
	CheckCommand func(ctx context.Context, command, dir string) (CommandCheck, error)
}

// CommandCheck is what CheckCommand says of a command it lets run.
type CommandCheck struct {
	// Note is added to the command's result.
	Note string
	// ReadOnly are absolute paths a sandboxed command may not write,
	// beyond the sandbox's own Protected ones.
	ReadOnly []string
	// After, when set, is called once the command ended (for a background
	// command, once its job did) and returns a note for its result, or "".
	After func(ctx context.Context) string
}

// Warning is an error CheckWrite returns to let the write go ahead, with Note added to its result (a file lease in warn mode).
type Warning struct{ Note string }

func (w *Warning) Error() string { return w.Note }

// checkWrite asks CheckWrite about a place in the workspace (additional
// directories are outside every lease): an error refuses the write, a note
// goes with its result.
func (e *Env) checkWrite(ctx context.Context, p Place) (note string, err error) {
	if e == nil || e.CheckWrite == nil || p.Extra {
		return "", nil
	}
	err = e.CheckWrite(ctx, filepath.ToSlash(p.Rel))
	var w *Warning
	if errors.As(err, &w) {
		return w.Note, nil
	}
	return "", err
}

// withNote adds a check's note to a result.
func withNote(r Result, note string) Result {
	if note != "" {
		r.Content = strings.TrimRight(r.Content, "\n") + "\n\n" + note
	}
	return r
}

// hidden reports whether tool must leave rel out.
func (e *Env) hidden(tool, rel string) bool {
	return e != nil && e.Hidden != nil && e.Hidden(tool, rel)
}

// Result is what the model sees of a call.
type Result struct {
	Content string
	IsError bool
	// Response is what hooks see of the call as tool_response (one of
	// the *Response types, in Claude Code's shape); nil: the content.
	// The model never sees it.
	Response any
	// Images go to the model with Content where its provider can show
	// them (llm.Block.Images); Content should mention them for one that
	// cannot.
	Images []llm.Image
}

// Errorf returns an error Result.
func Errorf(format string, args ...any) Result {
	return Result{Content: fmt.Sprintf(format, args...), IsError: true}
}

// OK returns a successful Result.
func OK(content string) Result { return Result{Content: content} }

// Registry is an ordered set of tools, looked up by name.
type Registry struct {
	order []string
	tools map[string]Tool
}

// NewRegistry returns a registry holding tools in the given order. A later
// tool with the same name replaces the earlier one.
func NewRegistry(tools ...Tool) *Registry {
	r := &Registry{tools: map[string]Tool{}}
	for _, t := range tools {
		r.Add(t)
	}
	return r
}

// Add puts t in the registry, replacing any tool of the same name.
func (r *Registry) Add(t Tool) {
	name := t.Spec().Name
	if _, ok := r.tools[name]; !ok {
		r.order = append(r.order, name)
	}
	r.tools[name] = t
}

// Remove takes the named tools out of the registry.
func (r *Registry) Remove(names ...string) {
	for _, n := range names {
		if _, ok := r.tools[n]; !ok {
			continue
		}
		delete(r.tools, n)
		for i, o := range r.order {
			if o == n {
				r.order = append(r.order[:i], r.order[i+1:]...)
				break
			}
		}
	}
}

// Get returns the named tool.
func (r *Registry) Get(name string) (Tool, bool) {
	t, ok := r.tools[name]
	return t, ok
}

// Kind returns the kind of the named tool, kind.Unknown when the registry
// has no tool of that name.
func (r *Registry) Kind(name string) kind.Kind {
	if t, ok := r.tools[name]; ok {
		return t.Kind()
	}
	return kind.Unknown
}

// Names returns the tool names in registry order.
func (r *Registry) Names() []string { return append([]string(nil), r.order...) }

// Specs returns the specs in registry order. The order is stable so that the
// request prefix stays byte-identical between turns.
func (r *Registry) Specs() []llm.ToolSpec {
	out := make([]llm.ToolSpec, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, r.tools[n].Spec())
	}
	return out
}

// UnknownError is the result for a call of a tool that is not offered.
func (r *Registry) UnknownError(name string) Result {
	names := r.Names()
	sort.Strings(names)
	return Errorf("unknown tool %q; the tools available are: %s", name, strings.Join(names, ", "))
}
