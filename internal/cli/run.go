package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	assembly "github.com/troupe-dev/troupe/internal/app"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/text"
	"github.com/troupe-dev/troupe/internal/usage"
)

// runFlags are the flags of a headless run (`troupe -p`) and, where they
// apply, of the terminal UI.
type runFlags struct {
	prompt         string
	outputFormat   string
	inputFormat    string
	partial        bool
	model          string
	maxTurns       int
	maxRetries     int
	verbose        bool
	settingsFiles  []string
	settingsInline string // --settings given a JSON object
	continueLatest bool
	resume         string
	claude         claudeFlags
	team           teamFlags
	provider       providerFlags
	web            webFlags
}

func (a *app) addRunFlags(root *cobra.Command) {
	f := &a.run
	fs := root.Flags()
	fs.StringVarP(&f.prompt, "print", "p", "", "run headless on this prompt and print the result")
	fs.StringVar(&f.outputFormat, "output-format", formatText, "output of a headless run: text, json (Claude Code's result object) or stream-json (Claude Code's SDK messages, one per line)")
	fs.StringVar(&f.inputFormat, "input-format", formatText, "input of a headless run: text (the -p prompt) or stream-json (user messages as JSON lines on stdin, one turn of the lead each)")
	fs.BoolVar(&f.partial, "include-partial-messages", false, "with --output-format stream-json, add stream_event lines: the model's streaming events as they come")
	fs.StringVar(&f.model, "model", "", "model name (default "+assembly.DefaultModel+")")
	fs.IntVar(&f.maxTurns, "max-turns", 0, "stop after this many model calls (0: no limit)")
	fs.IntVar(&f.maxRetries, "max-retries", 5, "retries of a failed model call (429, 529, 5xx, broken connections)")
	fs.BoolVarP(&f.verbose, "verbose", "v", false, "show tool calls and results on stderr (text output)")
	fs.StringArrayVar(&f.settingsFiles, "settings", nil, "another settings file, read after every other (its values win)")
	fs.BoolVarP(&f.continueLatest, "continue", "c", false, "carry on the workspace's most recent session (its team, if it still exists) with this prompt")
	fs.StringVarP(&f.resume, "resume", "r", "", "carry on session ID (from a result's session_id), or team ID, with this prompt")
	f.claude.add(fs)
	f.team.add(fs)
	f.provider.add(fs)
	f.web.add(fs, true)
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("unknown command %q; see troupe --help", args[0])
		}
		if cmd.Flags().Changed("print") && strings.TrimSpace(f.prompt) == "" && f.inputFormat != formatStreamJSON {
			return withCode(ExitUsage, errors.New("the -p prompt is empty; say what the team should do (troupe -p \"...\")"))
		}
		if f.prompt == "" && f.inputFormat != formatStreamJSON {
			return a.runTUI(cmd)
		}
		return a.runHeadless(cmd)
	}
}

// errRefused ends a run whose lead's model refused the request.
var errRefused = errors.New("the model refused the request (stop_reason refusal)")

// checkRunFlags refuses contradictory or unknown flag values, and makes
// file and directory arguments absolute.
func (f *runFlags) check(headless bool) error {
	if headless {
		switch f.outputFormat {
		case formatText, formatJSON, formatStreamJSON:
		default:
			return withCode(ExitUsage, fmt.Errorf("--output-format must be text, json or stream-json, not %q", f.outputFormat))
		}
		switch f.inputFormat {
		case formatText, formatStreamJSON:
		default:
			return withCode(ExitUsage, fmt.Errorf("--input-format must be text or stream-json, not %q", f.inputFormat))
		}
		if f.partial && f.outputFormat != formatStreamJSON {
			return withCode(ExitUsage, errors.New("--include-partial-messages needs --output-format stream-json"))
		}
		if f.inputFormat == formatStreamJSON && f.prompt != "" {
			return withCode(ExitUsage, errors.New("--input-format stream-json reads the prompts from stdin; give no -p prompt"))
		}
	}
	if err := f.claude.resolveMode(&f.team); err != nil {
		return err
	}
	var err error
	// --settings takes a file or, as Claude Code's does, a JSON object.
	var files []string
	for _, v := range f.settingsFiles {
		if !strings.HasPrefix(strings.TrimSpace(v), "{") {
			files = append(files, v)
			continue
		}
		if f.settingsInline != "" {
			return withCode(ExitUsage, errors.New("--settings: give at most one JSON object (files may be repeated)"))
		}
		f.settingsInline = v
	}
	if f.settingsFiles, err = checkPaths(files, false, "--settings"); err != nil {
		return err
	}
	if f.claude.addDirs, err = checkPaths(f.claude.addDirs, true, "--add-dir"); err != nil {
		return err
	}
	if m := f.claude.mcpStartup; m != "" && m != "session" && m != "lazy" {
		return withCode(ExitUsage, fmt.Errorf("--mcp-startup %q: want session or lazy", m))
	}
	return nil
}

