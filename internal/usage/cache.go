package usage

import (
	"sort"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// Cache lifetimes of the Anthropic prompt cache: a call that comes later
// than this after the previous one of its agent finds its prefix gone.
const (
	CacheLifetime   = 5 * time.Minute
	CacheLifetime1h = time.Hour
)

// CacheFigures is what the prompt cache did for a set of calls.
type CacheFigures struct {
	Calls        int   `json:"calls"`
	Input        int64 `json:"input_tokens"`
	CacheRead    int64 `json:"cache_read_input_tokens"`
	CacheWrite   int64 `json:"cache_creation_input_tokens"`
	CacheWrite1h int64 `json:"cache_creation_1h_input_tokens"`
	// HitRatio is cache reads over all input tokens (plain input, cache
	// reads and cache writes).
	HitRatio float64 `json:"cache_hit_ratio"`
	// HitRatioAfterFirst is HitRatio without each agent's first call,
	// which has nothing of its own cached yet.
	HitRatioAfterFirst float64 `json:"cache_hit_ratio_after_first_call"`
	// InputUSD is what the input side cost: plain input, cache reads and
	// writes at their prices. UncachedUSD is what the same tokens would
	// have cost as plain input. SavedUSD is the difference (negative
	// when writes were never read back).
	InputUSD    float64 `json:"input_usd"`
	UncachedUSD float64 `json:"uncached_input_usd"`
	SavedUSD    float64 `json:"saved_usd"`
	// LostUSD is what the misses cost over reading the prefix the agent
	// had cached before (see Miss), Misses how many calls missed.
	LostUSD float64 `json:"lost_usd"`
	Misses  int     `json:"misses"`
	// Unpriced counts calls of models the price table does not know; they
	// count in the tokens and ratios, not in the dollars.
	Unpriced int `json:"unpriced_calls,omitempty"`

	afterFirstInput, afterFirstRead int64
}

func (f *CacheFigures) add(c cacheCall) {
	f.Calls++
	f.Input += c.u.InputTokens
	f.CacheRead += c.u.CacheReadTokens
	f.CacheWrite += c.u.CacheWriteTokens
	f.CacheWrite1h += c.u.CacheWrite1hTokens
	if !c.first {
		f.afterFirstInput += c.all()
		f.afterFirstRead += c.u.CacheReadTokens
	}
	if !c.priced {
		f.Unpriced++
	}
	f.InputUSD += c.paid
	f.UncachedUSD += c.uncached
	f.SavedUSD += c.uncached - c.paid
	if c.miss != nil {
		f.Misses++
		f.LostUSD += c.miss.LostUSD
	}
}

func (f *CacheFigures) finish() {
	if all := f.Input + f.CacheRead + f.CacheWrite; all > 0 {
		f.HitRatio = float64(f.CacheRead) / float64(all)
	}
	if f.afterFirstInput > 0 {
		f.HitRatioAfterFirst = float64(f.afterFirstRead) / float64(f.afterFirstInput)
	}
}

// Miss is a call that paid again for a prefix its agent had cached: its
// reads fell short of what the agent's previous call left in the cache.
type Miss struct {
	Agent string    `json:"agent"`
	At    time.Time `json:"at"`
	Task  string    `json:"task,omitempty"`
	// Why is "idle" (the call came after the cache's lifetime), or
	// "compaction" (the conversation shrank: it was summarised or its
	// old tool results were cut), or "prefix changed" (something early in
	// the prompt differed).
	Why string `json:"why"`
	// Idle is the time since the agent's previous call.
	Idle time.Duration `json:"idle_ns"`
	// Tokens were cached after the previous call and paid again here, as
	// cache writes or plain input.
	Tokens  int64   `json:"tokens"`
	LostUSD float64 `json:"lost_usd"`
}

// CacheReport is the prompt cache's effect on a team's bill.
type CacheReport struct {
	Total   CacheFigures            `json:"total"`
	ByAgent map[string]CacheFigures `json:"by_agent"`
	ByTask  map[string]CacheFigures `json:"by_task"`
	Misses  []Miss                  `json:"misses"`
}

// cacheCall is one usage event as the cache analysis sees it.
type cacheCall struct {
	at       time.Time
	agent    string
	u        teamevent.Usage
	first    bool
	priced   bool
	paid     float64 // input side, as billed
	uncached float64 // input side, all as plain input
	miss     *Miss
}

func (c cacheCall) all() int64 { return c.u.InputTokens + c.u.CacheReadTokens + c.u.CacheWriteTokens }

// lifetime is how long what c wrote stays cached.
func (c cacheCall) lifetime() time.Duration {
	if c.u.CacheWrite1hTokens > 0 || c.u.CacheTTL == "1h" {
		return CacheLifetime1h
	}
	return CacheLifetime
}

// Write1h is the price of a 1-hour cache write: the table's, or twice the
// input price (the API's multiplier) when the table has none.
func (p Price) Write1h() float64 {
	if p.CacheWrite1h > 0 {
		return p.CacheWrite1h
	}
	return 2 * p.Input
}

// Cache analyses the usage events of a journal: hit ratios, what caching
// saved, and what misses lost, per agent, per task and for the team.
func Cache(events []store.Event, prices Prices) CacheReport {
	r := CacheReport{ByAgent: map[string]CacheFigures{}, ByTask: map[string]CacheFigures{}, Misses: []Miss{}}
	var calls []cacheCall
	for _, e := range events {
		if e.Type != "usage" {
			continue
		}
		env, err := teamevent.Decode(e)
		if err != nil {
			continue // a malformed line: Tally counts what it can of it
		}
		u, ok := env.Event.(teamevent.Usage)
		if !ok {
			continue
		}
		agent := u.AgentName
		if agent == "" {
			agent = env.Agent
		}
		calls = append(calls, cacheCall{at: env.TS, agent: agent, u: u})
	}
	// Per agent in time order; the journal is in append order already,
	// but lines from processes of their own may interleave.
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].at.Before(calls[j].at) })
	last := map[string]*cacheCall{}
	for i := range calls {
		c := &calls[i]
		p, ok := prices.Lookup(c.u.Model)
		c.priced = ok
		w1h := min(c.u.CacheWrite1hTokens, c.u.CacheWriteTokens)
		w5m := c.u.CacheWriteTokens - w1h
		c.paid = (float64(c.u.InputTokens)*p.Input + float64(c.u.CacheReadTokens)*p.CacheRead +
			float64(w5m)*p.CacheWrite + float64(w1h)*p.Write1h()) / 1e6
		c.uncached = float64(c.all()) * p.Input / 1e6
		prev := last[c.agent]
		c.first = prev == nil
		if prev != nil {
			c.miss = missOf(prev, c, p)
			if c.miss != nil {
				r.Misses = append(r.Misses, *c.miss)
			}
		}
		last[c.agent] = c
		r.Total.add(*c)
		a := r.ByAgent[c.agent]
		a.add(*c)
		r.ByAgent[c.agent] = a
		if c.u.Task != "" {
			t := r.ByTask[c.u.Task]
			t.add(*c)
			r.ByTask[c.u.Task] = t
		}
	}
	r.Total.finish()
	for k, f := range r.ByAgent {
		f.finish()
		r.ByAgent[k] = f
	}
	for k, f := range r.ByTask {
		f.finish()
		r.ByTask[k] = f
	}
	return r
}

