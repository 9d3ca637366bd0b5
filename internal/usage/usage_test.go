package usage

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/store"
)

func TestTally(t *testing.T) {
	ev := func(agent, model, task, kind string, in, out, cr, cw float64) store.Event {
		f := map[string]any{"agent_name": agent, "model": model, "kind": kind, "input_tokens": in, "output_tokens": out,
			"cache_read_input_tokens": cr, "cache_creation_input_tokens": cw}
		if task != "" {
			f["task"] = task
		}
		return store.Event{Type: "usage", Agent: agent, Fields: f}
	}
	events := []store.Event{
		ev("team-lead", "claude-sonnet-4-5", "", "coordination", 1000, 100, 0, 2000),
		{Type: "send", Agent: "alice"},
		ev("alice", "claude-haiku-4-5", "2", "work", 500, 50, 1000, 0),
		ev("alice", "claude-haiku-4-5", "10", "work", 500, 50, 1000, 0),
		ev("bob", "openai:llama3.1", "", "coordination", 10, 1, 0, 0),
	}
	r := Tally("t", events, DefaultPrices())
	if r.Total.Calls != 4 || r.Work.Calls != 2 || r.Coordination.Calls != 2 {
		t.Fatalf("calls: total %d work %d coordination %d", r.Total.Calls, r.Work.Calls, r.Coordination.Calls)
	}
	// lead: 1000*3 + 100*15 + 2000*3.75 = 12000 per million.
	if got := r.ByAgent["team-lead"].CostUSD; math.Abs(got-0.012) > 1e-12 {
		t.Errorf("lead cost = %v, want 0.012", got)
	}
	// alice per call: 500*1 + 50*5 + 1000*0.1 = 850 per million.
	if got := r.ByTask["2"].CostUSD; math.Abs(got-0.00085) > 1e-12 {
		t.Errorf("task 2 cost = %v", got)
	}
	if r.ByAgent["bob"].Unpriced != 1 || r.ByAgent["bob"].CostUSD != 0 {
		t.Errorf("bob = %+v, want one unpriced call", r.ByAgent["bob"])
	}
	if diff := cmp.Diff([]string{"2", "10"}, Keys(r.ByTask)); diff != "" {
		t.Errorf("task order (-want +got):\n%s", diff)
	}
	if r.Total.Input != 2010 || r.Total.CacheRead != 2000 || r.Total.CacheWrite != 2000 {
		t.Errorf("total = %+v", r.Total)
	}
}

func TestLookup(t *testing.T) {
	p := DefaultPrices()
	for model, want := range map[string]float64{
		"claude-opus-4-5-20251101":    5,
		"claude-opus-4-1":             15,
		"anthropic:claude-sonnet-4-5": 3,
		"claude-haiku-4-5":            1,
	} {
		got, ok := p.Lookup(model)
		if !ok || got.Input != want {
			t.Errorf("%s: input price %v (%v), want %v", model, got.Input, ok, want)
		}
	}
	if _, ok := p.Lookup("llama3.1"); ok {
		t.Error("an unknown model has a price")
	}
}

// TestTallyShapes: a usage line counts the same whether its numbers are Go
// integers (in process) or JSON numbers (read from disk); a line of the
// wrong shape counts for nothing rather than as a call of zero tokens.
func TestTallyShapes(t *testing.T) {
	events := []store.Event{
		{Type: "usage", Agent: "alice", Fields: map[string]any{"agent_name": "alice", "input_tokens": int64(7), "output_tokens": 3, "kind": "work"}},
		{Type: "usage", Agent: "alice", Fields: map[string]any{"agent_name": "alice", "input_tokens": 7.0, "output_tokens": 3.0, "kind": "work"}},
		{Type: "usage", Agent: "alice", Fields: map[string]any{"agent_name": "alice", "input_tokens": "lots"}},
	}
	r := Tally("t", events, DefaultPrices())
	want := Tokens{Calls: 2, Input: 14, Output: 6, Unpriced: 2}
	if diff := cmp.Diff(want, r.ByAgent["alice"]); diff != "" {
		t.Errorf("alice (-want +got):\n%s", diff)
	}
}
