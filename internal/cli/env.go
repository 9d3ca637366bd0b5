package cli

import (
	"io"
	"os"
	"path/filepath"
	"time"

	assembly "github.com/troupe-dev/troupe/internal/app"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/settings"
	"github.com/troupe-dev/troupe/internal/team"
)

// teamFlags are the flags that shape a team session.
type teamFlags struct {
	teammateMode   string
	permissionMode string
	delegate       bool
	idleTimeout    time.Duration
	teammateModel  string
	isolation      string
	mergeMode      string
	remote         string
}

func (f *teamFlags) add(fs interface {
	StringVar(*string, string, string, string)
	BoolVar(*bool, string, bool, string)
	DurationVar(*time.Duration, string, time.Duration, string)
}) {
	fs.StringVar(&f.teammateMode, "teammate-mode", team.ModeInProcess, "how teammates run: in-process (goroutines) or process (one troupe agent process each)")
	fs.StringVar(&f.permissionMode, "permission-mode", "", "the lead's permission mode and the teammates' default: default, acceptEdits, plan, bypassPermissions or delegate (default: the settings' defaultMode, else default: writes and commands not allowed by a rule ask, and are refused headless)")
	fs.BoolVar(&f.delegate, "delegate", false, "limit the lead to management tools (it coordinates, teammates do the work)")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", 0, "an idle teammate exits after this long with nothing to do (0: stays until shut down)")
	fs.StringVar(&f.teammateModel, "teammate-model", "", "the teammates' default model (default: the lead's)")
	fs.StringVar(&f.isolation, "isolation", "", "where teammates work: shared (the lead's checkout) or worktree (each in its own git worktree and branch, merged back per task; settings: team.isolation)")
	fs.StringVar(&f.remote, "remote", "", "the git remote teammates on other machines clone (troupe agent --join), recorded in the team's roster (overrides the settings' team.remote); default with a shared store (--store nats://…): the checkout's origin")
	fs.StringVar(&f.mergeMode, "merge-mode", "", "how a worktree teammate's branch is merged: ff (fast-forward when possible) or merge (always a merge commit; settings: team.mergeMode)")
}

// settingsFlags say where a session's settings come from.
type settingsFlags struct {
	// file is --settings: a settings file, or a JSON object, ranked above
	// every file but managed settings (wired by the run flags).
	file string
	// snapshot is troupe agent's --settings-snapshot: the lead's snapshot,
	// loaded instead of the files, so that a teammate process runs on the
	// settings its lead started with; snapshotSum is its SHA-256, so that
	// a snapshot rewritten on disk meanwhile is refused.
	snapshot, snapshotSum string
}

// env is a session's surroundings, assembled by package app.
type env = assembly.Env

// openEnv opens the workspace dir and its state directory, and gathers the
// project memory and skills for the system prompts (assembly.OpenEnv).
// Warnings (a bad SKILL.md) go to the log file under the state directory
// and to warn.
func (a *app) openEnv(dir string, warn io.Writer) (*env, error) {
	stateDir, err := a.stateDirFor(dir)
	if err != nil {
		return nil, err
	}
	flag := a.settingsFlag()
	storeURL, err := a.storeURL(dir)
	if err != nil {
		return nil, err
	}
	return assembly.OpenEnv(a.ctx, assembly.Options{
		Dir: dir, StateDir: stateDir, Store: storeURL, Warn: warn, Sandbox: a.sandbox, MCPConfig: a.run.claude.mcpConfig, MCPLazy: a.run.claude.mcpStartup == "lazy",
		Settings: assembly.SettingsSource{Flag: flag, Extra: a.run.settingsFiles,
			Snapshot: a.settings.snapshot, SnapshotSum: a.settings.snapshotSum},
	})
}

// stateDirFor is the state directory of workspace dir.
func (a *app) stateDirFor(dir string) (string, error) {
	if a.stateDir != "" || os.Getenv("TROUPE_HOME") != "" {
		return a.StateDir()
	}
	return filepath.Join(dir, ".troupe"), nil
}

// sessionConfig builds a team session's configuration from the flags.
func (a *app) sessionConfig(e *env, provider llm.Provider, model string, maxTurns int, f *teamFlags, pf providerFlags) (team.Config, error) {
	return e.SessionConfig(provider, model, maxTurns, f.options(), pf.choice())
}

// options are the team flags as package app takes them.
func (f *teamFlags) options() assembly.TeamOptions {
	return assembly.TeamOptions{TeammateMode: f.teammateMode, PermissionMode: f.permissionMode, Delegate: f.delegate,
		IdleTimeout: f.idleTimeout, TeammateModel: f.teammateModel, Isolation: f.isolation, MergeMode: f.mergeMode, Remote: f.remote}
}

// settingsFlag is --settings: a file, or the run's inline JSON object.
func (a *app) settingsFlag() string {
	if a.settings.file != "" {
		return a.settings.file
	}
	return a.run.settingsInline
}

// settingsOptions are the settings files a command in dir reads, as a
// session there would.
func (a *app) settingsOptions(dir string) settings.Options {
	return settings.Options{Workspace: dir, Flag: a.settingsFlag(), Extra: a.run.settingsFiles}
}
