package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/guard"
	"github.com/troupe-dev/troupe/internal/hook"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/memory"
	"github.com/troupe-dev/troupe/internal/pattern"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/persona"
	"github.com/troupe-dev/troupe/internal/secret"
	"github.com/troupe-dev/troupe/internal/settings"
	"github.com/troupe-dev/troupe/internal/shell"
	"github.com/troupe-dev/troupe/internal/skill"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/subagent"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/teamkey"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// Options are what a session's surroundings are opened from: the choices
// of the command line.
type Options struct {
	// Dir is the absolute workspace directory.
	Dir string
	// StateDir is the state directory (default Dir/.troupe).
	StateDir string
	// Store is the URL of the store (default file:StateDir).
	Store string
	// Warn gets the warnings a person should see (a bad SKILL.md, a
	// broken hook); nil sends them to the log only.
	Warn io.Writer
	// Settings say where the settings come from.
	Settings SettingsSource
	// Sandbox is --sandbox: every bash command runs in bubblewrap.
	Sandbox bool
	// MCPConfig are --mcp-config values: files or JSON objects with
	// mcpServers, read after .mcp.json and the settings.
	MCPConfig []string
	// MCPLazy is --mcp-startup lazy: a server whose tools are known from an
	// earlier session starts at its first call, not with the session.
	MCPLazy bool
}

// SettingsSource says where a session's settings come from.
type SettingsSource struct {
	// Flag is --settings given as a file or a JSON object, ranked above
	// every file but managed settings.
	Flag string
	// Extra are more --settings files, read after every other file but
	// managed settings.
	Extra []string
	// Snapshot is troupe agent's --settings-snapshot: the lead's snapshot,
	// loaded instead of the files, so that a teammate process runs on the
	// settings its lead started with; SnapshotSum is its SHA-256, so that
	// a snapshot rewritten on disk meanwhile is refused.
	Snapshot, SnapshotSum string
}

// Env is a session's surroundings: state, workspace and what the prompts
// are made of. Close releases them.
type Env struct {
	Dir       string
	StateDir  string
	Store     store.Store
	Workspace *tool.Workspace
	Sections  []string
	Skills    *skill.Set
	Settings  *settings.Settings
	Rules     *team.Rules
	Keys      *teamkey.Keys // the teams' secret keys, outside the workspace
	// ExtraSettings are --settings files, read after every other file but
	// managed settings.
	ExtraSettings []string
	Logger        *slog.Logger
	LogFile       *os.File

	Agents *subagent.Catalog // .claude/agents types, for the lead's Task tool
	// snapshot is the settings the session started with; snapshotPath its
	// file, which this process wrote and removes; warn gets what close
	// reports.
	snapshot     *settings.Snapshot
	snapshotPath string
	snapshotSum  string
	warn         io.Writer

	mcp *mcpServers // nil: no MCP server configured

	ctx  context.Context
	opts Options
}

// Close releases what OpenEnv opened, and reports the settings changed
// during the session.
func (e *Env) Close() {
	e.mcp.close()
	if e.snapshotPath != "" {
		e.reportSettingsChanges()
		os.Remove(e.snapshotPath)
	}
	if e.Workspace != nil {
		e.Workspace.Close()
	}
	if e.Store != nil {
		e.Store.Close()
	}
	if e.LogFile != nil {
		e.LogFile.Close()
	}
}

