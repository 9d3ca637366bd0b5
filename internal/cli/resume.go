package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	fakeapiexamples "github.com/troupe-dev/troupe/examples/fakeapi"
	assembly "github.com/troupe-dev/troupe/internal/app"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
	"github.com/troupe-dev/troupe/internal/shell"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
)

// demoMarker, in a state directory, says its teams were started by `troupe
// demo`, so that `troupe resume` uses the same bundled scripted model.
const demoMarker = "demo.json"

type demoState struct {
	Script  string `json:"script"`
	Latency string `json:"model_latency,omitempty"`
}

func writeDemoMarker(stateDir string, latency time.Duration, isolation string) error {
	script := "rest-to-graphql"
	if isolation == team.IsolationWorktree {
		script = demoWorktreeScript
	}
	data, _ := json.Marshal(demoState{Script: script, Latency: latency.String()})
	return os.WriteFile(filepath.Join(stateDir, demoMarker), data, 0o644)
}

// resumeCmd is `troupe resume T`.
func (a *app) resumeCmd() *cobra.Command {
	var (
		headless   bool
		printOnly  bool
		model      string
		maxTurns   int
		maxRetries int
		tf         teamFlags
		pf         providerFlags
		cf         claudeFlags
		wf         webFlags
	)
	cmd := &cobra.Command{
		Use:   "resume TEAM",
		Short: "Bring a team back after an exit or a crash and carry on until it is done",
		Long: `Brings back the lead and every teammate of TEAM that was not shut down, each
with its conversation (from its transcript) and identity; messages nobody had
read are delivered again, exactly once; plan and permission requests still
waiting for the lead are put to it again; a teammate whose process still runs
is left alone. In a terminal the team comes back in the terminal UI, where
the human carries on with the lead as with troupe; with --headless (or -p),
or without a terminal, it carries on until the lead has finished and the
team is done. A team started by troupe demo resumes on the same bundled
scripted model.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cf.resolveMode(&tf); err != nil {
				return err
			}
			if err := wf.checkBeside(); err != nil {
				return err
			}
			dir, err := a.Workspace()
			if err != nil {
				return withCode(ExitUsage, err)
			}
			in, term, tty := a.terminals()
			tty = tty && !headless && !printOnly
			warn := a.stderr
			if tty {
				warn = nil // warnings go to the log, not over the UI
			}
			e, err := a.openEnv(dir, warn)
			if err != nil {
				return withCode(ExitError, err)
			}
			defer e.Close()
			a.killLeftovers(e)
			provider, err := a.resumeProvider(e, pf, maxRetries)
			if err != nil {
				return err
			}
			cfg, err := a.sessionConfig(e, provider.p, model, maxTurns, &tf, provider.flags)
			if err != nil {
				return withCode(ExitError, err)
			}
			if provider.env != nil {
				cfg.AgentEnv = provider.env
			}
			if tty {
				defer quietLogs(e.LogFile)()
				var finish func() error
				if provider.close != nil {
					finish = func() error { provider.close(); return nil }
				}
				return a.interactive(e, cfg, dir, in, term, args[0], wf, finish)
			}
			out := newRunOutput(outputConfig{Format: formatText, Stdout: a.stdout, Stderr: a.stderr})
			tl := newTally()
			cfg.OnEvent = func(ev store.Event) {
				tl.observe(ev)
				if ev.Type == "resume" {
					fmt.Fprintf(a.stderr, "troupe: resumed team %s: restarted %v\n", ev.Team, ev.Fields["restarted"])
				}
			}
			sess, err := team.NewSession(cfg)
			if err != nil {
				return withCode(ExitUsage, err)
			}
			stopWeb, err := a.webBeside(wf, e.Store, sess, nil, dir)
			if err != nil {
				sess.Close()
				return err
			}
			res, runErr := sess.Resume(a.ctx, args[0])
			stopWeb()
			closeErr := sess.Close()
			if provider.close != nil {
				provider.close()
			}
			out.finish(res, tl, runErr, 0)
			if errors.Is(runErr, context.Canceled) {
				return withCode(ExitInterrupted, fmt.Errorf("interrupted; continue with: troupe resume %s", args[0]))
			}
			if runErr != nil {
				return withCode(ExitError, runErr)
			}
			if closeErr != nil {
				return withCode(ExitError, closeErr)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&headless, "headless", false, "carry on without the terminal UI until the team is done (the default without a terminal)")
	cmd.Flags().BoolVarP(&printOnly, "print", "p", false, "the same as --headless")
	cmd.Flags().StringVar(&model, "model", "", "the lead's model")
	cmd.Flags().IntVar(&maxTurns, "max-turns", 0, "bound the model calls of each turn (0: none)")
	cmd.Flags().IntVar(&maxRetries, "max-retries", 5, "retries of a failed model call")
	tf.add(cmd.Flags())
	pf.add(cmd.Flags())
	wf.add(cmd.Flags(), true)
	cmd.Flags().BoolVar(&cf.skipPermissions, "dangerously-skip-permissions", false, "run the lead in bypassPermissions mode (teammates keep the mode their roster entry records)")
	return cmd
}

// killLeftovers kills what the commands of a dead troupe process left
// running (recorded under the state directory's pids/), before the team
// comes back and starts its commands again.
func (a *app) killLeftovers(e *env) {
	killed, err := shell.KillLeftovers(filepath.Join(e.StateDir, "pids"))
	if err != nil {
		e.Logger.Warn("leftover commands", "err", err)
		fmt.Fprintf(a.stderr, "troupe: %v\n", err)
	}
	for _, g := range killed {
		e.Logger.Info("killed a leftover command", "pgid", g.Pgid, "cgroup", g.Cgroup, "command", g.Command)
	}
	if n := len(killed); n > 0 {
		fmt.Fprintf(a.stderr, "troupe: killed %d command(s) a previous run left running\n", n)
	}
}

type resumedProvider struct {
	p     llm.Provider
	flags providerFlags
	env   []string
	close func()
}

// resumeProvider is the bundled scripted model for a demo's state
// directory, else the configured provider.
func (a *app) resumeProvider(e *env, pf providerFlags, maxRetries int) (*resumedProvider, error) {
	data, err := os.ReadFile(filepath.Join(e.StateDir, demoMarker))
	if err != nil {
		p, _, err := a.buildProvider(pf, maxRetries)
		if err != nil {
			return nil, err
		}
		return &resumedProvider{p: p, flags: pf}, nil
	}
	var ds demoState
	if err := json.Unmarshal(data, &ds); err != nil {
		return nil, withCode(ExitError, fmt.Errorf("%s: %w", demoMarker, err))
	}
	latency, _ := time.ParseDuration(ds.Latency)
	text := fakeapiexamples.RESTToGraphQL
	if ds.Script == demoWorktreeScript {
		if text, err = withOverlay(text, fakeapiexamples.RESTToGraphQLWorktree); err != nil {
			return nil, withCode(ExitError, err)
		}
	}
	script, err := fakeapi.ParseScript(text)
	if err != nil {
		return nil, withCode(ExitError, err)
	}
	fake := fakeapi.New(script, fakeapi.Options{Latency: latency, IDPrefix: fmt.Sprintf("r%d_", time.Now().UnixNano()),
		Logf: func(format string, args ...any) { e.Logger.Info(fmt.Sprintf(format, args...)) }})
	base, err := fake.Start("127.0.0.1:0")
	if err != nil {
		return nil, withCode(ExitError, err)
	}
	p, err := assembly.AnthropicAt(base, "demo", 0)
	if err != nil {
		fake.Close()
		return nil, withCode(ExitError, err)
	}
	return &resumedProvider{p: p, flags: providerFlags{provider: "anthropic", baseURL: base},
		env: []string{"ANTHROPIC_API_KEY=demo", "ANTHROPIC_BASE_URL=" + base}, close: func() {
			for _, r := range fake.Requests() {
				if r.Rule < 0 && r.Status == 200 {
					e.Logger.Warn("resumed demo call off script", "call", r.N, "agent", r.Agent, "last_turn", lastTurnText(r.Body))
				}
			}
			fake.Close()
		}}, nil
}
