package team

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
)

// End is how a run of the lead ended. Every headless run ends in one of
// these, named in the Result and in the exit code.
type End string

// The ends of a run.
const (
	EndDone         End = "done"              // the lead finished and the team is done
	EndStalled      End = "stalled"           // the team cannot go on; Result.Why says why
	EndWaitingHuman End = "waiting_for_human" // only a human can unblock it (one is attached)
	EndBudget       End = "budget_exhausted"  // a spending limit stopped the lead
	EndInterrupted  End = "interrupted"       // the run was cancelled
	EndFailed       End = "failed"            // the lead's turn failed (API error, max turns, …)
)

// endOf names the end of a run that returned err.
func endOf(err error) End {
	switch {
	case err == nil:
		return EndDone
	case errors.Is(err, ErrStalled):
		return EndStalled
	case errors.Is(err, ErrBudget):
		return EndBudget
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return EndInterrupted
	}
	return EndFailed
}

// assessment is what the team's state says of the lead's next move. It is
// computed from the roster (with liveness), the board, the inboxes and the
// requests waiting for an answer; never from when idle notifications
// happened to arrive.
type assessment struct {
	busy bool // something is still moving: wait for it
	// busyWhy says what moves, for logs and a UI's status line.
	busyWhy string
	done    bool // every member shut down, or idle with nothing left to do
	// problems say why the team cannot go on by itself: tasks nobody can
	// claim, tasks owned by members who are gone, members waiting on the
	// lead. Sorted, one line each.
	problems []string
	// human: members wait for answers only the human can give.
	human []string
	// mark grows whenever the team moves forward: members joined and
	// tasks completed (a task handed back or reassigned is no progress by
	// itself). A stall the lead was told of that is still there at an
	// unchanged mark is final.
	mark int
}

func busy(why string) (assessment, error) { return assessment{busy: true, busyWhy: why}, nil }

func (a assessment) stuck() bool { return !a.busy && !a.done && len(a.problems) > 0 }

// why is the problems in one text.
func (a assessment) why() string { return strings.Join(a.problems, "; ") }

