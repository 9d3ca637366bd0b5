// Package usage totals a team's model usage from its journal and prices it.
// Every model call is journaled (type "usage") with the agent, its model,
// the task it served and whether it was coordination (the lead, messages,
// protocols) or work (a teammate holding a task).
//
// It reads store events (decoded by teamevent) and must never depend on
// agents or teams.
package usage

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// Price is USD per million tokens.
type Price struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cache_read"`
	CacheWrite float64 `json:"cache_write"`
	// CacheWrite1h is a cache write with the 1-hour lifetime (0: twice
	// Input, the API's multiplier).
	CacheWrite1h float64 `json:"cache_write_1h,omitempty"`
}

// Prices maps a model name prefix to its price; the longest matching
// prefix wins.
type Prices map[string]Price

// DefaultPrices are the public list prices of current Anthropic models
// (cache writes at 1.25x input, 2x for the 1-hour lifetime, cache reads at
// 0.1x).
func DefaultPrices() Prices {
	return Prices{
		"claude-opus-4-5":   {Input: 5, Output: 25, CacheWrite: 6.25, CacheRead: 0.50, CacheWrite1h: 10},
		"claude-opus-4":     {Input: 15, Output: 75, CacheWrite: 18.75, CacheRead: 1.50, CacheWrite1h: 30},
		"claude-sonnet-4":   {Input: 3, Output: 15, CacheWrite: 3.75, CacheRead: 0.30, CacheWrite1h: 6},
		"claude-3-7-sonnet": {Input: 3, Output: 15, CacheWrite: 3.75, CacheRead: 0.30, CacheWrite1h: 6},
		"claude-haiku-4-5":  {Input: 1, Output: 5, CacheWrite: 1.25, CacheRead: 0.10, CacheWrite1h: 2},
		"claude-3-5-haiku":  {Input: 0.80, Output: 4, CacheWrite: 1, CacheRead: 0.08, CacheWrite1h: 1.6},
	}
}

// Lookup returns the price of model ("provider:" prefixes are ignored).
func (p Prices) Lookup(model string) (Price, bool) {
	if _, m, ok := strings.Cut(model, ":"); ok && (strings.HasPrefix(model, "anthropic:") || strings.HasPrefix(model, "openai:")) {
		model = m
	}
	best, found := "", false
	for prefix := range p {
		if strings.HasPrefix(model, prefix) && len(prefix) > len(best) {
			best, found = prefix, true
		}
	}
	return p[best], found
}

