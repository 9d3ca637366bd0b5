package team_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/usage"
)

// napScript: the lead spawns bob, who has nothing to do and idles; in a
// second run the lead wakes him with a message.
const napScript = `
rules:
  - agent: team-lead
    contains: "Start the nap"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: nap}}
      - tool_use: {name: Task, input: {team_name: nap, name: bob, description: sleeper, prompt: "Say you are ready, then wait."}}
  - agent: team-lead
    contains: "Wake bob"
    reply:
      - tool_use: {name: SendMessage, input: {recipient: bob, content: "wake up bob", summary: wake}}
  - agent: team-lead
    contains: "bob is awake"
    reply: [{text: "Bob woke."}]
  - agent: team-lead
    times: 0
    reply: [{text: "Waiting."}]
  - agent: bob
    contains: "wake up bob"
    reply:
      - tool_use: {name: SendMessage, input: {recipient: team-lead, content: "bob is awake"}}
  - agent: bob
    times: 0
    reply: [{text: "Ready."}]
`

// TestIdleTeammateKeepsItsCache is issue 23's idle case: a teammate with
// nothing to claim idles 10 simulated minutes. When the price table makes
// the hour pay, the runtime asks for it, journals the choice, and the
// teammate wakes reading its context from the cache; when the hour is
// priced too dear, it keeps the default 5 minutes and wakes to a miss.
func TestIdleTeammateKeepsItsCache(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		price1h   float64 // per million tokens for claude-sonnet-4*: 6 is the list price
		wantTTL   string  // what bob's calls asked for ("": the default)
		wantWhy   string  // the choice journaled each time bob goes idle
		wantHit   bool    // bob's waking call reads its context from the cache
		wantMiss  bool    // troupe usage counts bob's waking call as a miss
		wantSaved bool    // the choice expects a saving
	}{
		{name: "the hour pays", price1h: 6, wantTTL: "1h", wantWhy: "1h no claimable task", wantHit: true, wantSaved: true},
		{name: "the hour is too dear", price1h: 30, wantWhy: "5m no claimable task; the hour costs more than a re-write", wantMiss: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var skew atomic.Int64
			clock := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
			s, err := fakeapi.ParseScript([]byte(napScript))
			if err != nil {
				t.Fatal(err)
			}
			srv := fakeapi.New(s, fakeapi.Options{Logf: t.Logf, Clock: clock})
			if _, err := srv.Start("127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = srv.Close() })
			f := startOn(t, srv, func(c *team.Config) { c.TeammateModel = "claude-sonnet-4-5" })
			settings := `{"prices": {"claude-sonnet-4": {"input": 3, "output": 15, "cache_write": 3.75, "cache_read": 0.3, "cache_write_1h": ` +
				jsonNumber(tt.price1h) + `}}}`
			if err := os.MkdirAll(filepath.Join(f.ws, ".troupe"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(f.ws, ".troupe", "settings.json"), []byte(settings), 0o644); err != nil {
				t.Fatal(err)
			}

			f.run("Start the nap.")
			if st := rosterStatus(f.roster(), "bob"); st != store.StatusIdle {
				t.Fatalf("bob is %q after the first run, want idle", st)
			}
			bobCalls := len(f.requests("bob"))
			skew.Add(int64(10 * time.Minute)) // bob sleeps 10 simulated minutes
			if res := f.run("Wake bob."); res.Text != "Bob woke." {
				t.Errorf("lead's last text = %q", res.Text)
			}

			var wake *fakeapi.Recorded
			for _, r := range srv.Requests() {
				if r.Agent == "bob" {
					bobCalls--
					if bobCalls == -1 {
						wake = &r
					}
				}
			}
			if wake == nil {
				t.Fatal("bob made no call after the nap")
			}
			if got := wake.Usage.CacheReadInputTokens > 0; got != tt.wantHit {
				t.Errorf("bob's waking call read %d tokens from the cache (wrote %d), want a hit: %v",
					wake.Usage.CacheReadInputTokens, wake.Usage.CacheCreationInputTokens, tt.wantHit)
			}

			// Bob goes idle again after the lead's run has ended; wait for
			// that second choice on the journal (its watch, not a sleep).
			f.waitJournal(func(evs []store.Event) bool { return countChoices(evs, "bob") >= 2 })
			evs := f.journal()
			var choices []string
			saved := 0.0
			var ttls []string
			for _, e := range evs {
				env, err := teamevent.Decode(e)
				if err != nil {
					t.Fatal(err)
				}
				switch ev := env.Event.(type) {
				case teamevent.CacheChoice:
					if ev.Member == "bob" {
						choices = append(choices, ev.TTL+" "+ev.Why)
						saved += ev.ExpectedSavedUSD
					}
				case teamevent.Usage:
					if ev.AgentName == "bob" {
						ttls = append(ttls, ev.CacheTTL)
					}
				}
			}
			want := []string{tt.wantWhy, tt.wantWhy} // bob idles twice
			if diff := cmp.Diff(want, choices); diff != "" {
				t.Errorf("bob's cache choices (-want +got):\n%s", diff)
			}
			for _, ttl := range ttls {
				if ttl != tt.wantTTL {
					t.Errorf("bob's calls journaled cache_ttl %v, want all %q", ttls, tt.wantTTL)
					break
				}
			}
			if got := saved > 0; got != tt.wantSaved {
				t.Errorf("expected saving %v, want one: %v", saved, tt.wantSaved)
			}
			// troupe usage shows both costs: the choice and its saving, or the miss.
			rt := usage.Runtime(evs)
			if len(rt.Choices) != 2 || (rt.ExpectedSavedUSD > 0) != tt.wantSaved {
				t.Errorf("troupe usage lists %d cache choices, expected saving $%.6f", len(rt.Choices), rt.ExpectedSavedUSD)
			}
			cache := usage.Cache(evs, usage.Prices{"claude-sonnet-4": {Input: 3, Output: 15, CacheWrite: 3.75, CacheRead: 0.3, CacheWrite1h: tt.price1h}})
			if got := cache.ByAgent["bob"].Misses > 0; got != tt.wantMiss {
				t.Errorf("troupe usage counts %d misses for bob (lost $%.4f), want a miss: %v",
					cache.ByAgent["bob"].Misses, cache.ByAgent["bob"].LostUSD, tt.wantMiss)
			}
		})
	}
}

func jsonNumber(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func rosterStatus(r store.Roster, name string) string {
	if m, ok := r.Member(name); ok {
		return m.Status
	}
	return ""
}

// countChoices counts member's cache_choice lines.
func countChoices(evs []store.Event, member string) int {
	n := 0
	for _, e := range evs {
		if env, err := teamevent.Decode(e); err == nil {
			if c, ok := env.Event.(teamevent.CacheChoice); ok && c.Member == member {
				n++
			}
		}
	}
	return n
}

// waitJournal waits, on the journal's watch, until done holds for the team's
// journal (at most 30s).
func (f *fixture) waitJournal(done func([]store.Event) bool) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tm, err := f.st.Team(ctx, f.sess.TeamName())
	if err != nil {
		f.t.Fatal(err)
	}
	changed, err := tm.Journal().Watch(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	for !done(f.journal()) {
		select {
		case <-changed:
		case <-ctx.Done():
			f.t.Fatal("the journal never reached the state waited for")
		}
	}
}
