package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	assembly "github.com/troupe-dev/troupe/internal/app"
	"github.com/troupe-dev/troupe/internal/team"
)

// joinFlags are troupe agent's flags for a teammate on another machine.
type joinFlags struct {
	url  string
	wait bool
	pool string
}

func (f *joinFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.url, "join", "", "run on another machine than the lead: the team's store URL (nats://hub:4222); the workspace (--workspace, default under the user's cache) becomes the teammate's own clone of the team's git remote")
	cmd.Flags().BoolVar(&f.wait, "wait", false, "with --join: wait in a pool until the lead spawns a teammate into it (Task with isolation remote), then become that teammate")
	cmd.Flags().StringVar(&f.pool, "pool", team.DefaultPool, "with --wait: the pool to wait in")
}

// join readies `troupe agent --join`: with --wait it waits in a pool for
// the lead to name the team and the teammate; then it clones (or fetches)
// the team's remote into the teammate's workspace and records it on the
// roster.
func (a *app) join(f joinFlags, teamName, name string) (joined, error) {
	if f.url == "" {
		return joined{}, withCode(ExitUsage, errors.New("--wait needs --join URL: the store the lead's team is on"))
	}
	if f.wait && teamName != "" {
		return joined{}, withCode(ExitUsage, errors.New("--wait takes its team from the lead that spawns it; leave --team out"))
	}
	if !f.wait && (teamName == "" || name == "") {
		return joined{}, withCode(ExitUsage, errors.New("--join needs --team and --name, or --wait"))
	}
	if !remoteStore(f.url) {
		return joined{}, withCode(ExitUsage, fmt.Errorf("--join %q: want the URL of a store several machines share (nats://host:4222)", f.url))
	}
	a.store.url = f.url
	var key []byte
	u, err := a.storeURL("")
	if err != nil {
		return joined{}, err
	}
	st, err := assembly.OpenStore(a.ctx, u)
	if err != nil {
		return joined{}, withCode(ExitError, err)
	}
	defer st.Close()
	if f.wait {
		asg, err := team.WaitInPool(a.ctx, st, f.pool, name, func(agent string) {
			fmt.Fprintf(a.stderr, "troupe agent: waiting in pool %s as %s\n", f.pool, agent)
		})
		if errors.Is(err, context.Canceled) {
			return joined{}, withCode(ExitInterrupted, fmt.Errorf("stopped while waiting in pool %s", f.pool))
		}
		if err != nil {
			return joined{}, withCode(ExitError, err)
		}
		teamName, name, key = asg.Team, asg.Name, asg.TeamKey
		fmt.Fprintf(a.stderr, "troupe agent: spawned as %s in team %s\n", name, teamName)
	}
	dir := a.workspace
	if dir == "" {
		if dir, err = team.JoinDir(teamName, name); err != nil {
			return joined{}, withCode(ExitError, err)
		}
	}
	t, err := st.Team(a.ctx, teamName)
	if err != nil {
		return joined{}, withCode(ExitError, err)
	}
	if dir, err = team.Join(a.ctx, t, name, dir); err != nil {
		return joined{}, withCode(ExitError, err)
	}
	fmt.Fprintf(a.stderr, "troupe agent: %s of team %s works in %s\n", name, teamName, dir)
	return joined{team: teamName, name: name, dir: dir, key: key}, nil
}

// joined is who `troupe agent --join` runs, where, and the team's key the
// lead handed it (nil: read as without --join).
type joined struct {
	team, name, dir string
	key             []byte
}