// LoadPrices returns the default prices overridden by the "prices" object
// of the workspace's .troupe/settings.json, if any.
func LoadPrices(workspace string) (Prices, error) {
	p := DefaultPrices()
	data, err := os.ReadFile(filepath.Join(workspace, ".troupe", "settings.json"))
	if os.IsNotExist(err) {
		return p, nil
	}
	if err != nil {
		return nil, err
	}
	var s struct {
		Prices map[string]Price `json:"prices"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf(".troupe/settings.json: prices: %w", err)
	}
	for k, v := range s.Prices {
		p[k] = v
	}
	return p, nil
}

// Cost is what t's tokens cost at p, in USD (Calls and CostUSD of t are
// not read).
func (p Price) Cost(t Tokens) float64 {
	return (float64(t.Input)*p.Input + float64(t.Output)*p.Output +
		float64(t.CacheRead)*p.CacheRead + float64(t.CacheWrite)*p.CacheWrite) / 1e6
}

// Tokens counts one kind of usage.
type Tokens struct {
	Calls      int     `json:"calls"`
	Input      int64   `json:"input_tokens"`
	Output     int64   `json:"output_tokens"`
	CacheRead  int64   `json:"cache_read_input_tokens"`
	CacheWrite int64   `json:"cache_creation_input_tokens"`
	CostUSD    float64 `json:"cost_usd"`
	// Unpriced counts calls of models the price table does not know.
	Unpriced int `json:"unpriced_calls,omitempty"`
}

func (t *Tokens) add(o Tokens) {
	t.Calls += o.Calls
	t.Input += o.Input
	t.Output += o.Output
	t.CacheRead += o.CacheRead
	t.CacheWrite += o.CacheWrite
	t.CostUSD += o.CostUSD
	t.Unpriced += o.Unpriced
}

// Report is a team's usage.
type Report struct {
	Team         string            `json:"team"`
	Total        Tokens            `json:"total"`
	Coordination Tokens            `json:"coordination"`
	Work         Tokens            `json:"work"`
	ByAgent      map[string]Tokens `json:"by_agent"`
	ByTask       map[string]Tokens `json:"by_task"`
	ByModel      map[string]Tokens `json:"by_model"`
}

// Tally totals the usage events of a journal.
func Tally(team string, events []store.Event, prices Prices) Report {
	r := Report{Team: team, ByAgent: map[string]Tokens{}, ByTask: map[string]Tokens{}, ByModel: map[string]Tokens{}}
	for _, e := range events {
		if e.Type != (teamevent.Usage{}).Type() {
			continue
		}
		env, err := teamevent.Decode(e)
		if err != nil {
			continue // a line of the wrong shape counts for nothing
		}
		u, ok := env.Event.(teamevent.Usage)
		if !ok {
			continue
		}
		t := Tokens{Calls: 1, Input: u.InputTokens, Output: u.OutputTokens, CacheRead: u.CacheReadTokens, CacheWrite: u.CacheWriteTokens}
		model := u.Model
		if p, ok := prices.Lookup(model); ok {
			t.CostUSD = p.Cost(t)
		} else {
			t.Unpriced = 1
		}
		agent := u.AgentName
		if agent == "" {
			agent = e.Agent
		}
		r.Total.add(t)
		if u.Kind == teamevent.UsageWork {
			r.Work.add(t)
		} else {
			r.Coordination.add(t)
		}
		a := r.ByAgent[agent]
		a.add(t)
		r.ByAgent[agent] = a
		if task := u.Task; task != "" {
			x := r.ByTask[task]
			x.add(t)
			r.ByTask[task] = x
		}
		if model == "" {
			model = "(default)"
		}
		m := r.ByModel[model]
		m.add(t)
		r.ByModel[model] = m
	}
	return r
}

// Keys returns m's keys sorted (task ids numerically).
func Keys(m map[string]Tokens) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := store.TaskNum(out[i]), store.TaskNum(out[j])
		if a != b && a != 0 && b != 0 {
			return a < b
		}
		return out[i] < out[j]
	})
	return out
}

// Limit is a spending limit; zero fields do not limit. Tokens counts every
// token of a call: input, output, cache reads and cache writes.
type Limit struct {
	Tokens  int64   `json:"tokens,omitempty"`
	CostUSD float64 `json:"cost_usd,omitempty"`
}

// Exceeded says whether t has reached l, and how.
func (l Limit) Exceeded(t Tokens) (string, bool) {
	total := t.Input + t.Output + t.CacheRead + t.CacheWrite
	switch {
	case l.Tokens > 0 && total >= l.Tokens:
		return fmt.Sprintf("%d of %d tokens used", total, l.Tokens), true
	case l.CostUSD > 0 && t.CostUSD >= l.CostUSD:
		return fmt.Sprintf("$%.4f of $%.4f spent", t.CostUSD, l.CostUSD), true
	}
	return "", false
}

// Budgets are the spending limits of .troupe/settings.json:
//
//	"budgets": {"agent": {"tokens": 2000000}, "team": {"cost_usd": 20},
//	            "agents": {"alice": {"cost_usd": 2}}}
//
// agent applies to every agent without a limit of its own; team to the sum.
type Budgets struct {
	Agent  Limit            `json:"agent"`
	Team   Limit            `json:"team"`
	Agents map[string]Limit `json:"agents"`
}

// LoadBudgets reads the budgets of the workspace's settings (none when the
// file or the key is absent). It is cheap enough to call before every
// model call, so raising a limit in the file takes effect at once.
func LoadBudgets(workspace string) (Budgets, error) {
	data, err := os.ReadFile(filepath.Join(workspace, ".troupe", "settings.json"))
	if os.IsNotExist(err) {
		return Budgets{}, nil
	}
	if err != nil {
		return Budgets{}, err
	}
	var s struct {
		Budgets Budgets `json:"budgets"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return Budgets{}, fmt.Errorf(".troupe/settings.json: budgets: %w", err)
	}
	return s.Budgets, nil
}
