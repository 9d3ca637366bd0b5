package team

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// resumedNotice opens the lead's first turn after a resume.
const resumedNotice = "The team was resumed after an interruption: every teammate that was not shut down is back with its conversation, and messages that had not been read are delivered again."

// Resume brings team name back after an exit or a crash: the lead with its
// conversation, every member that was not shut down (and is not running
// elsewhere) with its own, the protocol requests still waiting for the
// lead, and the messages nobody read. It then carries on like RunHeadless
// until the lead has finished and the team is done.
func (s *Session) Resume(ctx context.Context, name string) (*Result, error) {
	res := &Result{}
	input, err := s.restore(ctx, name)
	if err != nil {
		return res, err
	}
	w := newLeadWaker(s)
	idleOnly := false
	if input == nil {
		wk, err := w.next(ctx, nil, nil, false)
		if err != nil || wk.end != "" {
			return s.finish(res, wk, err)
		}
		input, idleOnly = wk.input, wk.idleOnly
	}
	return s.loop(ctx, w, res, input, idleOnly)
}

// restore brings team name back (the lead's conversation, its members,
// the requests still waiting for the lead) and returns what the lead must
// be told at once: nil when it was not cut off mid-turn and has no request
// to answer, so that it waits for what wakes it, as before the crash.
func (s *Session) restore(ctx context.Context, name string) ([]llm.Block, error) {
	if cur := s.TeamName(); cur != "" {
		return nil, fmt.Errorf("this session already leads team %s", cur)
	}
	t, err := s.cfg.Store.Team(ctx, name)
	if err != nil {
		return nil, err
	}
	if t, err = s.openKey(ctx, t, false); err != nil {
		return nil, fmt.Errorf("resume %s: %w", name, err)
	}
	r, err := t.ReadRoster(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.cur.team != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("this session already leads team %s", s.cur.team.Name())
	}
	s.cur.team, s.cur.pattern = t, r.Pattern
	s.mu.Unlock()
	s.cfg.Rules.playTheme(r.Theme, r.Personas)
	s.sup.follow(t)
	s.sup.startHeartbeat(t)

	msgs, seen, err := restoreConversation(ctx, t, store.LeadName)
	if err != nil {
		return nil, err
	}
	s.lead.SetMessages(msgs)
	s.in.restore(seen)
	evs, err := t.Journal().Read(ctx)
	if err != nil {
		return nil, err
	}
	s.hookTeam(t.Name(), resumedSession(evs, r))
	s.sessionStart(ctx, "resume")
	var unread []store.Message
	if u, err := t.Mailbox().Peek(ctx, store.LeadName); err == nil {
		unread = u
	}
	pending := reopenedRequests(evs, unread, seen)
	s.proto.reopen(pending)

	now := time.Now()
	var restarted, elsewhere []string
	for _, m := range r.Members {
		if m.Status == store.StatusShutdown {
			continue
		}
		if running(m, now) || m.Placement == PlacementRemote {
			// A remote teammate runs on its own machine (troupe agent
			// --join restarts it there).
			elsewhere = append(elsewhere, m.Name)
			continue
		}
		env, err := s.sup.envOf(ctx, t, m.Name)
		if err != nil {
			return nil, fmt.Errorf("resume %s: %w", m.Name, err)
		}
		if err := s.reisolate(ctx, t, m, &env); err != nil {
			return nil, fmt.Errorf("resume %s: %w", m.Name, err)
		}
		if err := s.sup.start(t, m.Name, env); err != nil {
			return nil, fmt.Errorf("resume %s: %w", m.Name, err)
		}
		restarted = append(restarted, m.Name)
	}
	s.sup.markStarted(ctx, t, restarted)
	if r.Remote != "" {
		s.mergeRemote(t)
	}
	s.emit(ctx, t, teamevent.Resume{Restarted: restarted, RunningElsewhere: elsewhere, PendingRequests: len(pending)})

	// The lead speaks first when it was cut off mid-turn or has requests to
	// answer; otherwise it waits for what wakes it, as before the crash.
	var input []llm.Block
	if len(msgs) > 0 && msgs[len(msgs)-1].Role == llm.RoleUser || len(pending) > 0 {
		input = []llm.Block{llm.TextBlock(resumedNotice)}
		for _, p := range pending {
			input = append(input, llm.TextBlock(formatMessage(p)))
		}
	}
	return input, nil
}

// markStarted gives members that were just started again a fresh heartbeat
// and their new pid. Until a member's runtime says so itself, its entry is
// the stale one of its previous life, and a lead that looked then would
// count it dead and its tasks lost (and stop the team as stalled).
func (sv *supervisor) markStarted(ctx context.Context, t store.Team, names []string) {
	if len(names) == 0 {
		return
	}
	now := time.Now().UTC()
	_, err := t.UpdateRoster(context.WithoutCancel(ctx), func(r *store.Roster) error {
		for _, n := range names {
			m, ok := r.Member(n)
			if !ok || m.Status == store.StatusShutdown {
				continue
			}
			m.HeartbeatAt, m.PID = now, os.Getpid()
			if h := sv.handle(n); h != nil {
				if pid := h.pid(); pid != 0 {
					m.PID = pid
				}
			}
		}
		return nil
	})
	if err != nil {
		sv.cfg.Logger.Warn("roster update", "err", err)
	}
}

// loop runs the lead on input and then on whatever wakes it, until the run
// ends in one of the End states.
func (s *Session) loop(ctx context.Context, w *leadWaker, res *Result, input []llm.Block, idleOnly bool) (*Result, error) {
	s.cfg.Pacer.Enter(ctx, store.LeadName)
	defer s.cfg.Pacer.Leave(store.LeadName)
	s.jobs.SetPacing(jobPacing(ctx, s.cfg.Pacer, store.LeadName))
	for {
		r, err := s.runLead(ctx, input, idleOnly)
		if r != nil && r.Text != "" {
			res.Text = r.Text
		}
		if err != nil {
			return s.finish(res, wake{}, err)
		}
		wk, err := w.next(ctx, nil, nil, false)
		if err != nil || wk.end != "" {
			return s.finish(res, wk, err)
		}
		input, idleOnly = wk.input, wk.idleOnly
	}
}

// finish fills in how the run ended. A stall is an error (ErrStalled) that
// carries its explanation.
func (s *Session) finish(res *Result, wk wake, err error) (*Result, error) {
	res = s.result(res)
	if err == nil && wk.end == EndStalled {
		err = fmt.Errorf("%w: %s", ErrStalled, wk.endWhy)
	}
	res.End, res.Why = wk.end, wk.endWhy
	if err != nil {
		res.End = endOf(err)
	}
	return res, err
}

// running reports whether member m still runs somewhere: its heartbeat is
// fresh and, on this machine, its process exists.
func running(m store.Member, now time.Time) bool {
	if m.HeartbeatAt.IsZero() || now.Sub(m.HeartbeatAt) > Lease || m.PID <= 0 {
		return false
	}
	return processAlive(m.PID)
}

// processAlive reports whether pid is a live process on this machine (a
// zombie, killed but not yet reaped, is not).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, rerr := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if rerr != nil {
		return true // no /proc: trust kill(0)
	}
	// The state follows the parenthesised command name.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z' && stat[i+2] != 'X'
	}
	return true
}
