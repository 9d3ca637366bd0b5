package usage

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

func TestRuntime(t *testing.T) {
	ev := func(agent string, e teamevent.Event) store.Event {
		t.Helper()
		se, err := teamevent.Encode(agent, e)
		if err != nil {
			t.Fatal(err)
		}
		se.TS = t0
		return se
	}
	tests := []struct {
		name      string
		events    []store.Event
		wantSaved float64
		wantText  string
	}{
		{name: "nothing decided", events: []store.Event{call(t, 0, teamevent.Usage{AgentName: "bob", InputTokens: 10})}},
		{
			name: "choices and a warning",
			events: []store.Event{
				ev("bob", teamevent.CacheChoice{Member: "bob", TTL: "1h", Why: "no claimable task", Tokens: 10_000, ExpectedSavedUSD: 0.012}),
				ev("amy", teamevent.CacheChoice{Member: "amy", TTL: "5m", Why: "waiting on plan approval; the hour costs more than a re-write", Tokens: 5_000}),
				ev("team-lead", teamevent.Coordination{Window: 20, CoordinationTokens: 900, TeamTokens: 1000, Share: 0.9, MaxShare: 0.5}),
				{Type: "cache_choice", Fields: map[string]any{"ttl": 7}}, // malformed: skipped
			},
			wantSaved: 0.012,
			wantText: "cache lifetimes chosen (expected saving of the hour: $0.0120)\n" +
				"  12:00:00 bob            1h  for 10000 tokens: no claimable task, expected saving $0.0120\n" +
				"  12:00:00 amy            5m  for 5000 tokens: waiting on plan approval; the hour costs more than a re-write, expected saving $0.0000\n" +
				"coordination warnings\n" +
				"  12:00:00 lead's coordination 900 of 1000 tokens over the last 20 calls (90%, over 50%)\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Runtime(tt.events)
			if !near(r.ExpectedSavedUSD, tt.wantSaved) {
				t.Errorf("expected saving = %v, want %v", r.ExpectedSavedUSD, tt.wantSaved)
			}
			var b strings.Builder
			r.Print(&b)
			if diff := cmp.Diff(tt.wantText, b.String()); diff != "" {
				t.Errorf("printed (-want +got):\n%s", diff)
			}
		})
	}
}