// OpenEnv opens the workspace opts.Dir and its state directory, and
// gathers the project memory and skills for the system prompts. Warnings (a
// bad SKILL.md) go to the log file under the state directory and to
// opts.Warn.
func OpenEnv(ctx context.Context, opts Options) (*Env, error) {
	dir, warn := opts.Dir, opts.Warn
	e := &Env{Dir: dir, warn: warn, ExtraSettings: opts.Settings.Extra, ctx: ctx, opts: opts}
	stateDir := opts.StateDir
	if stateDir == "" {
		stateDir = filepath.Join(dir, ".troupe")
	}
	e.StateDir = stateDir
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, err
	}
	lf, err := os.OpenFile(filepath.Join(stateDir, "troupe.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	e.LogFile = lf
	e.Logger = slog.New(secret.Handler(slog.NewTextHandler(lf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	// The process groups of running commands, for troupe resume after a
	// crash (shell.KillLeftovers).
	if err := shell.SetRecordDir(filepath.Join(stateDir, "pids")); err != nil {
		e.Logger.Warn("record command groups", "err", err)
	}
	storeURL := opts.Store
	if storeURL == "" {
		storeURL = "file:" + stateDir
	}
	if e.Store, err = OpenStore(ctx, storeURL, StoreLogger(e.Logger)); err != nil {
		e.Close()
		return nil, err
	}
	if e.Keys, err = teamkey.New(teamkey.Options{StateDir: stateDir}); err != nil {
		e.Close()
		return nil, err
	}
	if e.Workspace, err = tool.OpenWorkspace(dir); err != nil {
		e.Close()
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	files, err := memory.Find(dir)
	if err != nil {
		e.Logger.Warn("project memory", "err", err)
	}
	if p := memory.Prompt(files); p != "" {
		e.Sections = append(e.Sections, p)
	}
	set, warnings := skill.Discover(dir, skill.Options{})
	for _, w := range warnings {
		e.Logger.Warn("skill skipped", "warning", w.String())
		if warn != nil {
			fmt.Fprintf(warn, "troupe: skill skipped: %s\n", w)
		}
	}
	e.Skills = set
	if p := set.Prompt(); p != "" {
		e.Sections = append(e.Sections, p)
	}
	agents, agentWarnings := subagent.Discover(dir, subagent.Options{})
	for _, w := range agentWarnings {
		e.Logger.Warn("agent definition", "warning", w.String())
		if warn != nil {
			fmt.Fprintf(warn, "troupe: agent definition: %s\n", w)
		}
	}
	e.Agents = agents
	if p := agents.Prompt(); p != "" {
		e.Sections = append(e.Sections, p)
	}
	if err := e.loadRules(warn); err != nil {
		e.Close()
		return nil, err
	}
	e.openMCP(warn)
	return e, nil
}

// loadRules reads the settings (see package settings for the files and
// their order; a teammate process takes its lead's snapshot instead) into
// the rules the runtime enforces. A broken hook is reported on warn and in
// the log whenever it runs; it never blocks.
func (e *Env) loadRules(warn io.Writer) error {
	s, err := e.loadSettings()
	if err != nil {
		return err
	}
	for _, w := range s.Warnings() {
		e.Logger.Warn("settings", "warning", w)
		if warn != nil {
			fmt.Fprintf(warn, "troupe: settings: %s\n", w)
		}
	}
	e.Settings = s
	policy, err := e.policy(s)
	if err != nil {
		return err
	}
	sandbox, err := e.sandbox(s)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	hooks, err := hook.New(hook.Config{Hooks: s.Hooks, Dir: e.Dir, Env: envList(s.Env), Report: func(ev hook.Event, r hook.Result) {
		e.Logger.Info("hook", "event", ev.Name, "agent", ev.AgentName, "command", r.Hook.Command, "exit", r.ExitCode, "timed_out", r.TimedOut, "ms", r.Duration.Milliseconds())
		if r.Err != nil {
			e.Logger.Warn("hook problem", "event", ev.Name, "command", r.Hook.Command, "err", r.Err)
			if warn != nil {
				mu.Lock()
				fmt.Fprintf(warn, "troupe: hook %s: %v\n", ev.Name, r.Err)
				mu.Unlock()
			}
		}
	}, Show: func(ev hook.Event, text string) {
		// What a hook says to the user (systemMessage, stopReason, a
		// dropped prompt's reason): shown, never given to the model.
		e.Logger.Info("hook message", "event", ev.Name, "agent", ev.AgentName, "text", text)
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
		e.Logger.Warn("hook skipped", "warning", w)
		if warn != nil {
			fmt.Fprintf(warn, "troupe: %s\n", w)
		}
	}
	g, err := guard.New(s.Words(), settings.Strings(s.GuardExempt))
	if err != nil {
		return err
	}
	pats := pattern.Load(filepath.Join(e.Dir, ".troupe", "patterns"))
	for _, w := range pats.Warnings {
		e.Logger.Warn("pattern skipped", "warning", w)
		if warn != nil {
			fmt.Fprintf(warn, "troupe: pattern skipped: %s\n", w)
		}
	}
	// Seed 004's default pattern: troupe's settings, else its
	// .claude/team-themes/config.json, else fixed-theme.
	themeCfg, err := pattern.ReadConfig(e.Dir)
	if err != nil {
		e.Logger.Warn("team patterns config skipped", "err", err)
		if warn != nil {
			fmt.Fprintf(warn, "troupe: %v (skipped)\n", err)
		}
	}
	defPattern := pattern.DefaultChoice(s.DefaultPattern.Value, s.DefaultPattern.Source.Path, themeCfg).Name
	themes := persona.Load(filepath.Join(e.Dir, filepath.FromSlash(persona.Dir)))
	for _, w := range themes.Warnings {
		e.Logger.Warn("theme skipped", "warning", w)
		if warn != nil {
			fmt.Fprintf(warn, "troupe: %s\n", w)
		}
	}
	e.Rules = &team.Rules{
		Policy: policy, Hooks: hooks, Guard: g, Patterns: pats, Themes: themes,
		History:        persona.NewHistory(persona.DefaultHistoryPath()),
		DefaultMode:    s.DefaultMode.Value,
		DefaultPattern: defPattern,
		TeammateModel:  s.TeammateModel.Value,
		StateDir:       e.StateDir,

		TeamRules: team.TeamRules{
			MaxCoordinationShare: coordinationShare(s.MaxCoordinationShare.Value),
			Leases:               leaseMode(s.Leases.Value),
		},
		ShellRules: team.ShellRules{
			ShellEnv: shell.Environ(os.Environ(), s.Env),
			Sandbox:  sandbox,
			Watch:    team.NewFileWatch(e.watchedPaths(s)),
			OnProtectedChange: func(paths []string) {
				for _, p := range paths {
					e.Logger.Warn("protected file changed by a bash command", "path", p)
					if warn != nil {
						mu.Lock()
						fmt.Fprintf(warn, "troupe: protected file %s was changed by a bash command during the run; not applied to it (review it)\n", p)
						mu.Unlock()
					}
				}
			},
		},
	}
	return nil
}

// watchedPaths are the protected files whose change by a bash command is
// flagged after the fact (the permission engine refuses the writes it can
// read; the sandbox, when on, refuses the rest): the configuring files and
// git's config and hooks. .troupe is troupe's own, written all the time.
func (e *Env) watchedPaths(s *settings.Settings) []string {
	out := s.ProtectedPaths(e.Dir)
	out = append(out, filepath.Join(e.Dir, ".mcp.json"), filepath.Join(e.Dir, ".git", "config"), filepath.Join(e.Dir, ".git", "hooks"))
	if hooks, err := os.ReadDir(filepath.Join(e.Dir, ".git", "hooks")); err == nil {
		for _, h := range hooks {
			out = append(out, filepath.Join(e.Dir, ".git", "hooks", h.Name()))
		}
	}
	return out
}

// policy is the permission policy of settings s. The rules that bind the
// agents are theirs to read, never to write: settings files, hook scripts,
// agent and command definitions, and the teams' keys are protected (the
// built-in set covers .troupe, .git/hooks, …).
func (e *Env) policy(s *settings.Settings) (*permission.Policy, error) {
	policy, err := permission.FromSettings(e.Dir, s)
	if err != nil {
		return nil, err
	}
	for _, p := range e.protectedPaths(s) {
		policy.Protect(p, filepath.Join(p, "**"))
	}
	return policy, nil
}

// AddFlagRules adds the rules of --allowedTools and --disallowedTools to
// the settings' allow and deny lists (source "flag") and rebuilds the
// policy from them. A malformed rule is a KindUsage *Error.
func (e *Env) AddFlagRules(allow, deny []string) error {
	if len(allow) == 0 && len(deny) == 0 {
		return nil
	}
	add := func(list *[]settings.Rule, rules []string, flag string) error {
		for _, r := range rules {
			if _, err := permission.ParseRule(r); err != nil {
				return usageError(fmt.Errorf("%s: %w", flag, err))
			}
			*list = append(*list, settings.Rule{Rule: r, Source: settings.Source{Scope: settings.ScopeFlag, Path: flag}})
		}
		return nil
	}
	if err := add(&e.Settings.Allow, allow, "--allowedTools"); err != nil {
		return err
	}
	if err := add(&e.Settings.Deny, deny, "--disallowedTools"); err != nil {
		return err
	}
	pol, err := e.policy(e.Settings)
	if err != nil {
		return usageError(err)
	}
	e.Rules.Policy = pol
	return nil
}

// protectedPaths are the files that configure the agents, beside the
// permission engine's built-in set.
func (e *Env) protectedPaths(s *settings.Settings) []string {
	out := s.ProtectedPaths(e.Dir)
	if e.Keys != nil {
		if dir, err := e.Keys.Dir(); err == nil && dir != "" {
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
func (e *Env) sandbox(s *settings.Settings) (*shell.Sandbox, error) {
	if !e.opts.Sandbox && !s.Sandbox.Enabled {
		return nil, nil
	}
	home, _ := os.UserHomeDir()
	sb := &shell.Sandbox{
		Writable:  append([]string{e.Dir}, absPaths(e.Dir, home, s.Sandbox.AllowWrite)...),
		Protected: append(append(shell.ProtectedPaths(e.Dir), e.protectedPaths(s)...), absPaths(e.Dir, home, s.Sandbox.DenyWrite)...),
		Hidden:    append(shell.HiddenPaths(home), absPaths(e.Dir, home, s.Sandbox.DenyRead)...),
		Network:   len(s.Sandbox.AllowedDomains) > 0,
	}
	if e.Keys != nil {
		if dir, err := e.Keys.Dir(); err == nil && dir != "" {
			sb.Hidden = append(sb.Hidden, dir)
		}
	}
	if err := shell.CheckSandbox(e.ctx, sb); err != nil {
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

// TeamOptions shape a team session: the command line's team flags.
type TeamOptions struct {
	TeammateMode   string // in-process or process
	PermissionMode string // "": the settings' defaultMode, else default
	Delegate       bool
	IdleTimeout    time.Duration
	TeammateModel  string
	// Isolation and MergeMode are --isolation and --merge-mode ("": the
	// settings' team.isolation and team.mergeMode).
	Isolation string
	MergeMode string
	// Remote is --remote: the git remote teammates on other machines
	// clone ("": the checkout's origin, with a shared store).
	Remote string
}

// SessionConfig builds a team session's configuration.
func (e *Env) SessionConfig(provider llm.Provider, model string, maxTurns int, f TeamOptions, pf ProviderChoice) (team.Config, error) {
	cfg := team.Config{
		Store: e.Store, Provider: provider, Workspace: e.Workspace, Rules: e.Rules, Keys: e.Keys,
		Limits:    team.Limits{Model: model, TeammateModel: f.TeammateModel, MaxTurns: maxTurns, IdleTimeout: f.IdleTimeout},
		Prompts:   team.Prompts{Sections: e.Sections, Skills: e.Skills, Agents: e.Agents, Tools: e.MCPTools(e.ctx)},
		Modes:     team.Modes{PermissionMode: f.PermissionMode, Delegate: f.Delegate, TeammateMode: f.TeammateMode},
		Processes: team.Processes{AgentStderr: e.LogFile},
		Observers: team.Observers{Logger: e.Logger},
	}
	if cfg.Model == "" && e.Settings != nil {
		cfg.Model = e.Settings.LeadModel.Value
		if id, ok := subagent.ModelAliases[cfg.Model]; ok {
			cfg.Model = id // Claude Code's "model": "opus"
		}
	}
	if e.Rules != nil {
		// Prompt hooks ask the lead's model.
		e.Rules.Hooks.SetAsker(hook.ProviderAsker(provider, cfg.Model))
	}
	if cfg.PermissionMode == "" && e.Settings != nil {
		cfg.PermissionMode = e.Settings.DefaultMode.Value
	}
	if cfg.PermissionMode == "" {
		// Safe by default, as Claude Code: writes and commands not covered
		// by an allow rule ask (and are refused headless).
		cfg.PermissionMode = team.PermDefault
	}
	if cfg.TeammateModel == "" {
		cfg.TeammateModel = model
	}
	if err := e.worktrees(&cfg, f); err != nil {
		return cfg, err
	}
	cfg.Remote.URL = f.Remote
	if e.Settings != nil {
		// --remote wins over team.remote; team.remoteBase has no flag.
		if cfg.Remote.URL == "" {
			cfg.Remote.URL = e.Settings.Remote.Value
		}
		cfg.Remote.Base = e.Settings.RemoteBase.Value
	}
	if f.TeammateMode == team.ModeProcess {
		exe, err := os.Executable()
		if err != nil {
			return cfg, err
		}
		// The team appends each teammate's --workspace (its Placement).
		cfg.AgentCommand = []string{exe, "agent", "--state-dir", e.StateDir}
		if e.snapshotPath != "" {
			cfg.AgentCommand = append(cfg.AgentCommand, "--settings-snapshot", e.snapshotPath, "--settings-snapshot-sha256", e.snapshotSum)
		}
		if e.opts.Store != "" {
			// In the environment, not on the command line: the URL may
			// carry the store's token.
			cfg.AgentEnv = append(cfg.AgentEnv, "TROUPE_STORE="+e.opts.Store)
		}
		pargs, penv := AgentProviderArgs(pf)
		cfg.AgentCommand = append(cfg.AgentCommand, pargs...)
		cfg.AgentEnv = append(cfg.AgentEnv, penv...)
		if maxTurns > 0 {
			cfg.AgentCommand = append(cfg.AgentCommand, "--max-turns", fmt.Sprint(maxTurns))
		}
		if f.IdleTimeout > 0 {
			cfg.AgentCommand = append(cfg.AgentCommand, "--idle-timeout", f.IdleTimeout.String())
		}
		if f.TeammateModel != "" {
			cfg.AgentCommand = append(cfg.AgentCommand, "--model", f.TeammateModel)
		}
		if e.opts.Sandbox {
			cfg.AgentCommand = append(cfg.AgentCommand, "--sandbox")
		}
	}
	return cfg, nil
}

// coordinationShare reads team.maxCoordinationShare (checked by the
// settings parser; anything else is the default).
func coordinationShare(v string) float64 {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0
	}
	return f
}

// leaseMode reads team.leases (checked by the settings parser; anything
// else is the default, refuse).
func leaseMode(v string) team.LeaseMode {
	m, err := team.ParseLeaseMode(v)
	if err != nil {
		return team.LeaseRefuse
	}
	return m
}

// worktrees sets the session's worktree isolation from the flags, else
// the settings' team.isolation and team.mergeMode, and checks them.
func (e *Env) worktrees(cfg *team.Config, f TeamOptions) error {
	iso, mode := f.Isolation, f.MergeMode
	if e.Settings != nil {
		if iso == "" {
			iso = e.Settings.Isolation.Value
		}
		if mode == "" {
			mode = e.Settings.MergeMode.Value
		}
	}
	var err error
	if cfg.Isolation, err = team.ParseIsolation(iso); err != nil {
		return err
	}
	m, err := worktree.ParseMode(mode)
	if err != nil {
		return err
	}
	cfg.MergeMode = string(m)
	return nil
}
