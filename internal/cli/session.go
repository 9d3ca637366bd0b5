package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/guard"
	"github.com/troupe-dev/troupe/internal/hook"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/memory"
	"github.com/troupe-dev/troupe/internal/pattern"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/secret"
	"github.com/troupe-dev/troupe/internal/settings"
	"github.com/troupe-dev/troupe/internal/shell"
	"github.com/troupe-dev/troupe/internal/skill"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/store/file"
	"github.com/troupe-dev/troupe/internal/subagent"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/teamkey"
	"github.com/troupe-dev/troupe/internal/tool"
)

// teamFlags are the flags that shape a team session.
type teamFlags struct {
	teammateMode   string
	permissionMode string
	delegate       bool
	idleTimeout    time.Duration
	teammateModel  string
}

func (f *teamFlags) add(fs interface {
	StringVar(*string, string, string, string)
	BoolVar(*bool, string, bool, string)
	DurationVar(*time.Duration, string, time.Duration, string)
}) {
	fs.StringVar(&f.teammateMode, "teammate-mode", team.ModeInProcess, "how teammates run: in-process (goroutines) or process (one `troupe agent` process each)")
	fs.StringVar(&f.permissionMode, "permission-mode", "", "the lead's permission mode and the teammates' default: default, acceptEdits, plan, bypassPermissions or delegate (default: the settings' defaultMode, else default: writes and commands not allowed by a rule ask, and are refused headless)")
	fs.BoolVar(&f.delegate, "delegate", false, "limit the lead to management tools (it coordinates, teammates do the work)")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", 0, "an idle teammate exits after this long with nothing to do (0: stays until shut down)")
	fs.StringVar(&f.teammateModel, "teammate-model", "", "the teammates' default model (default: the lead's)")
}

// env is a session's surroundings: state, workspace and what the prompts
// are made of. close releases them.
type env struct {
	dir      string
	stateDir string
	store    *file.Store
	ws       *tool.Workspace
	sections []string
	skills   *skill.Set
	settings *settings.Settings
	rules    *team.Rules
	keys     *teamkey.Keys // the teams' secret keys, outside the workspace
	// extraSettings are --settings files, read after every other file but
	// managed settings.
	extraSettings []string
	logger        *slog.Logger
	logFile       *os.File

	agents *subagent.Catalog // .claude/agents types, for the lead's Task tool
	// snapshot is the settings the session started with; snapshotPath its
	// file, which this process wrote and removes; warn gets what close
	// reports.
	snapshot     *settings.Snapshot
	snapshotPath string
	snapshotSum  string
	warn         io.Writer
}

func (e *env) close() {
	if e.snapshotPath != "" {
		e.reportSettingsChanges()
		os.Remove(e.snapshotPath)
	}
	if e.ws != nil {
		e.ws.Close()
	}
	if e.store != nil {
		e.store.Close()
	}
	if e.logFile != nil {
		e.logFile.Close()
	}
}

