package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/agent"
	assembly "github.com/troupe-dev/troupe/internal/app"
	"github.com/troupe-dev/troupe/internal/hook"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/teamkey"
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
	flag := a.settings.file
	if flag == "" {
		flag = a.run.settingsInline
	}
	return assembly.OpenEnv(a.ctx, assembly.Options{
		Dir: dir, StateDir: stateDir, Warn: warn, Sandbox: a.sandbox,
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
		IdleTimeout: f.idleTimeout, TeammateModel: f.teammateModel}
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
			defer e.Close()
			if err := applyFlagRules(e, splitRules(allowed), splitRules(disallowed)); err != nil {
				return err
			}
			t, err := e.Store.Team(a.ctx, teamName)
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
				key, err = e.Keys.Load(t.Name())
			}
			if errors.Is(err, teamkey.ErrNoKey) {
				err = fmt.Errorf("%w; start teammates through the lead (--teammate-mode process, troupe resume %s), or give a copy of the key with --key-file", err, t.Name())
			}
			if err != nil {
				return withCode(ExitError, fmt.Errorf("team key: %w", err))
			}
			if e.Rules != nil {
				e.Rules.Hooks.SetAsker(hook.ProviderAsker(provider, model))
			}
			err = team.RunMember(a.ctx, team.MemberConfig{
				Team: t, Name: name, Key: key, Provider: provider, Workspace: e.Workspace, DefaultModel: model,
				IdleTimeout: idleTimeout, MaxTurns: maxTurns, Sections: e.Sections, Rules: e.Rules, Logger: e.Logger,
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
