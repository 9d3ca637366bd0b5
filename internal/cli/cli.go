// Package cli is troupe's command line: cobra commands that parse flags and
// call into app (which assembles stores, providers, rules and hooks), team,
// agent and store. It holds no behaviour of its own beyond wiring and output
// formatting, and must never name a concrete store or provider (store/file,
// llm/anthropic, llm/openai): those are app's.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"github.com/spf13/cobra"

	assembly "github.com/troupe-dev/troupe/internal/app"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/replay/cassette"
	"github.com/troupe-dev/troupe/internal/replay/pace"
	"github.com/troupe-dev/troupe/internal/secret"
)

// Exit codes, documented in README.md.
const (
	ExitOK       = 0
	ExitError    = 1 // the run failed (model error, tool setup, …)
	ExitUsage    = 2 // bad flags or arguments
	ExitNoKey    = 3 // no API key configured
	ExitEndpoint = 4 // the model endpoint could not be reached
)

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func withCode(code int, err error) error { return &exitError{code: code, err: err} }

// appError gives an error of package app the exit code of its kind.
func appError(err error) error {
	switch assembly.KindOf(err) {
	case assembly.KindUsage:
		return withCode(ExitUsage, err)
	case assembly.KindNoKey:
		return withCode(ExitNoKey, err)
	default:
		return withCode(ExitError, err)
	}
}

// app holds what every command shares: streams and global flags.
type app struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer // redacting (secret.Writer)
	stderr io.Writer // redacting (secret.Writer)
	// rawStdout is stdout as given, for the terminal UI, which needs the
	// terminal itself and shows only what its user may see.
	rawStdout io.Writer

	workspace string     // --workspace
	stateDir  string     // --state-dir (default <workspace>/.troupe, or $TROUPE_HOME)
	store     storeFlags // --store, --store-token

	// settings are --settings and troupe agent's --settings-snapshot.
	settings settingsFlags
	// sandbox is --sandbox: every bash command runs in bubblewrap.
	sandbox bool

	run    runFlags // the root command's headless-run flags
	record string   // --record: the cassette to write

	// args is the command line (for --record's header); providerOverride
	// replaces every model provider and pacerOverride paces the team
	// (troupe replay).
	args             []string
	providerOverride llm.Provider
	pacerOverride    *pace.Pacer
	// demoCache is troupe demo's prompt cache switch for its fake API.
	demoCache cacheFlags
	// demoWeb is troupe demo's --web: the dashboard beside the story.
	demoWeb webFlags
	// demoIsolation is troupe demo's --isolation.
	demoIsolation string
	// recorder is the cassette --record writes, once the run has opened it.
	recorder *cassette.Recorder
}

// Workspace returns the absolute workspace directory.
func (a *app) Workspace() (string, error) {
	dir := a.workspace
	if dir == "" {
		var err error
		if dir, err = os.Getwd(); err != nil {
			return "", err
		}
	}
	return filepath.Abs(dir)
}

// StateDir returns the absolute state directory (.troupe of the workspace
// unless overridden).
func (a *app) StateDir() (string, error) {
	if a.stateDir != "" {
		return filepath.Abs(a.stateDir)
	}
	if env := os.Getenv("TROUPE_HOME"); env != "" {
		return filepath.Abs(env)
	}
	ws, err := a.Workspace()
	if err != nil {
		return "", err
	}
	return filepath.Join(ws, ".troupe"), nil
}

// Main runs troupe with args and returns the process exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// Every key troupe can be handed is known before anything is written:
	// stdout and stderr (stream-json, text, errors) never show one.
	secret.RegisterEnviron(os.Environ())
	raw := stdout
	stdout, stderr = secret.Writer(stdout), secret.Writer(stderr)
	a := &app{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, rawStdout: raw, args: args}
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintf(stderr, "troupe: %v\n", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return ExitUsage
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "troupe",
		Short:         "Run teams of LLM coding agents",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       "set", // makes cobra add --version; the template says it all
	}
	root.SetVersionTemplate(versionText())
	root.PersistentFlags().StringVar(&a.workspace, "workspace", "", "workspace directory (default: the current directory)")
	root.PersistentFlags().StringVar(&a.stateDir, "state-dir", "", "state directory (default: <workspace>/.troupe, or $TROUPE_HOME)")
	root.PersistentFlags().BoolVar(&a.sandbox, "sandbox", false, "run every bash command in a bubblewrap sandbox: the workspace writable, troupe's and the settings' files read-only, credentials hidden, no network (settings: sandbox.enabled)")
	root.PersistentFlags().StringVar(&a.record, "record", "", "write every model request and response of the run to this cassette (replay it with troupe replay)")
	a.addStoreFlags(root)
	a.addRunFlags(root)

	bench := &cobra.Command{Use: "bench", Short: "Measure the runtime itself and print JSON figures"}
	bench.AddCommand(a.benchTurnCmd(), a.benchStoreCmd(), a.benchTeamCmd(), a.benchWebCmd(), a.benchAgentStartCmd())
	root.AddCommand(bench, a.fakeAPICmd(), a.demoCmd(), a.agentCmd(), a.toolsCmd(), a.hooksCmd(), a.patternsCmd(), a.replayCmd(), a.usageCmd(), a.budgetCmd(), a.resumeCmd(), a.webCmd())
	root.AddCommand(a.storeCmds()...)
	root.AddCommand(a.mcpCmd(), a.hubCmd())
	// --record means something only where troupe talks to a model from a
	// fresh start: a run (-p or the UI) and the demo.
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if cmd.Name() != "hub" {
			// Only the hub runs a NATS server, whose monitoring the
			// sampler feeds.
			quietIdleProcess()
		}
		// Pinned: a GOMAXPROCS the runtime chose itself is checked against
		// the cgroup's CPU limit every second, which wakes an idle lead or
		// teammate process (and the runtime's monitor) once a second for
		// good; one set by hand is not.
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
		if a.record != "" && cmd != root && cmd.Name() != "demo" {
			return withCode(ExitUsage, fmt.Errorf("--record works with a run (troupe -p, or the terminal UI) and with troupe demo, not with troupe %s", cmd.Name()))
		}
		return nil
	}
	return root
}
