package team

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/store"
)

// Result is how a headless session ended.
type Result struct {
	Text  string
	Team  string
	Stats Stats
	Usage llm.Usage
	// End is how the run ended; Why explains a stall (which tasks nobody
	// can claim, which are owned by members who are gone, who waits on
	// whom) or what the human must answer.
	End End
	Why string
}

// RunHeadless gives the lead the goal and keeps the team going until the
// lead has finished and the team is done: every teammate shut down, or idle
// with nothing left they could take.
func (s *Session) RunHeadless(ctx context.Context, goal string) (*Result, error) {
	res := &Result{}
	s.sessionStart(ctx, "startup")
	extra, err := s.PromptHook(ctx, goal)
	if errors.Is(err, ErrPromptBlocked) {
		return s.result(res), nil // dropped, as Claude Code drops it; the hook told the user why
	}
	if err != nil {
		return res, err
	}
	input := append([]llm.Block{llm.TextBlock(goal)}, extra...)
	return s.loop(ctx, newLeadWaker(s), res, input, false)
}

func (s *Session) result(r *Result) *Result {
	r.Team = s.TeamName()
	r.Stats = s.Stats()
	r.Usage = s.lead.Usage()
	return r
}

// leadSystem is the lead's system prompt: troupe's own, or the one the
// user gave instead, with the user's addition at its end.
func leadSystem(cfg Config, id agent.Identity) string {
	sys := cfg.SystemPrompt
	if strings.TrimSpace(sys) == "" {
		instr := leadInstructions
		if rules := cfg.Rules.leadRules(); rules != "" {
			instr += "\n\n" + rules
		}
		sys = agent.Prompt{Identity: id, Workspace: cfg.Workspace.Dir(), Instructions: instr, Sections: cfg.Sections}.String()
	}
	if a := strings.TrimSpace(cfg.AppendSystemPrompt); a != "" {
		sys = strings.TrimRight(sys, "\n") + "\n\n" + a + "\n"
	}
	return sys
}

// PermissionMode is the mode the lead was given (or last switched to); the
// mode in force may be stricter (see leadMode).
func (s *Session) PermissionMode() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.PermissionMode
}

// SetPermissionMode switches the lead's permission mode from its next tool
// call on (Shift+Tab in the terminal UI); teammates spawned later inherit
// it unless the settings name a default. Delegate is taken only once the
// lead has a team: its tools stay registered, and the gate refuses all but
// management ones at each call (leadMode), so the switch needs no restart.
func (s *Session) SetPermissionMode(mode string) error {
	if mode == PermDelegate {
		return s.switchDelegate()
	}
	if !validPermissionMode(mode) {
		return fmt.Errorf("team: cannot switch the lead to permission mode %q (want one of %s)", mode, modeNames(permission.Modes))
	}
	s.mu.Lock()
	s.cfg.PermissionMode = mode
	s.mu.Unlock()
	return nil
}

// leadMode is the lead's permission mode now: delegate when asked for, or
// when its team's pattern has the lead only manage (an unknown pattern
// blocks nothing).
func (s *Session) leadMode() permission.Mode {
	s.mu.Lock()
	p, mode := s.cur.pattern, s.cfg.PermissionMode
	s.mu.Unlock()
	if s.cfg.Delegate || mode == PermDelegate || s.cfg.Rules.manageOnly(p) {
		return permission.Delegate
	}
	m, _ := permission.ParseMode(mode)
	return m
}

// runLead runs one turn of the lead, counting its model calls; Stop hooks
// may send it back to work.
func (s *Session) runLead(ctx context.Context, input []llm.Block, idleOnly bool) (*agent.Result, error) {
	s.mu.Lock()
	s.cur.stats.LeadWakes++
	s.mu.Unlock()
	r, err := s.lead.Run(ctx, append(s.withStartContext(input), s.govern(ctx)...)...)
	s.count(r, idleOnly)
	if err == nil {
		stopLoop(ctx, s.cfg.Rules.hooks(), s.who, r, func(in []llm.Block) (*agent.Result, error) {
			again, err := s.lead.Run(ctx, in...)
			s.count(again, false)
			if again != nil && again.Text != "" {
				r.Text = again.Text
			}
			return again, err
		})
	}
	return r, err
}

func (s *Session) count(r *agent.Result, idleOnly bool) {
	if r == nil {
		return
	}
	s.mu.Lock()
	s.cur.stats.LeadModelTurns += r.Turns
	if idleOnly {
		s.cur.stats.LeadTurnsFromIdleOnly += r.Turns
	}
	s.mu.Unlock()
}

// ErrPromptBlocked is wrapped by PromptHook's error when a hook dropped
// the prompt: as in Claude Code, nothing is sent and that is not a
// failure.
var ErrPromptBlocked = errors.New("a UserPromptSubmit hook blocked the prompt")

// PromptHook runs the UserPromptSubmit hooks on what the human typed. A
// block (or "continue": false) returns ErrPromptBlocked with the hook's
// reason (the prompt is not sent); context the hooks add comes back as
// blocks to send with it.
func (s *Session) PromptHook(ctx context.Context, prompt string) ([]llm.Block, error) {
	h := s.cfg.Rules.hooks()
	if !h.Has("UserPromptSubmit") {
		return nil, nil
	}
	out := h.UserPromptSubmit(ctx, s.who, prompt)
	if out.Blocked {
		return nil, fmt.Errorf("%w: %s", ErrPromptBlocked, out.Reason)
	}
	if out.Stop {
		return nil, fmt.Errorf("%w: %s", ErrPromptBlocked, out.StopReason)
	}
	return contextBlocks(out.Context), nil
}

// leadBoundary delivers the lead's inbox at each of its tool boundaries.
func (s *Session) leadBoundary(ctx context.Context, _ []string) []llm.Block {
	t, err := s.Team()
	if err != nil {
		return nil
	}
	if err := s.fetchLead(ctx, t); err != nil {
		return nil
	}
	return append(messageBlocks(s.in.deliver(ctx, t, AtToolBoundary)), s.govern(ctx)...)
}

// fetchLead moves what waits in the lead's inbox into its queue without
// blocking; the protocol notes requests and answers, and keeps from the
// lead's model the requests the human answers.
func (s *Session) fetchLead(ctx context.Context, t store.Team) error {
	return s.in.fetch(ctx, t, func(m store.Message) bool { return s.proto.toLead(m, s.cfg.HumanRequests) })
}

// recordLead writes the lead's messages to its transcript (kept until
// TeamCreate when there is no team yet), then acks the inbox messages they
// carry.
func (s *Session) recordLead(m llm.Message) {
	t, err := s.Team()
	if err != nil {
		t = nil
	}
	s.in.record(t, m)
}
