package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/hook"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/teamkey"
)

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
		mcpServers            []string
		jf                    joinFlags
	)
	cmd := &cobra.Command{
		Use:   "agent --team T --name N | --join URL --wait",
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
lead's answers from forged ones.

On another machine, --join URL names the team's store (a troupe hub, or a
NATS cluster): the teammate works in its own clone of the git remote the team
records (--workspace DIR, default under the user's cache; a clone already
there is fetched and kept), on branch troupe/<team>/<member>, and pushes it at
each task it completes; the lead's runtime merges it. With --wait it first
waits in a pool (--pool, default "default") until the lead spawns a teammate
into it (the Task tool with isolation "remote"), then becomes that teammate,
with the team's key handed over sealed to it.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var j joined
			if jf.url != "" || jf.wait {
				// On another machine: the store is the hub, the workspace
				// the teammate's own clone of the team's remote.
				var err error
				if j, err = a.join(jf, teamName, name); err != nil {
					return err
				}
				teamName, name = j.team, j.name
			}
			dir := j.dir
			if teamName == "" || name == "" {
				return withCode(ExitUsage, errors.New("--team and --name are required (or --join URL --wait)"))
			}
			if dir == "" {
				var err error
				if dir, err = a.Workspace(); err != nil {
					return withCode(ExitUsage, err)
				}
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
			if err := e.AddDirs(a.run.claude.addDirs); err != nil {
				return appError(err)
			}
			if err := e.LimitMCP(mcpServers); err != nil {
				return withCode(ExitUsage, err)
			}
			markStarted()
			t, err := e.Store.Team(a.ctx, teamName)
			if err != nil {
				return withCode(ExitError, err)
			}
			var key []byte
			switch {
			case j.key != nil:
				key = j.key
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
				Team: t, Name: name, Key: key, Provider: provider, Workspace: e.Workspace, Sections: e.Sections, Rules: e.Rules,
				Tools:        e.MCPTools(a.ctx),
				MemberLimits: team.MemberLimits{DefaultModel: model, IdleTimeout: idleTimeout, MaxTurns: maxTurns},
				Observers:    team.Observers{Logger: e.Logger},
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
	cmd.Flags().StringArrayVar(&a.run.claude.addDirs, "add-dir", nil, "another directory the file tools may reach (the lead's --add-dir)")
	cmd.Flags().StringArrayVar(&a.run.claude.mcpConfig, "mcp-config", nil, "MCP servers to read too (the lead's --mcp-config)")
	cmd.Flags().StringVar(&a.run.claude.mcpStartup, "mcp-startup", "session", "when MCP servers start (the lead's --mcp-startup)")
	cmd.Flags().StringSliceVar(&mcpServers, "mcp-servers", nil, "start and offer only these MCP servers (comma-separated; the spawn's mcp_servers)")
	jf.add(cmd)
	pf.add(cmd.Flags())
	return cmd
}
