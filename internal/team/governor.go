package team

import (
	"context"
	"fmt"
	"sync"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// The coordination governor (issue 23). A lead that talks more than its
// team works spends the team's money on coordination: its own turns, the
// protocol traffic it answers, the idle notifications it folds. The
// governor weighs the lead's tokens against the whole team's over the
// last calls and, past the set share, tells the lead once per window, with
// the figures, to batch its messages and let the board drive the work.

// Governor defaults: the window of calls weighed and the share of the
// team's tokens the lead's coordination may take (team.maxCoordinationShare).
const (
	GovernorWindow              = 20
	DefaultMaxCoordinationShare = 0.5
)

// governor watches one session's lead. Its lock is a leaf.
type governor struct {
	maxShare float64
	window   int

	mu   sync.Mutex
	told int // usage events counted when the lead was last told (-1: never)
}

func newGovernor(maxShare float64) *governor {
	if maxShare <= 0 {
		maxShare = DefaultMaxCoordinationShare
	}
	return &governor{maxShare: maxShare, window: GovernorWindow, told: -1}
}

// weigh reads the usage events of the journal and returns the notice
// for the lead when its coordination is over the share and it was not
// told within the last window.
func (g *governor) weigh(evs []store.Event) *teamevent.Coordination {
	var calls []teamevent.Usage
	for _, e := range evs {
		if e.Type != "usage" {
			continue
		}
		env, err := teamevent.Decode(e)
		if err != nil {
			continue
		}
		if u, ok := env.Event.(teamevent.Usage); ok {
			if u.AgentName == "" {
				u.AgentName = env.Agent
			}
			calls = append(calls, u)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	n := len(calls)
	if n < g.window || (g.told >= 0 && n-g.told < g.window) {
		return nil
	}
	var lead, all int64
	for _, u := range calls[n-g.window:] {
		tok := u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
		all += tok
		if u.AgentName == store.LeadName && u.Kind == UsageCoordination {
			lead += tok
		}
	}
	if all == 0 {
		return nil
	}
	share := float64(lead) / float64(all)
	if share <= g.maxShare {
		return nil
	}
	g.told = n
	return &teamevent.Coordination{Window: g.window, CoordinationTokens: lead, TeamTokens: all, Share: share, MaxShare: g.maxShare}
}

// coordinationNotice is what the lead is told.
func coordinationNotice(c teamevent.Coordination) string {
	return fmt.Sprintf("<coordination-notice>Your coordination took %d of the team's %d tokens over its last %d model calls (%.0f%%, above the %.0f%% set by team.maxCoordinationShare). "+
		"Batch your messages (one message with everything a teammate needs, not several), put the work on the task board so teammates claim it themselves, "+
		"and wait for results instead of checking on them.</coordination-notice>",
		c.CoordinationTokens, c.TeamTokens, c.Window, 100*c.Share, 100*c.MaxShare)
}

// govern weighs the lead's coordination and returns the notice to deliver
// at its boundary or wake (nil most of the time); the notice is journaled.
func (s *Session) govern(ctx context.Context) []llm.Block {
	t, err := s.Team()
	if err != nil {
		return nil
	}
	evs, err := t.Journal().Read(ctx)
	if err != nil {
		return nil // the governor advises; a journal it cannot read is reported elsewhere
	}
	c := s.usage.governor().weigh(evs)
	if c == nil {
		return nil
	}
	s.emit(ctx, t, *c)
	return []llm.Block{llm.TextBlock(coordinationNotice(*c))}
}
