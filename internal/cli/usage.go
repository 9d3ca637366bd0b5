package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	assembly "github.com/troupe-dev/troupe/internal/app"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/usage"
)

// usageCmd is `troupe usage T`.
func (a *app) usageCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "usage TEAM",
		Short: "Tokens and cost of a team, per agent and per task, coordination apart from work",
		Long: `Totals every model call of team TEAM from its journal (a deleted team's
archived journal when it is gone): per agent, per task and per model, with
coordination (the lead, messages, protocols) apart from work (teammates on
their tasks). Costs come from built-in list prices of Anthropic models,
overridden by "prices" in .troupe/settings.json (USD per million tokens:
{"prices": {"my-model": {"input": 1, "output": 2, "cache_read": 0.1, "cache_write": 1.25, "cache_write_1h": 2}}}).

The prompt cache section shows, for the team, each agent and each task: the
cache hit ratio (cache reads over all input tokens, and the same without each
agent's first call), the dollars caching saved over paying every input token
at the input price, and the dollars lost to misses: calls that paid again, as
cache writes or input, for a prefix their agent had cached before (after an
idle longer than the cache's lifetime, a compaction, or a changed prefix).
What the runtime decided by itself follows: the cache lifetimes it chose for
teammates about to idle, with their expected saving, and the coordination
warnings it gave the lead.`,
		Args: a.teamArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ws, err := a.Workspace()
			if err != nil {
				return withCode(ExitUsage, err)
			}
			stateDir, err := a.stateDirFor(ws)
			if err != nil {
				return withCode(ExitUsage, err)
			}
			events, err := a.teamEvents(stateDir, args[0])
			if err != nil {
				return withCode(ExitError, err)
			}
			prices, err := usage.LoadPrices(ws)
			if err != nil {
				return withCode(ExitError, err)
			}
			rep := usage.Tally(args[0], events, prices)
			cache := usage.Cache(events, prices)
			runtime := usage.Runtime(events)
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				var rt *usage.RuntimeReport
				if len(runtime.Choices)+len(runtime.Governor) > 0 {
					rt = &runtime
				}
				return enc.Encode(struct {
					usage.Report
					Cache   usage.CacheReport    `json:"cache"`
					Runtime *usage.RuntimeReport `json:"runtime,omitempty"`
				}{rep, cache, rt})
			}
			line := func(name string, t usage.Tokens) {
				cost := fmt.Sprintf("$%.4f", t.CostUSD)
				if t.Unpriced > 0 {
					cost += fmt.Sprintf(" (+%d unpriced)", t.Unpriced)
				}
				fmt.Fprintf(a.stdout, "  %-22s %5d calls  %9d in  %8d out  %9d cache-read  %8d cache-write  %s\n",
					name, t.Calls, t.Input, t.Output, t.CacheRead, t.CacheWrite, cost)
			}
			fmt.Fprintf(a.stdout, "team %s\n", rep.Team)
			line("total", rep.Total)
			line("coordination", rep.Coordination)
			line("work", rep.Work)
			fmt.Fprintln(a.stdout, "by agent")
			for _, k := range usage.Keys(rep.ByAgent) {
				line(k, rep.ByAgent[k])
			}
			if len(rep.ByTask) > 0 {
				fmt.Fprintln(a.stdout, "by task")
				for _, k := range usage.Keys(rep.ByTask) {
					line("#"+k, rep.ByTask[k])
				}
			}
			fmt.Fprintln(a.stdout, "by model")
			for _, k := range usage.Keys(rep.ByModel) {
				line(k, rep.ByModel[k])
			}
			printCache(a.stdout, cache)
			runtime.Print(a.stdout)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printCache writes the prompt cache section of troupe usage.
func printCache(w io.Writer, r usage.CacheReport) {
	line := func(name string, f usage.CacheFigures) {
		fmt.Fprintf(w, "  %-22s hit %5.1f%% (%5.1f%% after first calls)  saved $%.4f  lost $%.4f in %d misses\n",
			name, 100*f.HitRatio, 100*f.HitRatioAfterFirst, f.SavedUSD, f.LostUSD, f.Misses)
	}
	fmt.Fprintln(w, "prompt cache")
	line("total", r.Total)
	fmt.Fprintln(w, "cache by agent")
	for _, k := range sortedKeys(r.ByAgent) {
		line(k, r.ByAgent[k])
	}
	if len(r.ByTask) > 0 {
		fmt.Fprintln(w, "cache by task")
		for _, k := range sortedKeys(r.ByTask) {
			line("#"+k, r.ByTask[k])
		}
	}
	if len(r.Misses) > 0 {
		fmt.Fprintln(w, "cache misses")
		for _, m := range r.Misses {
			fmt.Fprintf(w, "  %s %-14s after %-14s %s: %d tokens paid again, $%.4f\n",
				m.At.Local().Format("15:04:05"), m.Agent, m.Idle.Round(time.Second), m.Why, m.Tokens, m.LostUSD)
		}
	}
}

// sortedKeys is usage.Keys for the cache figures (task ids numerically).
func sortedKeys(m map[string]usage.CacheFigures) []string {
	keys := make(map[string]usage.Tokens, len(m))
	for k := range m {
		keys[k] = usage.Tokens{}
	}
	return usage.Keys(keys)
}

// teamEvents reads a team's journal, or its latest archive.
func (a *app) teamEvents(stateDir, name string) ([]store.Event, error) {
	st, err := assembly.OpenStore(a.ctx, "file:"+stateDir)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return assembly.TeamEvents(a.ctx, st, name)
}

// budgetCmd is `troupe budget T NAME --tokens N --cost X`.
func (a *app) budgetCmd() *cobra.Command {
	var l usage.Limit
	cmd := &cobra.Command{
		Use:   "budget TEAM NAME",
		Short: "Set a member's own spending limit; a member stopped by its budget goes on",
		Long: `Sets NAME's own limits in TEAM's roster (--tokens counts every token of its
calls; --cost is in US dollars; 0 removes a limit) and sends NAME a message, so
a member stopped by its budget goes on. Limits for every agent and for the
whole team live in .troupe/settings.json under "budgets".`,
		Args: a.teamArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ws, err := a.Workspace()
			if err != nil {
				return withCode(ExitUsage, err)
			}
			stateDir, err := a.stateDirFor(ws)
			if err != nil {
				return withCode(ExitUsage, err)
			}
			st, err := assembly.OpenStore(a.ctx, "file:"+stateDir)
			if err != nil {
				return withCode(ExitError, err)
			}
			defer st.Close()
			t, err := st.Team(a.ctx, args[0])
			if err != nil {
				return withCode(ExitError, err)
			}
			if err := team.RaiseBudget(a.ctx, t, args[1], l); err != nil {
				return withCode(ExitError, err)
			}
			if _, err := t.Mailbox().Send(a.ctx, store.Message{Type: store.TypeMessage, From: store.HumanName, To: args[1],
				Content: fmt.Sprintf("Your budget is now %d tokens / $%.2f (0: no limit of your own); go on.", l.Tokens, l.CostUSD)}); err != nil {
				return withCode(ExitError, err)
			}
			fmt.Fprintf(a.stdout, "%s's budget in team %s: %d tokens, $%.2f\n", args[1], args[0], l.Tokens, l.CostUSD)
			return nil
		},
	}
	cmd.Flags().Int64Var(&l.Tokens, "tokens", 0, "token limit (0: none of its own)")
	cmd.Flags().Float64Var(&l.CostUSD, "cost", 0, "cost limit in US dollars (0: none of its own)")
	return cmd
}
