package team

// Hook wiring (issue 13 §2), kept in one file: who the lead and the
// teammates are to hooks (session_id, transcript_path, agent_id), and the
// session, compaction and subagent events. The team package is to be
// rebuilt; this is the least that fires each event where it happens.

import (
	"context"
	"path/filepath"
	"strings"
	"sync"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/hook"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/subagent"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/tool"
)

// leadHooks is what the lead's hook events need that changes during a
// session. It has its own lock: hooks fire from gates and tools, some of
// which may run while the session's lock is held.
type leadHooks struct {
	mu      sync.Mutex
	session string // the lead's session_id; see package hook's SessionID
	team    string
	pending []llm.Block // SessionStart context the model has not had yet
	ended   bool
}

// transcriptPath is member's transcript file, as hooks get it; "" when the
// state directory is not known.
func (r *Rules) transcriptPath(team, member string) string {
	if r == nil || r.StateDir == "" || team == "" {
		return ""
	}
	return filepath.Join(r.StateDir, "teams", team, "transcripts", member+".jsonl")
}

// leadWho is the lead as its hooks see it: its team and transcript once it
// has a team.
func (s *Session) leadWho() hook.Who {
	return hook.Who{Agent: store.LeadName, Mode: func() string { return string(s.leadMode()) },
		Fill: func(ev *hook.Event) {
			s.hk.mu.Lock()
			id, team := s.hk.session, s.hk.team
			s.hk.mu.Unlock()
			ev.SessionID = id
			if team != "" {
				ev.TeamName, ev.TranscriptPath = team, s.cfg.Rules.transcriptPath(team, store.LeadName)
			}
		}}
}

// subagentTranscripts is where the lead's subagents write their
// transcripts: beside the team's, or under the lead's session when it has
// no team ("": the state directory is not known).
func (s *Session) subagentTranscripts(context.Context) string {
	r := s.cfg.Rules
	if r == nil || r.StateDir == "" {
		return ""
	}
	s.hk.mu.Lock()
	team, session := s.hk.team, s.hk.session
	s.hk.mu.Unlock()
	if team != "" {
		return filepath.Dir(r.transcriptPath(team, store.LeadName))
	}
	return filepath.Join(r.StateDir, "sessions", session, "subagents")
}

// hookSession is the lead's session_id.
func (s *Session) hookSession() string {
	s.hk.mu.Lock()
	defer s.hk.mu.Unlock()
	return s.hk.session
}

// hookTeam tells the lead's hooks its team ("" after TeamDelete); a
// session id, if not empty, replaces the lead's (a resumed team's).
func (s *Session) hookTeam(team, session string) {
	s.hk.mu.Lock()
	defer s.hk.mu.Unlock()
	s.hk.team = team
	if session != "" {
		s.hk.session = session
	}
}

// resumedSession is the lead's session id of a resumed team: the one its
// team_create event kept, else the derived one.
func resumedSession(evs []store.Event, r store.Roster) string {
	for _, e := range evs {
		if e.Type != "team_create" {
			continue
		}
		if env, err := teamevent.Decode(e); err == nil {
			if c, ok := env.Event.(teamevent.TeamCreate); ok && c.SessionID != "" {
				return c.SessionID
			}
		}
	}
	return hook.SessionID(r.Name, store.LeadName, r.CreatedAt)
}

// memberWho is a teammate as its hooks see it.
func memberWho(rules *Rules, team string, created store.Roster, name, role string, mode func() string) hook.Who {
	typ := role
	if typ == "" {
		typ = "teammate"
	}
	return hook.Who{Agent: name, Team: team, Role: role, Mode: mode,
		SessionID: hook.SessionID(team, name, created.CreatedAt), TranscriptPath: rules.transcriptPath(team, name),
		AgentID: name + "@" + team, AgentType: typ}
}

// sessionStart runs the SessionStart hooks (source startup or resume);
// what they add for the model goes with the lead's next turn.
func (s *Session) sessionStart(ctx context.Context, source string) {
	out := s.cfg.Rules.hooks().SessionStart(ctx, s.who, source, s.cfg.Model)
	if blocks := contextBlocks(out.Context); len(blocks) > 0 {
		s.hk.mu.Lock()
		s.hk.pending = append(s.hk.pending, blocks...)
		s.hk.mu.Unlock()
	}
}

