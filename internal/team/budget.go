package team

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/usage"
)

// ErrBudget means an agent or its team reached a spending limit: the agent
// makes no more model calls until the limit is raised.
var ErrBudget = errors.New("budget reached")

// budgets checks spending against the limits of the settings, the team and
// each member's own (from the roster). What was spent is read from the
// journal's usage events, incrementally, so it counts every process of the
// team and survives restarts.
type budgets struct {
	t         store.Team
	workspace string
	prices    usage.Prices

	mu    sync.Mutex
	off   store.Cursor
	spent map[string]usage.Tokens
	total usage.Tokens
}

func newBudgets(t store.Team, workspace string) *budgets {
	prices, err := usage.LoadPrices(workspace)
	if err != nil {
		prices = usage.DefaultPrices()
	}
	return &budgets{t: t, workspace: workspace, prices: prices, spent: map[string]usage.Tokens{}}
}

// refresh adds the usage journaled since the last look. The journal is
// read without the lock (none is held across a store call); of two
// refreshes from the same offset, one is counted.
func (b *budgets) refresh(ctx context.Context) {
	b.mu.Lock()
	off := b.off
	b.mu.Unlock()
	evs, next, err := b.t.Journal().ReadAfter(ctx, off)
	if err != nil {
		return
	}
	r := usage.Tally("", evs, b.prices)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.off != off {
		return
	}
	b.off = next
	for name, tok := range r.ByAgent {
		cur := b.spent[name]
		cur.Calls += tok.Calls
		cur.Input += tok.Input
		cur.Output += tok.Output
		cur.CacheRead += tok.CacheRead
		cur.CacheWrite += tok.CacheWrite
		cur.CostUSD += tok.CostUSD
		b.spent[name] = cur
	}
	t := r.Total
	b.total.Calls += t.Calls
	b.total.Input += t.Input
	b.total.Output += t.Output
	b.total.CacheRead += t.CacheRead
	b.total.CacheWrite += t.CacheWrite
	b.total.CostUSD += t.CostUSD
}

// check returns ErrBudget (wrapped with what was reached) when agent, or
// the team, has reached its limit.
func (b *budgets) check(ctx context.Context, agent string) error {
	limits, err := usage.LoadBudgets(b.workspace)
	if err != nil {
		return nil // a broken settings file does not stop the team; it is reported elsewhere
	}
	own := limits.Agents[agent]
	if own == (usage.Limit{}) {
		if m, ok, err := b.t.ReadMember(ctx, agent); err == nil && ok {
			own = usage.Limit{Tokens: m.BudgetTokens, CostUSD: m.BudgetUSD}
		}
	}
	if own == (usage.Limit{}) {
		own = limits.Agent
	}
	if own == (usage.Limit{}) && limits.Team == (usage.Limit{}) {
		return nil
	}
	b.refresh(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	if why, over := own.Exceeded(b.spent[agent]); over {
		return fmt.Errorf("%w: %s (%s)", ErrBudget, agent, why)
	}
	if why, over := limits.Team.Exceeded(b.total); over {
		return fmt.Errorf("%w: team %s (%s)", ErrBudget, b.t.Name(), why)
	}
	return nil
}

// RaiseBudget sets member's own limits on the roster (0 removes one); a
// member stopped by its budget goes on at its next message.
func RaiseBudget(ctx context.Context, t store.Team, member string, l usage.Limit) error {
	_, err := t.UpdateRoster(ctx, func(r *store.Roster) error {
		m, ok := r.Member(member)
		if !ok {
			return fmt.Errorf("%w %q in team %s", store.ErrUnknownMember, member, r.Name)
		}
		m.BudgetTokens, m.BudgetUSD = l.Tokens, l.CostUSD
		return nil
	})
	return err
}