// missOf says whether c paid again for what prev left cached: everything
// prev read or wrote was in the cache after it, and a call that reads less
// than that, while writing or paying input, lost the difference.
func missOf(prev, c *cacheCall, p Price) *Miss {
	cached := prev.u.CacheReadTokens + prev.u.CacheWriteTokens
	short := cached - c.u.CacheReadTokens
	repaid := c.u.CacheWriteTokens + c.u.InputTokens
	if cached == 0 || short <= 0 || repaid == 0 {
		return nil
	}
	tokens := min(short, repaid)
	// Re-written tokens cost a write instead of a read; the rest of the
	// lost prefix came back as plain input.
	written := min(tokens, c.u.CacheWriteTokens)
	w1h := min(written, c.u.CacheWrite1hTokens)
	plain := tokens - written
	lost := (float64(written-w1h)*(p.CacheWrite-p.CacheRead) + float64(w1h)*(p.Write1h()-p.CacheRead) +
		float64(plain)*(p.Input-p.CacheRead)) / 1e6
	m := &Miss{Agent: c.agent, At: c.at, Task: c.u.Task, Idle: c.at.Sub(prev.at), Tokens: tokens, LostUSD: lost}
	switch {
	case m.Idle > prev.lifetime():
		m.Why = "idle"
	case c.all() < prev.all():
		m.Why = "compaction"
	default:
		m.Why = "prefix changed"
	}
	return m
}