// withStartContext adds the SessionStart context the model has not had
// yet to input.
func (s *Session) withStartContext(input []llm.Block) []llm.Block {
	s.hk.mu.Lock()
	defer s.hk.mu.Unlock()
	if len(s.hk.pending) == 0 {
		return input
	}
	out := append(append([]llm.Block(nil), input...), s.hk.pending...)
	s.hk.pending = nil
	return out
}

// EndHooks runs the SessionEnd hooks with Claude Code's reason
// ("prompt_input_exit" when the human left the terminal UI); Close runs
// them with "other" unless they ran already.
func (s *Session) EndHooks(reason string) { s.sessionEnd(reason) }

// sessionEnd runs the SessionEnd hooks, once.
func (s *Session) sessionEnd(reason string) {
	s.hk.mu.Lock()
	ended := s.hk.ended
	s.hk.ended = true
	s.hk.mu.Unlock()
	if !ended {
		s.cfg.Rules.hooks().SessionEnd(context.Background(), s.who, reason)
	}
}

func contextBlocks(ctx []string) []llm.Block {
	var out []llm.Block
	for _, c := range ctx {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, llm.TextBlock(c))
		}
	}
	return out
}

// withCompactHooks returns c with who's compaction hooks (compactHooks).
func (r *Rules) withCompactHooks(who hook.Who, c agent.Config) agent.Config {
	c.PreCompact, c.PostCompact = r.compactHooks(who)
	return c
}

// compactHooks are an agent's agent.Config.PreCompact and PostCompact: the
// PreCompact hooks, then the SessionStart hooks of source "compact", whose
// context goes into the new conversation.
func (r *Rules) compactHooks(who hook.Who) (func(context.Context, agent.CompactReason, string), func(context.Context, agent.Compaction) []llm.Block) {
	h := r.hooks()
	if h == nil {
		return nil, nil
	}
	pre := func(ctx context.Context, reason agent.CompactReason, focus string) {
		trigger := "auto"
		if reason == agent.CompactManual {
			trigger = "manual"
		}
		h.PreCompact(ctx, who, trigger, focus)
	}
	post := func(ctx context.Context, _ agent.Compaction) []llm.Block {
		return contextBlocks(h.SessionStart(ctx, who, "compact", "").Context)
	}
	return pre, post
}

// agentHooks gives the hooks' agent-type hooks their model and what they
// may read: the workspace under the session's policy.
func (r *Rules) agentHooks(p llm.Provider, model string, ws *tool.Workspace) {
	r.hooks().SetAgent(hook.AgentConfig{Provider: p, Model: model, Workspace: ws, Policy: r.policy()})
}

// subagentHooks are a subagent.Runner's Start and Stop: SubagentStart and
// SubagentStop hooks, with the subagent's agent_id and agent_type.
func (r *Rules) subagentHooks(who hook.Who) (start func(context.Context, string, string) (context.Context, []llm.Block), stop func(context.Context, string, string, bool) (string, bool)) {
	h := r.hooks()
	if h == nil {
		return nil, nil
	}
	start = func(ctx context.Context, name, typ string) (context.Context, []llm.Block) {
		sa := hook.Subagent{ID: hook.NewSessionID(), Type: typ}
		if run, ok := subagent.RunOf(ctx); ok {
			sa = hook.Subagent{ID: run.ID, Type: run.Type, TranscriptPath: run.TranscriptPath}
		}
		ctx = hook.WithSubagent(ctx, sa)
		return ctx, contextBlocks(h.SubagentStart(ctx, who, sa).Context)
	}
	stop = func(ctx context.Context, name, last string, active bool) (string, bool) {
		sa, _ := hook.SubagentOf(ctx)
		out := h.StopHooks(ctx, who, hook.Stopping{Subagent: true, Agent: sa, Active: active, LastMessage: last})
		if out.Stop {
			return "", false
		}
		return out.Reason, out.Blocked
	}
	return start, stop
}
