package tool

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/shell"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

//go:embed bash.md
var bashDescription string

const (
	bashDefaultTimeout = 120
	bashMaxTimeout     = 600
)

type bashArgs struct {
	Command         string `json:"command" required:"true" desc:"The command to run with bash -c in the workspace directory."`
	Timeout         *int   `json:"timeout" desc:"Seconds before the command is killed: default 120, at most 600. Ignored for background commands unless given."`
	Description     string `json:"description" desc:"What the command does, in 5-10 words."`
	RunInBackground bool   `json:"run_in_background" desc:"Start the command as a background job and return its id at once; read it with TaskOutput, stop it with TaskStop."`
}

type bashTool struct{}

var bashSpec = lazySpec[bashArgs]("bash", bashDescription)

func (bashTool) Spec() llm.ToolSpec { return bashSpec() }
func (bashTool) ReadOnly() bool     { return false }
func (bashTool) Kind() kind.Kind    { return kind.Execute }

func (bashTool) Run(ctx context.Context, env *Env, input json.RawMessage) Result {
	args, res, ok := decodeArgs[bashArgs]("bash", input)
	if !ok {
		return res
	}
	if strings.TrimSpace(args.Command) == "" {
		return Errorf(`invalid arguments for bash: "command" is empty`)
	}
	timeout := bashDefaultTimeout
	if args.Timeout != nil {
		timeout = *args.Timeout
		if timeout <= 0 || timeout > bashMaxTimeout {
			return Errorf(`invalid arguments for bash: "timeout" must be between 1 and %d seconds, got %d`, bashMaxTimeout, timeout)
		}
	}
	ws, res, ok := workspaceOf(env, "bash")
	if !ok {
		return res
	}
	opts := shell.Options{Dir: ws.Dir(), Command: args.Command, OutputCap: OutputCap, Timeout: time.Duration(timeout) * time.Second,
		Env: env.ShellEnv, Sandbox: env.Sandbox}
	if env.Sandbox != nil {
		// Refused now rather than as a failed background job later.
		if err := shell.CheckSandbox(ctx, env.Sandbox); err != nil {
			return Errorf("bash: %v", err)
		}
	}
	chk, err := env.checkCommand(ctx, args.Command, startDir(env, ws))
	if err != nil {
		return Errorf("bash: %v", err)
	}
	if len(chk.ReadOnly) > 0 && opts.Sandbox != nil {
		sb := *opts.Sandbox
		sb.Protected = append(slices.Clip(sb.Protected), chk.ReadOnly...)
		opts.Sandbox = &sb
	}

	if args.RunInBackground {
		if env.Jobs == nil {
			return Errorf("run_in_background is not available to this agent; run the command in the foreground")
		}
		if args.Timeout == nil {
			opts.Timeout = 0
		}
		desc := args.Description
		if desc == "" {
			desc = args.Command
		}
		id := env.Jobs.Start("bash", desc, func(ctx context.Context, out io.Writer) error {
			opts.Stream = out
			opts.OutputCap = 1 // the job keeps the output
			r, err := shell.Run(ctx, opts)
			if chk.After != nil {
				chk.After(context.WithoutCancel(ctx)) // the holder is told; the job's output has no room for a note
			}
			if err != nil {
				return err
			}
			if r.TimedOut {
				return fmt.Errorf("timed out after %ds and was killed", timeout)
			}
			if r.Canceled {
				return ctx.Err()
			}
			return ExitStatus(r.ExitCode)
		})
		res = OK(fmt.Sprintf("Started background job %s: %s\nRead its output with TaskOutput (task_id %q); stop it with TaskStop.", id, desc, id))
		res.Response = BashResponse{BackgroundTaskID: id}
		return withNote(res, chk.Note)
	}

	r, err := runForeground(ctx, env, opts)
	after := ""
	if chk.After != nil {
		after = chk.After(context.WithoutCancel(ctx))
	}
	if err != nil {
		return Errorf("bash: %v", err)
	}
	var b strings.Builder
	b.WriteString(r.Output)
	note := func(s string) {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteString("\n")
		}
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(s)
	}
	switch {
	case r.TimedOut:
		note(fmt.Sprintf("command timed out after %ds; it and every process it started were killed", timeout))
	case r.Canceled:
		note("command was cancelled; it and every process it started were killed")
	case r.ExitCode != 0:
		note(fmt.Sprintf("exit code %d", r.ExitCode))
	case b.Len() == 0:
		b.WriteString("(no output)")
	}
	for _, n := range []string{chk.Note, after} {
		if n != "" {
			note(n)
		}
	}
	return Result{Content: b.String(), IsError: r.TimedOut || r.Canceled || r.ExitCode != 0,
		Response: BashResponse{Stdout: r.Output, Interrupted: r.TimedOut || r.Canceled}}
}

// startDir is where a foreground command starts: the shell session's
// current directory when it runs there, else the workspace.
func startDir(env *Env, ws *Workspace) string {
	if env.Shell != nil && env.Sandbox == nil {
		return env.Shell.Dir()
	}
	return ws.Dir()
}

// checkCommand asks CheckCommand about a command about to run.
func (e *Env) checkCommand(ctx context.Context, command, dir string) (CommandCheck, error) {
	if e == nil || e.CheckCommand == nil {
		return CommandCheck{}, nil
	}
	return e.CheckCommand(ctx, command, dir)
}

// runForeground runs a foreground command in env's shell session when it
// has one, else in a bash of its own.
func runForeground(ctx context.Context, env *Env, opts shell.Options) (shell.Result, error) {
	if env.Shell != nil && env.Sandbox == nil {
		r, err := env.Shell.Run(ctx, opts)
		if !errors.Is(err, shell.ErrSessionBusy) {
			return r, err
		}
		opts.Dir = env.Shell.Dir() // a parallel call starts where the session is
	}
	return shell.Run(ctx, opts)
}
