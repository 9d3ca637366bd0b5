package usage

import (
	"fmt"
	"io"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// Choice is a prompt cache lifetime the runtime chose for a teammate
// expected to idle (journal type "cache_choice").
type Choice struct {
	teamevent.CacheChoice
	At string `json:"at"`
}

// Governor is one time the coordination governor told the lead to batch
// its messages (journal type "coordination").
type Governor struct {
	teamevent.Coordination
	At string `json:"at"`
}

// RuntimeReport is what the runtime did about the bill by itself: the
// cache lifetimes it chose and the coordination warnings it gave.
type RuntimeReport struct {
	Choices []Choice `json:"cache_choices,omitempty"`
	// ExpectedSavedUSD sums the choices of the hour: what they save over
	// the default lifetime when the idle outlasts it.
	ExpectedSavedUSD float64    `json:"expected_saved_usd,omitempty"`
	Governor         []Governor `json:"coordination_warnings,omitempty"`
}

// Runtime reads the runtime's cost decisions from a journal.
func Runtime(events []store.Event) RuntimeReport {
	var r RuntimeReport
	for _, e := range events {
		if e.Type != "cache_choice" && e.Type != "coordination" {
			continue
		}
		env, err := teamevent.Decode(e)
		if err != nil {
			continue
		}
		at := env.TS.UTC().Format("15:04:05")
		switch ev := env.Event.(type) {
		case teamevent.CacheChoice:
			r.Choices = append(r.Choices, Choice{CacheChoice: ev, At: at})
			if ev.TTL == "1h" {
				r.ExpectedSavedUSD += ev.ExpectedSavedUSD
			}
		case teamevent.Coordination:
			r.Governor = append(r.Governor, Governor{Coordination: ev, At: at})
		}
	}
	return r
}

// Print writes the runtime section of troupe usage; nothing when the
// runtime decided nothing.
func (r RuntimeReport) Print(w io.Writer) {
	if len(r.Choices) > 0 {
		fmt.Fprintf(w, "cache lifetimes chosen (expected saving of the hour: $%.4f)\n", r.ExpectedSavedUSD)
		for _, c := range r.Choices {
			fmt.Fprintf(w, "  %s %-14s %-3s for %d tokens: %s, expected saving $%.4f\n",
				c.At, c.Member, c.TTL, c.Tokens, c.Why, c.ExpectedSavedUSD)
		}
	}
	if len(r.Governor) > 0 {
		fmt.Fprintln(w, "coordination warnings")
		for _, g := range r.Governor {
			fmt.Fprintf(w, "  %s lead's coordination %d of %d tokens over the last %d calls (%.0f%%, over %.0f%%)\n",
				g.At, g.CoordinationTokens, g.TeamTokens, g.Window, 100*g.Share, 100*g.MaxShare)
		}
	}
}
