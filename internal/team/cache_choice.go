package team

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/usage"
)

// The cache lifetime of a teammate's calls (issue 23). A teammate that is
// about to idle (nothing on the board it can take, a task it waits on
// blocked, a plan awaiting approval) is likely to sleep past the default
// 5-minute lifetime and pay for its whole context again when it wakes.
// Before each of its calls the runtime weighs, from the price table, the
// hour's dearer write plus a read on waking against the default write plus
// the re-write after expiry, and asks for the hour when it is cheaper. The
// lead decides nothing here.

// cacheChooser keeps a teammate's choice for the call in flight and the
// context it carries.
type cacheChooser struct {
	prices usage.Prices
	model  string // configured; replaced by the model that answered

	mu      sync.Mutex
	asked   llm.CacheTTL // what the last call asked for
	why     string       // why the last call expected an idle ("": it did not)
	context int64        // input tokens of the last call, all kinds, and its output
}

func newCacheChooser(prices usage.Prices, model string) *cacheChooser {
	return &cacheChooser{prices: prices, model: model}
}

// price is the model's price; a model missing from the table is priced by
// the API's multipliers on a unit input price, which is all the choice
// needs (it compares ratios).
func (c *cacheChooser) price(model string) usage.Price {
	if p, ok := c.prices.Lookup(model); ok && p.Input > 0 {
		return p
	}
	return usage.Price{Input: 1, CacheWrite: 1.25, CacheRead: 0.1, CacheWrite1h: 2}
}

// hourSaves is what the hour saves, per million tokens of context, for a
// teammate about to idle past the default lifetime (<= 0: it does not
// pay): the hour writes dearer once and is read on waking; the default
// writes once and again after its expiry.
func hourSaves(p usage.Price) float64 {
	write5m := p.CacheWrite
	if write5m == 0 {
		write5m = 1.25 * p.Input
	}
	return 2*write5m - (p.Write1h() + p.CacheRead)
}

// decide returns the lifetime for the next call given why the teammate is
// expected to idle ("" when it is not).
func (c *cacheChooser) decide(why string) llm.CacheTTL {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked, c.why = llm.CacheTTLDefault, why
	if why == "" || strings.HasPrefix(c.model, "openai:") {
		return c.asked
	}
	if hourSaves(c.price(c.model)) > 0 {
		c.asked = llm.CacheTTL1h
	}
	return c.asked
}

// used notes a call's usage: the context the choice is for, the model
// that answered, and the lifetime the call asked for (for its journal
// line).
func (c *cacheChooser) used(u *llm.Usage, answered string) llm.CacheTTL {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.context = u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens + u.OutputTokens
	if answered != "" && !strings.Contains(c.model, ":") {
		c.model = answered
	}
	return c.asked
}

// choice is what the teammate's last call chose, for the journal when it
// goes idle; nil when that call expected no idle.
func (c *cacheChooser) choice() *teamevent.CacheChoice {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.why == "" {
		return nil
	}
	ev := &teamevent.CacheChoice{TTL: string(llm.CacheTTL5m), Why: c.why + "; the hour costs more than a re-write", Tokens: c.context}
	if c.asked == llm.CacheTTL1h {
		// Priced now: the model that answered is known after a first call.
		ev.TTL, ev.Why, ev.ExpectedSavedUSD = string(llm.CacheTTL1h), c.why, float64(c.context)*hourSaves(c.price(c.model))/1e6
	}
	return ev
}

// cacheTTL is the member's agent.Config.CacheTTL: asked before each call.
func (m *Member) cacheTTL() llm.CacheTTL {
	return m.cache.decide(m.idleExpected(context.Background()))
}

// journalCacheChoice records, as the member goes idle, the lifetime its
// last call chose and what the choice is expected to save.
func (m *Member) journalCacheChoice(ctx context.Context) {
	if ev := m.cache.choice(); ev != nil {
		ev.Member = m.name
		m.emit(ctx, *ev)
	}
}

// idleExpected says why the member will idle when its turn ends ("": it
// has work). A permission answer is waited for inside a tool call, after
// the model call that asked: the lifetime of that call cannot be chosen
// for it, so it does not count here.
func (m *Member) idleExpected(ctx context.Context) string {
	if pending, _ := m.proto.plan(); pending != "" {
		return "waiting on plan approval"
	}
	if m.st.task() != "" {
		return ""
	}
	tasks, err := m.cfg.Team.Tasks().List(ctx)
	if err != nil {
		return "" // the default lifetime is never wrong, only dearer
	}
	me := store.Member{Name: m.name, Role: m.me.Role}
	var blocked []string
	for _, t := range tasks {
		switch {
		case t.Owner == m.name && t.Status == store.TaskInProgress:
			return ""
		case t.Claimable() == nil && roleFits(t, me) && !handedBackBy(t, m.name):
			return ""
		case t.Status == store.TaskPending && (t.Owner == m.name || t.Owner == "") && len(t.BlockedBy) > 0:
			blocked = append(blocked, "#"+t.ID)
		}
	}
	if len(blocked) > 0 {
		return fmt.Sprintf("waiting on blocked task %s", strings.Join(blocked, ", "))
	}
	return "no claimable task"
}