func (a *app) runHeadless(cmd *cobra.Command) error {
	f := &a.run
	if err := f.check(true); err != nil {
		return err
	}
	if err := f.web.checkBeside(); err != nil {
		return err
	}
	if err := a.canRecord(f.team.teammateMode); err != nil {
		return err
	}
	dir, err := a.Workspace()
	if err != nil {
		return withCode(ExitUsage, err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return withCode(ExitUsage, fmt.Errorf("workspace %s is not a directory", dir))
	}
	provider, base, err := a.buildProvider(f.provider, f.maxRetries)
	if err != nil {
		return err
	}
	provider, finishRecord, err := a.recording(provider, a.record, dir)
	if err != nil {
		return err
	}
	e, err := a.openEnv(dir, a.stderr)
	if err != nil {
		return withCode(ExitError, err)
	}
	defer e.Close()
	target, err := a.findResume(a.ctx, e, f.continueLatest, f.resume)
	if err != nil {
		return err
	}
	rec := &sessionRecord{SessionID: newUUID(), CreatedAt: time.Now().UTC()}
	if target != nil && target.rec != nil {
		rec = target.rec
	}
	prices, err := usage.LoadPrices(dir)
	if err != nil {
		return withCode(ExitError, err)
	}
	out := newRunOutput(outputConfig{Format: f.outputFormat, Partial: f.partial, Verbose: f.verbose, SessionID: rec.SessionID,
		MaxRetries: f.maxRetries, Prices: prices, Stdout: a.stdout, Stderr: a.stderr})
	cfg, err := a.sessionConfig(e, out.tap(provider), f.model, f.maxTurns, &f.team, f.provider)
	if err != nil {
		return withCode(ExitError, err)
	}
	if err := f.claude.apply(e, &cfg); err != nil {
		return err
	}
	if cfg.Pacer, err = a.teamPacer(cfg.TeammateMode); err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(a.ctx)
	defer cancel(nil)
	out.onRefusal = func() { cancel(errRefused) }
	var sess *team.Session
	tl := newTally()
	cfg.Observe = observeWithTeam(func() *team.Session { return sess }, out.observe)
	cfg.OnEvent = func(ev store.Event) {
		tl.observe(ev)
		out.teamEvent(ev)
	}
	cfg.OnDenied = out.denied
	sess, err = team.NewSession(cfg)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	out.team = sess.TeamName
	stopWeb, err := a.webBeside(f.web, e.Store, sess, nil, dir)
	if err != nil {
		sess.Close()
		return err
	}
	defer stopWeb()
	out.init(initInfo{Cwd: dir, Model: modelName(cfg.Model, f.provider), PermissionMode: cfg.PermissionMode,
		Tools: sess.Lead().Config().Tools.Names(), Skills: e.Skills.Names(), APIKeySource: apiKeySource(f.provider)})
	if err := saveSession(e.StateDir, rec); err != nil {
		e.Logger.Warn("save session", "err", err)
	}

	var prompts func(yield func(string, error) bool)
	if f.inputFormat == formatStreamJSON {
		prompts = readUserMessages(a.stdin)
	} else {
		prompts = func(yield func(string, error) bool) { yield(f.prompt, nil) }
	}
	var res *team.Result
	var runErr error
	first := true
	for prompt, perr := range prompts {
		if perr != nil {
			runErr = withCode(ExitUsage, perr)
			break
		}
		start := time.Now()
		out.startTurn()
		if first && target != nil {
			res, runErr = target.run(ctx, e, sess, prompt)
		} else {
			res, runErr = sess.RunHeadless(ctx, prompt)
		}
		first = false
		if out.refused() && (runErr == nil || errors.Is(runErr, context.Canceled)) {
			runErr = errRefused
		}
		out.finish(res, tl, runErr, time.Since(start))
		if runErr != nil {
			break
		}
	}
	if first && runErr == nil {
		runErr = withCode(ExitUsage, errors.New("--input-format stream-json: no user message on stdin"))
	}
	closeErr := sess.Close()
	if res != nil {
		rec.Team = res.Team
	}
	rec.Messages = sess.Lead().Messages()
	if err := saveSession(e.StateDir, rec); err != nil {
		e.Logger.Warn("save session", "err", err)
	}
	if runErr == nil && closeErr != nil {
		runErr = closeErr
	}
	if err := finishRecord(); err != nil && runErr == nil {
		runErr = err
	}
	var ee *exitError
	switch {
	case runErr == nil:
		return nil
	case errors.As(runErr, &ee):
		return runErr
	case errors.Is(runErr, errRefused):
		return withCode(ExitError, runErr)
	case errors.Is(runErr, context.Canceled):
		if res != nil && res.Team != "" {
			return withCode(ExitInterrupted, fmt.Errorf("interrupted; continue with: troupe resume %s", res.Team))
		}
		return withCode(ExitInterrupted, errors.New("interrupted"))
	case errors.Is(runErr, llm.ErrAuth):
		return withCode(ExitNoKey, fmt.Errorf("the model endpoint refused the API key: %v", runErr))
	case errors.Is(runErr, llm.ErrUnavailable):
		return withCode(ExitEndpoint, fmt.Errorf("cannot reach the model endpoint %s: %v", base, runErr))
	default:
		return withCode(ExitError, runErr)
	}
}

// modelName is the lead's model as the init line names it.
func modelName(model string, pf providerFlags) string {
	if model == "" && pf.provider == "anthropic" {
		return assembly.DefaultModel
	}
	return model
}

// apiKeySource says where the key came from, in Claude Code's words.
func apiKeySource(pf providerFlags) string {
	if pf.provider == "anthropic" && os.Getenv("ANTHROPIC_API_KEY") != "" {
		return "ANTHROPIC_API_KEY"
	}
	return "none"
}

// oneLine folds s onto one line, cut to n characters.
var oneLine = text.OneLine