// assess looks at team t once, without blocking.
func (s *Session) assess(ctx context.Context, t store.Team) (assessment, error) {
	r, err := t.ReadRoster(ctx)
	if err != nil {
		return assessment{}, err
	}
	now := time.Now()
	var a assessment
	live := map[string]store.Member{}
	gone := map[string]string{} // member -> how it left
	for _, m := range r.Members {
		switch {
		case m.Status == store.StatusShutdown:
			gone[m.Name] = "has shut down"
		case Dead(m, now):
			gone[m.Name] = "is dead"
		default:
			live[m.Name] = m
		}
	}
	awaiting, asked, withHuman := s.proto.outstanding(&r, now)
	stuckOnAnswer := map[string]bool{} // live members waiting for an answer that has not come
	waitsOnLead := func(name string, reqs []store.Message) {
		stuckOnAnswer[name] = true
		for _, req := range reqs {
			a.problems = append(a.problems, fmt.Sprintf("%s waits for your answer to its %s (request_id %s)",
				name, strings.ReplaceAll(req.Type, "_", " "), req.RequestID))
		}
	}
	for _, m := range live {
		switch m.Status {
		case store.StatusIdle:
			// Idle with a plan waiting for approval: only the answer
			// wakes it, so it claims nothing meanwhile. The answer is the
			// lead's to give, or the human's when the request went to them.
			if reqs := asked[m.Name]; len(reqs) > 0 {
				waitsOnLead(m.Name, reqs)
			} else if withHuman[m.Name] {
				a.human = append(a.human, m.Name)
				stuckOnAnswer[m.Name] = true
			}
		case StatusWaiting:
			reqs := asked[m.Name]
			if len(reqs) == 0 {
				if withHuman[m.Name] {
					a.human = append(a.human, m.Name)
					stuckOnAnswer[m.Name] = true
					continue
				}
				return busy(m.Name + "'s request is on its way")
			}
			waitsOnLead(m.Name, reqs)
		default:
			return busy(m.Name + " is working")
		}
	}
	for name := range awaiting {
		// A member blocked on the lead's answer cannot answer a shutdown
		// request until it has it: that wait is the problem already.
		if !stuckOnAnswer[name] {
			return busy(name + "'s answer to a shutdown request is due")
		}
	}
	// An idle member with mail waiting is about to wake (one blocked on an
	// answer reads nothing else until it has it).
	for name, m := range live {
		if m.Status != store.StatusIdle {
			continue
		}
		waiting, err := t.Mailbox().Peek(ctx, name)
		if err != nil {
			return assessment{}, err
		}
		if len(waiting) > 0 {
			return busy(name + " has mail to read")
		}
	}
	// The mail was looked at after the roster was read: a member that took
	// its mail in between wrote its status "working" before acking it
	// (inbox.ackAfter), and a second read of the roster shows it.
	if idleLive(live) {
		again, err := t.ReadRoster(ctx)
		if err != nil {
			return assessment{}, err
		}
		for name, m := range live {
			if now, ok := again.Member(name); m.Status == store.StatusIdle && ok && now.Status != store.StatusIdle {
				return busy(name + " is " + now.Status)
			}
		}
	}
	board, err := t.Tasks().Board(ctx)
	if err != nil {
		return assessment{}, err
	}
	tasks := board.Tasks
	if len(board.Corrupt) > 0 {
		// Unknown work is unfinished work: a team with a task that cannot
		// be read is never done.
		a.problems = append(a.problems, corruptWhy(board.Corrupt))
	}
	if q := queued(board); len(q) > 0 {
		// The lead's side merges it: the team is not done before.
		s.startMergeQueue(t)
		return busy("task #" + q[0].Task + " waits in the merge queue")
	}
	open := 0
	a.mark = len(r.Members)
	for _, task := range tasks {
		if task.Status == store.TaskCompleted {
			a.mark++
		}
		if task.Status != store.TaskPending && task.Status != store.TaskInProgress {
			continue
		}
		open++
		switch {
		case task.Status == store.TaskInProgress:
			if how, ok := gone[task.Owner]; ok {
				a.problems = append(a.problems, fmt.Sprintf("task #%s is in progress with %s, who %s", task.ID, task.Owner, how))
			} else if _, ok := live[task.Owner]; ok {
				if stuckOnAnswer[task.Owner] {
					continue // its owner's wait is already a problem
				}
				// A working owner is on it; an idle one is reminded of it
				// by its own loop, and hands it back when it will not
				// finish it.
				return busy(task.Owner + " holds task #" + task.ID)
			} else {
				a.problems = append(a.problems, fmt.Sprintf("task #%s is in progress with %q, who is not on the team", task.ID, task.Owner))
			}
		case task.Owner != "":
			if _, ok := live[task.Owner]; ok {
				return busy(task.Owner + " was assigned task #" + task.ID)
			}
			a.problems = append(a.problems, fmt.Sprintf("task #%s is assigned to %s, who %s", task.ID, task.Owner, orNotOnTeam(gone[task.Owner])))
		case len(task.BlockedBy) > 0:
			var on []string
			for _, b := range task.BlockedBy {
				on = append(on, "#"+b)
			}
			// Reported only when nothing it waits on can move either.
			a.problems = append(a.problems, fmt.Sprintf("task #%s waits on %s", task.ID, strings.Join(on, ", ")))
		default:
			fits, gaveBack := false, false
			for _, m := range live {
				if !roleFits(task, m) || stuckOnAnswer[m.Name] {
					continue
				}
				if handedBackBy(task, m.Name) {
					gaveBack = true
					continue
				}
				fits = true
				break
			}
			if fits {
				return busy("task #" + task.ID + " is claimable")
			}
			switch want, _ := task.Metadata["role"].(string); {
			case gaveBack:
				a.problems = append(a.problems, fmt.Sprintf("task #%s was given back unfinished, and no other teammate can take it", task.ID))
			case len(live) == 0:
				a.problems = append(a.problems, fmt.Sprintf("task #%s can be claimed by nobody: no teammate is on the team", task.ID))
			case want != "":
				a.problems = append(a.problems, fmt.Sprintf("task #%s is reserved for role %q, which no teammate has", task.ID, want))
			default:
				a.problems = append(a.problems, fmt.Sprintf("task #%s can be claimed by nobody", task.ID))
			}
		}
	}
	if open == 0 && len(a.problems) == 0 {
		if len(a.human) > 0 {
			return a, nil
		}
		return assessment{done: true}, nil
	}
	sort.Strings(a.problems)
	return a, nil
}

// idleLive reports whether any of live is idle.
func idleLive(live map[string]store.Member) bool {
	for _, m := range live {
		if m.Status == store.StatusIdle {
			return true
		}
	}
	return false
}

func orNotOnTeam(how string) string {
	if how == "" {
		return "is not on the team"
	}
	return how
}

// leadWaker decides what wakes the lead, for headless runs and the terminal
// UI alike: messages at once (with the idle notifications held so far
// folded in), a death at once, and a stalled team once; a team still
// stalled after the lead's turn to fix it ends the run.
type leadWaker struct {
	s    *Session
	held []store.Message // idle notifications not yet given to the lead
	// stallMark is the team's progress when the lead was last given a
	// stalled team to fix; -1 when it was not.
	stallMark int
	// reapedAt is when poll last looked for dead members.
	reapedAt time.Time
}

// reapEvery is how often, at most, the lead's wake looks for members whose
// heartbeat lapsed: a lease is 30 s, and a busy team wakes the lead at
// every claim and change, each look a read of the whole roster.
const reapEvery = time.Second

func newLeadWaker(s *Session) *leadWaker { return &leadWaker{s: s, stallMark: -1} }

// wake is what the lead is woken with, or how the run ends.
type wake struct {
	input    []llm.Block
	why      string
	idleOnly bool // nothing but idle notifications and the team's state
	// messages are the inbox messages (other than idle notifications) in
	// input, as they were sent, for a UI to show verbatim.
	messages []store.Message
	end      End // non-empty: nothing will wake the lead again by itself
	endWhy   string
}