// openEnv opens the workspace dir and its state directory, and gathers the
// project memory and skills for the system prompts. Warnings (a bad
// SKILL.md) go to the log file under the state directory and to warn.
func (a *app) openEnv(dir string, warn io.Writer) (*env, error) {
	e := &env{dir: dir, warn: warn, extraSettings: a.run.settingsFiles}
	stateDir, err := a.stateDirFor(dir)
	if err != nil {
		return nil, err
	}
	e.stateDir = stateDir
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, err
	}
	lf, err := os.OpenFile(filepath.Join(stateDir, "troupe.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	e.logFile = lf
	e.logger = slog.New(secret.Handler(slog.NewTextHandler(lf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	// The process groups of running commands, for troupe resume after a
	// crash (shell.KillLeftovers).
	if err := shell.SetRecordDir(filepath.Join(stateDir, "pids")); err != nil {
		e.logger.Warn("record command groups", "err", err)
	}
	if e.store, err = file.Open(stateDir, file.Options{Logger: e.logger}); err != nil {
		e.close()
		return nil, err
	}
	if e.keys, err = teamkey.New(teamkey.Options{StateDir: stateDir}); err != nil {
		e.close()
		return nil, err
	}
	if e.ws, err = tool.OpenWorkspace(dir); err != nil {
		e.close()
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	files, err := memory.Find(dir)
	if err != nil {
		e.logger.Warn("project memory", "err", err)
	}
	if p := memory.Prompt(files); p != "" {
		e.sections = append(e.sections, p)
	}
	set, warnings := skill.Discover(dir, skill.Options{})
	for _, w := range warnings {
		e.logger.Warn("skill skipped", "warning", w.String())
		if warn != nil {
			fmt.Fprintf(warn, "troupe: skill skipped: %s\n", w)
		}
	}
	e.skills = set
	if p := set.Prompt(); p != "" {
		e.sections = append(e.sections, p)
	}
	agents, agentWarnings := subagent.Discover(dir, subagent.Options{})
	for _, w := range agentWarnings {
		e.logger.Warn("agent definition", "warning", w.String())
		if warn != nil {
			fmt.Fprintf(warn, "troupe: agent definition: %s\n", w)
		}
	}
	e.agents = agents
	if p := agents.Prompt(); p != "" {
		e.sections = append(e.sections, p)
	}
	if err := e.loadRules(a, warn); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

// loadRules reads the settings (see package settings for the files and
// their order; a teammate process takes its lead's snapshot instead) into
// the rules the runtime enforces. A broken hook is reported on warn and in
// the log whenever it runs; it never blocks.
func (e *env) loadRules(a *app, warn io.Writer) error {
	s, err := e.loadSettings(a)
	if err != nil {
		return err
	}
	for _, w := range s.Warnings() {
		e.logger.Warn("settings", "warning", w)
		if warn != nil {
			fmt.Fprintf(warn, "troupe: settings: %s\n", w)
		}
	}
	e.settings = s
	policy, err := e.policy(s)
	if err != nil {
		return err
	}
	sandbox, err := e.sandbox(a, s)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	hooks, err := hook.New(hook.Config{Hooks: s.Hooks, Dir: e.dir, Env: envList(s.Env), Report: func(ev hook.Event, r hook.Result) {
		e.logger.Info("hook", "event", ev.Name, "agent", ev.AgentName, "command", r.Hook.Command, "exit", r.ExitCode, "timed_out", r.TimedOut, "ms", r.Duration.Milliseconds())
		if r.Err != nil {
			e.logger.Warn("hook problem", "event", ev.Name, "command", r.Hook.Command, "err", r.Err)
			if warn != nil {
				mu.Lock()
				fmt.Fprintf(warn, "troupe: hook %s: %v\n", ev.Name, r.Err)
				mu.Unlock()
			}
		}
	}, Show: func(ev hook.Event, text string) {
		// What a hook says to the user (systemMessage, stopReason, a
		// dropped prompt's reason): shown, never given to the model.
		e.logger.Info("hook message", "event", ev.Name, "agent", ev.AgentName, "text", text)
		if warn != nil {
			mu.Lock()
			fmt.Fprintf(warn, "troupe: hook %s: %s\n", ev.Name, text)
			mu.Unlock()
		}
	}})
	if err != nil {
		return err
	}
	for _, w := range hooks.Warnings() {
		e.logger.Warn("hook skipped", "warning", w)
		if warn != nil {
			fmt.Fprintf(warn, "troupe: %s\n", w)
		}
	}
	g, err := guard.New(s.Words(), settings.Strings(s.GuardExempt))
	if err != nil {
		return err
	}
	pats := pattern.Load(filepath.Join(e.dir, ".troupe", "patterns"))
	for _, w := range pats.Warnings {
		e.logger.Warn("pattern skipped", "warning", w)
		if warn != nil {
			fmt.Fprintf(warn, "troupe: pattern skipped: %s\n", w)
		}
	}
	e.rules = &team.Rules{
		Policy: policy, Hooks: hooks, Guard: g, Patterns: pats,
		History:        pattern.NewHistory(filepath.Join(e.stateDir, "history.jsonl")),
		DefaultMode:    s.DefaultMode.Value,
		DefaultPattern: s.DefaultPattern.Value,
		TeammateModel:  s.TeammateModel.Value,
		StateDir:       e.stateDir,
		ShellEnv:       shell.Environ(os.Environ(), s.Env),
		Sandbox:        sandbox,
		Watch:          team.NewFileWatch(e.watchedPaths(s)),
		OnProtectedChange: func(paths []string) {
			for _, p := range paths {
				e.logger.Warn("protected file changed by a bash command", "path", p)
				if warn != nil {
					mu.Lock()
					fmt.Fprintf(warn, "troupe: protected file %s was changed by a bash command during the run; not applied to it (review it)\n", p)
					mu.Unlock()
				}
			}
		},
	}
	return nil
}

// watchedPaths are the protected files whose change by a bash command is
// flagged after the fact (the permission engine refuses the writes it can
// read; the sandbox, when on, refuses the rest): the configuring files and
// git's config and hooks. .troupe is troupe's own, written all the time.
func (e *env) watchedPaths(s *settings.Settings) []string {
	out := s.ProtectedPaths(e.dir)
	out = append(out, filepath.Join(e.dir, ".mcp.json"), filepath.Join(e.dir, ".git", "config"), filepath.Join(e.dir, ".git", "hooks"))
	if hooks, err := os.ReadDir(filepath.Join(e.dir, ".git", "hooks")); err == nil {
		for _, h := range hooks {
			out = append(out, filepath.Join(e.dir, ".git", "hooks", h.Name()))
		}
	}
	return out
}

// policy is the permission policy of settings s. The rules that bind the
// agents are theirs to read, never to write: settings files, hook scripts,
// agent and command definitions, and the teams' keys are protected (the
// built-in set covers .troupe, .git/hooks, …).
func (e *env) policy(s *settings.Settings) (*permission.Policy, error) {
	policy, err := permission.FromSettings(e.dir, s)
	if err != nil {
		return nil, err
	}
	for _, p := range e.protectedPaths(s) {
		policy.Protect(p, filepath.Join(p, "**"))
	}
	return policy, nil
}

// protectedPaths are the files that configure the agents, beside the
// permission engine's built-in set.
func (e *env) protectedPaths(s *settings.Settings) []string {
	out := s.ProtectedPaths(e.dir)
	if e.keys != nil {
		if dir, err := e.keys.Dir(); err == nil && dir != "" {
			out = append(out, dir)
		}
	}
	return out
}

// sandbox is the bash sandbox when --sandbox or the settings' sandbox key
// asks for one: the workspace writable, troupe's own and the configuring
// files read-only, credentials and the teams' keys hidden, the network off
// unless the settings allow domains. Asked for and unavailable, it is an
// error: commands never silently run outside it.
func (e *env) sandbox(a *app, s *settings.Settings) (*shell.Sandbox, error) {
	if !a.sandbox && !s.Sandbox.Enabled {
		return nil, nil
	}
	home, _ := os.UserHomeDir()
	sb := &shell.Sandbox{
		Writable:  append([]string{e.dir}, absPaths(e.dir, home, s.Sandbox.AllowWrite)...),
		Protected: append(append(shell.ProtectedPaths(e.dir), e.protectedPaths(s)...), absPaths(e.dir, home, s.Sandbox.DenyWrite)...),
		Hidden:    append(shell.HiddenPaths(home), absPaths(e.dir, home, s.Sandbox.DenyRead)...),
		Network:   len(s.Sandbox.AllowedDomains) > 0,
	}
	if e.keys != nil {
		if dir, err := e.keys.Dir(); err == nil && dir != "" {
			sb.Hidden = append(sb.Hidden, dir)
		}
	}
	if err := shell.CheckSandbox(a.ctx, sb); err != nil {
		return nil, fmt.Errorf("the bash sandbox was asked for (--sandbox or the settings' sandbox.enabled) but cannot run: %w", err)
	}
	return sb, nil
}

// absPaths makes settings paths absolute: ~ is the home directory, a
// relative path is under the workspace.
func absPaths(ws, home string, paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		switch {
		case p == "~" || strings.HasPrefix(p, "~/"):
			p = filepath.Join(home, strings.TrimPrefix(p, "~"))
		case !filepath.IsAbs(p):
			p = filepath.Join(ws, p)
		}
		out = append(out, filepath.Clean(p))
	}
	return out
}

// envList is the settings' env as K=V strings, in a stable order.
func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// stateDirFor is the state directory of workspace dir.
func (a *app) stateDirFor(dir string) (string, error) {
	if a.stateDir != "" || os.Getenv("TROUPE_HOME") != "" {
		return a.StateDir()
	}
	return filepath.Join(dir, ".troupe"), nil
}

// sessionConfig builds a team session's configuration.
func (a *app) sessionConfig(e *env, provider llm.Provider, model string, maxTurns int, f *teamFlags, pf providerFlags) (team.Config, error) {
	cfg := team.Config{
		Store: e.store, Provider: provider, Workspace: e.ws, Model: model, TeammateModel: f.teammateModel,
		TeammateMode: f.teammateMode, IdleTimeout: f.idleTimeout, MaxTurns: maxTurns,
		PermissionMode: f.permissionMode, Delegate: f.delegate, Sections: e.sections, Skills: e.skills, Logger: e.logger,
		Rules: e.rules, AgentStderr: e.logFile, Keys: e.keys,
	}
	cfg.Agents = e.agents
	if cfg.Model == "" && e.settings != nil {
		cfg.Model = e.settings.LeadModel.Value
		if id, ok := subagent.ModelAliases[cfg.Model]; ok {
			cfg.Model = id // Claude Code's "model": "opus"
		}
	}
	if e.rules != nil {
		// Prompt hooks ask the lead's model.
		e.rules.Hooks.SetAsker(hook.ProviderAsker(provider, cfg.Model))
	}
	if cfg.PermissionMode == "" && e.settings != nil {
		cfg.PermissionMode = e.settings.DefaultMode.Value
	}
	if cfg.PermissionMode == "" {
		// Safe by default, as Claude Code: writes and commands not covered
		// by an allow rule ask (and are refused headless).
		cfg.PermissionMode = team.PermDefault
	}
	if cfg.TeammateModel == "" {
		cfg.TeammateModel = model
	}
	if f.teammateMode == team.ModeProcess {
		exe, err := os.Executable()
		if err != nil {
			return cfg, err
		}
		// The team appends each teammate's --workspace (its Placement).
		cfg.AgentCommand = []string{exe, "agent", "--state-dir", e.stateDir}
		if e.snapshotPath != "" {
			cfg.AgentCommand = append(cfg.AgentCommand, "--settings-snapshot", e.snapshotPath, "--settings-snapshot-sha256", e.snapshotSum)
		}
		pargs, penv := agentProviderArgs(pf)
		cfg.AgentCommand = append(cfg.AgentCommand, pargs...)
		cfg.AgentEnv = append(cfg.AgentEnv, penv...)
		if maxTurns > 0 {
			cfg.AgentCommand = append(cfg.AgentCommand, "--max-turns", fmt.Sprint(maxTurns))
		}
		if f.idleTimeout > 0 {
			cfg.AgentCommand = append(cfg.AgentCommand, "--idle-timeout", f.idleTimeout.String())
		}
		if f.teammateModel != "" {
			cfg.AgentCommand = append(cfg.AgentCommand, "--model", f.teammateModel)
		}
		if a.sandbox {
			cfg.AgentCommand = append(cfg.AgentCommand, "--sandbox")
		}
	}
	return cfg, nil
}

// agentCmd is `troupe agent --team T --name N`: one teammate as its own
// process, sharing the state directory with its team.
func (a *app) agentCmd() *cobra.Command {
	var (
		teamName, name, model string
		maxTurns, maxRetries  int
		keyFD                 int
		keyFile               string
		idleTimeout           time.Duration
		pf                    providerFlags
		allowed, disallowed   []string
	)
	cmd := &cobra.Command{
		Use:   "agent --team T --name N",
		Short: "Run one teammate as its own process (process mode)",
		Long: `Runs the teammate N of team T, which must be on the team's roster, until it is
shut down. The lead starts these itself with --teammate-mode process; they can
also be started by hand, on any machine that shares the state directory.

The team's messages are signed with its secret key. The lead hands the key to
the processes it starts on an inherited descriptor (--key-fd); started by
hand, the agent reads the team's key file itself, from
$XDG_STATE_HOME/troupe/keys (default ~/.local/state/troupe/keys), or the copy
--key-file names (on another machine), and refuses to run without one:
unsigned, its answers would be refused as forgeries, and it could not tell the
lead's answers from forged ones.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if teamName == "" || name == "" {
				return withCode(ExitUsage, errors.New("--team and --name are required"))
			}
			dir, err := a.Workspace()
			if err != nil {
				return withCode(ExitUsage, err)
			}
			provider, _, err := a.buildProvider(pf, maxRetries)
			if err != nil {
				return err
			}
			e, err := a.openEnv(dir, nil)
			if err != nil {
				return withCode(ExitError, err)
			}
			defer e.close()
			if err := applyFlagRules(e, splitRules(allowed), splitRules(disallowed)); err != nil {
				return err
			}
			t, err := e.store.Team(a.ctx, teamName)
			if err != nil {
				return withCode(ExitError, err)
			}
			var key []byte
			switch {
			case keyFD >= 0:
				key, err = teamkey.ReadFD(keyFD)
			case keyFile != "":
				key, err = teamkey.ReadFile(keyFile)
			default:
				key, err = e.keys.Load(t.Name())
			}
			if errors.Is(err, teamkey.ErrNoKey) {
				err = fmt.Errorf("%w; start teammates through the lead (--teammate-mode process, troupe resume %s), or give a copy of the key with --key-file", err, t.Name())
			}
			if err != nil {
				return withCode(ExitError, fmt.Errorf("team key: %w", err))
			}
			if e.rules != nil {
				e.rules.Hooks.SetAsker(hook.ProviderAsker(provider, model))
			}
			err = team.RunMember(a.ctx, team.MemberConfig{
				Team: t, Name: name, Key: key, Provider: provider, Workspace: e.ws, DefaultModel: model,
				IdleTimeout: idleTimeout, MaxTurns: maxTurns, Sections: e.sections, Rules: e.rules, Logger: e.logger,
			})
			if err != nil && !errors.Is(err, context.Canceled) {
				return withCode(ExitError, err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&teamName, "team", "", "the team")
	cmd.Flags().StringVar(&name, "name", "", "the teammate's name")
	cmd.Flags().StringVar(&model, "model", "", "the model when the roster names none")
	cmd.Flags().StringVar(&a.settings.snapshot, "settings-snapshot", "", "the lead's settings snapshot, used instead of reading the settings files")
	cmd.Flags().StringVar(&a.settings.snapshotSum, "settings-snapshot-sha256", "", "the SHA-256 the settings snapshot must have")
	cmd.Flags().IntVar(&maxTurns, "max-turns", 0, "bound the model calls of each turn (0: none)")
	cmd.Flags().IntVar(&maxRetries, "max-retries", 5, "retries of a failed model call")
	cmd.Flags().IntVar(&keyFD, "key-fd", -1, "read the team's key from this inherited file descriptor (the lead passes it); default: the team's key file")
	cmd.Flags().StringVar(&keyFile, "key-file", "", "read the team's key from this file (mode 0600; a copy of the team's key on another machine)")
	cmd.Flags().DurationVar(&idleTimeout, "idle-timeout", 0, "exit after this long idle (0: stay until shut down)")
	cmd.Flags().StringArrayVar(&allowed, "allowedTools", nil, "permission rules to allow (the lead's --allowedTools)")
	cmd.Flags().StringArrayVar(&disallowed, "disallowedTools", nil, "permission rules to deny (the lead's --disallowedTools)")
	cmd.Flags().StringArrayVar(&a.run.settingsFiles, "settings", nil, "another settings file (the lead's --settings)")
	pf.add(cmd.Flags())
	return cmd
}

// tally counts a team run from its journal events as they happen, so the
// counts survive TeamDelete.
type tally struct {
	mu        sync.Mutex
	teams     []string
	tasks     map[string]bool
	completed map[string]bool
	teammates map[string]bool
	messages  int
}

func newTally() *tally {
	return &tally{tasks: map[string]bool{}, completed: map[string]bool{}, teammates: map[string]bool{}}
}

func (t *tally) observe(e store.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	str := e.Field
	switch e.Type {
	case "team_create":
		t.teams = append(t.teams, e.Team)
	case "task_create":
		t.tasks[e.Team+"#"+str("task")] = true
	case "complete":
		t.completed[e.Team+"#"+str("task")] = true
	case "spawn":
		t.teammates[e.Team+"/"+str("member")] = true
	case "send":
		if typ := str("msg_type"); typ != store.TypeIdleNotification {
			t.messages++
		}
	}
}

func (t *tally) summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.teams) == 0 {
		return ""
	}
	return fmt.Sprintf("team %s: %d/%d tasks completed, %d teammates, %d messages",
		strings.Join(t.teams, ", "), len(t.completed), len(t.tasks), len(t.teammates), t.messages)
}

// observeWithTeam fills in the team of the lead's events (the lead has no
// team until TeamCreate).
func observeWithTeam(sess func() *team.Session, next func(agent.Event)) func(agent.Event) {
	return func(ev agent.Event) {
		if ev.Team == "" {
			if s := sess(); s != nil {
				ev.Team = s.TeamName()
			}
		}
		next(ev)
	}
}
