package usage

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// call is one journaled model call at t0+at.
func call(t *testing.T, at time.Duration, u teamevent.Usage) store.Event {
	t.Helper()
	if u.Model == "" {
		u.Model = "claude-sonnet-4-5"
	}
	e, err := teamevent.Encode(u.AgentName, u)
	if err != nil {
		t.Fatal(err)
	}
	e.TS = t0.Add(at)
	return e
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestCacheFigures(t *testing.T) {
	events := []store.Event{
		call(t, 0, teamevent.Usage{AgentName: "alice", InputTokens: 100, CacheWriteTokens: 10_000, Task: "1"}),
		{Type: "send", Agent: "alice"},
		call(t, time.Minute, teamevent.Usage{AgentName: "alice", InputTokens: 100, CacheReadTokens: 10_000, CacheWriteTokens: 500, Task: "1"}),
		call(t, time.Minute, teamevent.Usage{AgentName: "bob", InputTokens: 50, CacheReadTokens: 8_000, CacheWriteTokens: 1_000}),
	}
	r := Cache(events, DefaultPrices())
	tot := r.Total
	if tot.Calls != 3 || tot.CacheRead != 18_000 || tot.CacheWrite != 11_500 || tot.Input != 250 {
		t.Fatalf("total %+v", tot)
	}
	if want := 18_000.0 / 29_750; !near(tot.HitRatio, want) {
		t.Errorf("hit ratio %v, want %v", tot.HitRatio, want)
	}
	// After each agent's first call only alice's second counts.
	if want := 10_000.0 / 10_600; !near(tot.HitRatioAfterFirst, want) {
		t.Errorf("hit ratio after first calls %v, want %v", tot.HitRatioAfterFirst, want)
	}
	// Sonnet: $3 input, $0.30 read, $3.75 write per million.
	paid := (250*3 + 18_000*0.30 + 11_500*3.75) / 1e6
	uncached := 29_750 * 3 / 1e6
	if !near(tot.InputUSD, paid) || !near(tot.UncachedUSD, uncached) || !near(tot.SavedUSD, uncached-paid) {
		t.Errorf("dollars %+v, want paid %v uncached %v", tot, paid, uncached)
	}
	if tot.Misses != 0 || len(r.Misses) != 0 {
		t.Errorf("misses %+v", r.Misses)
	}
	if a := r.ByAgent["alice"]; a.Calls != 2 || !near(a.HitRatio, 10_000.0/20_700) {
		t.Errorf("alice %+v", a)
	}
	if x := r.ByTask["1"]; x.Calls != 2 || x.CacheRead != 10_000 {
		t.Errorf("task 1 %+v", x)
	}
}

// TestIdleCosts is the idle teammate: 10 minutes between two calls. With
// the default lifetime its prefix is gone and written again (a miss whose
// cost usage shows); with the hour it is read.
func TestIdleCosts(t *testing.T) {
	const ctx = 40_000
	run := func(ttl string) CacheReport {
		w1h := func(n int64) int64 {
			if ttl == "1h" {
				return n
			}
			return 0
		}
		second := teamevent.Usage{AgentName: "alice", InputTokens: 10, CacheReadTokens: 2_000, CacheWriteTokens: ctx - 2_000}
		if ttl == "1h" {
			second = teamevent.Usage{AgentName: "alice", InputTokens: 10, CacheReadTokens: ctx, CacheTTL: ttl}
		}
		return Cache([]store.Event{
			call(t, 0, teamevent.Usage{AgentName: "alice", InputTokens: 10, CacheWriteTokens: ctx, CacheWrite1hTokens: w1h(ctx), CacheTTL: ttl}),
			call(t, 10*time.Minute, second),
		}, DefaultPrices())
	}
	short, long := run(""), run("1h")
	wantMiss := []Miss{{Agent: "alice", At: t0.Add(10 * time.Minute), Why: "idle", Idle: 10 * time.Minute,
		Tokens: ctx - 2_000, LostUSD: (ctx - 2_000) * (3.75 - 0.30) / 1e6}}
	if diff := cmp.Diff(wantMiss, short.Misses, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Errorf("5-minute misses (-want +got):\n%s", diff)
	}
	if long.Total.Misses != 0 || len(long.Misses) != 0 {
		t.Errorf("1-hour run missed: %+v", long.Misses)
	}
	// The hour costs more to write ($6 vs $3.75) but saves the re-write.
	if !(long.Total.InputUSD < short.Total.InputUSD) {
		t.Errorf("1h run paid $%v, 5m run $%v: want the hour cheaper over a 10-minute idle", long.Total.InputUSD, short.Total.InputUSD)
	}
	if want := (20.0*3 + ctx*6 + ctx*0.30) / 1e6; !near(long.Total.InputUSD, want) {
		t.Errorf("1h run paid $%v, want $%v", long.Total.InputUSD, want)
	}
}

func TestCacheMissCauses(t *testing.T) {
	events := []store.Event{
		call(t, 0, teamevent.Usage{AgentName: "a", InputTokens: 10, CacheWriteTokens: 50_000}),
		// Compacted: a short conversation after the shared head.
		call(t, time.Minute, teamevent.Usage{AgentName: "a", InputTokens: 10, CacheReadTokens: 3_000, CacheWriteTokens: 2_000}),
		// Same size, but an early byte changed.
		call(t, 2*time.Minute, teamevent.Usage{AgentName: "a", InputTokens: 10, CacheReadTokens: 3_000, CacheWriteTokens: 2_100}),
		// An unpriced model still counts in the ratios.
		call(t, 3*time.Minute, teamevent.Usage{AgentName: "b", Model: "openai:llama3.1", InputTokens: 10}),
	}
	r := Cache(events, DefaultPrices())
	var why []string
	for _, m := range r.Misses {
		why = append(why, m.Why)
	}
	if diff := cmp.Diff([]string{"compaction", "prefix changed"}, why); diff != "" {
		t.Errorf("causes (-want +got):\n%s", diff)
	}
	if r.Total.Unpriced != 1 || r.Total.Calls != 4 {
		t.Errorf("total %+v", r.Total)
	}
}