// poll looks at team t once and returns a wake when there is one.
func (w *leadWaker) poll(ctx context.Context, t store.Team) (wake, bool, error) {
	s := w.s
	if now := time.Now(); now.Sub(w.reapedAt) >= reapEvery {
		w.reapedAt = now
		if notice, ok := s.sup.reapDead(ctx, t); ok {
			in := append([]llm.Block{notice}, w.release(ctx, t)...)
			return wake{input: in, why: "a teammate died"}, true, nil
		}
	}
	if err := s.fetchLead(ctx, t); err != nil {
		return wake{}, false, err
	}
	msgs := s.in.take(t)
	var others []store.Message
	for _, m := range msgs {
		if m.Type == store.TypeIdleNotification || claimNotice(m) {
			w.held = append(w.held, m)
		} else {
			others = append(others, m)
		}
	}
	if len(others) > 0 {
		all := append(others, w.held...)
		w.held = nil
		s.in.told(ctx, t, all, AtIdle)
		return wake{input: messageBlocks(all), why: "message from " + others[0].From, messages: others}, true, nil
	}
	a, err := s.assess(ctx, t)
	if err != nil {
		return wake{}, false, err
	}
	if s.cfg.Logger != nil {
		s.cfg.Logger.Debug("lead wait", "busy", a.busyWhy, "done", a.done, "problems", a.problems)
	}
	switch {
	case a.done:
		return wake{end: EndDone}, true, nil
	case a.stuck():
		if w.stallMark == a.mark {
			// The lead had its turn and nothing moved.
			return wake{end: EndStalled, endWhy: a.why()}, true, nil
		}
		w.stallMark = a.mark
		in := []llm.Block{llm.TextBlock(stallNotice(a))}
		in = append(in, w.release(ctx, t)...)
		return wake{input: in, why: "the team is stalled", idleOnly: true}, true, nil
	case !a.busy && len(a.human) > 0:
		return wake{end: EndWaitingHuman, endWhy: strings.Join(a.human, ", ") + " wait for the human's answer"}, true, nil
	}
	return wake{}, false, nil
}

// release hands the idle notifications held so far to the lead's model.
func (w *leadWaker) release(ctx context.Context, t store.Team) []llm.Block {
	held := w.held
	w.held = nil
	if t != nil {
		w.s.in.told(ctx, t, held, AtIdle)
	}
	return messageBlocks(held)
}

// stallNotice tells the lead why its team cannot go on, once, so it can fix
// it: spawn someone, reassign, answer.
func stallNotice(a assessment) string {
	var b strings.Builder
	b.WriteString("<team-notice>The team is stalled: every teammate is idle and it cannot go on by itself.\n")
	for _, p := range a.problems {
		b.WriteString("- " + p + "\n")
	}
	b.WriteString("Fix it now (spawn a teammate, reassign or delete tasks, answer requests); if the team is still stalled after this turn, the run ends as stalled.</team-notice>")
	return b.String()
}

// next blocks until something should wake the lead (or the run ends).
// pending, if not nil, is checked first on every round (the human's queue
// in the terminal UI) and wins over the team. With quiet, the team is
// looked at only after the first event (the UI's wait after an end it
// already reported).
func (w *leadWaker) next(ctx context.Context, human <-chan struct{}, pending func() (wake, bool), quiet bool) (wake, error) {
	s := w.s
	var (
		watched store.Team
		stop    context.CancelFunc = func() {}
		inboxCh <-chan struct{}
		boardCh <-chan struct{}
	)
	defer func() { stop() }()
	// Liveness is checked on a slow tick: a dead member sends no event.
	alive := time.NewTicker(Lease / 2)
	defer alive.Stop()
	for {
		if pending != nil {
			if wk, ok := pending(); ok {
				return wk, nil
			}
		}
		t, err := s.Team()
		switch {
		case errors.Is(err, ErrNoTeam):
			t = nil
			if pending == nil {
				return wake{end: EndDone}, nil // no team: the lead's answer is the run
			}
		case err != nil:
			return wake{}, err
		}
		if t != watched {
			stop()
			watched, inboxCh, boardCh = t, nil, nil
			if t != nil {
				wctx, cancel := context.WithCancel(ctx)
				stop = cancel
				if inboxCh, err = t.Mailbox().Watch(wctx, store.LeadName); err != nil {
					return wake{}, err
				}
				if boardCh, err = t.Tasks().Watch(wctx); err != nil {
					return wake{}, err
				}
			}
		}
		if t != nil && !quiet {
			wk, ok, err := w.poll(ctx, t)
			if err != nil || ok {
				return wk, err
			}
		}
		quiet = false
		if _, err := s.cfg.Pacer.Wait(ctx, store.LeadName, func(ctx context.Context) int {
			select {
			case <-ctx.Done():
				return -1
			case <-human:
			case <-inboxCh:
			case <-boardCh:
			case <-alive.C:
			}
			return 0
		}); err != nil {
			return wake{}, err
		}
	}
}
