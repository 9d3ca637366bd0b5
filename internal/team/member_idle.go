package team

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// idle waits for the next thing to work on, without any model call: queued
// or arriving messages, the member's own unfinished task, or a claimable
// task that fits its role. It returns nil input when the member should
// exit (shutdown approved, idle timeout).
func (m *Member) idle(ctx context.Context) ([]llm.Block, string, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inboxCh, err := m.cfg.Team.Mailbox().Watch(wctx, m.name)
	if err != nil {
		return nil, "", err
	}
	// The board wakes this member only for a change it could act on.
	boardCh, stopBoard, err := watchBoard(m.cfg.Team, m.wantsBoard)
	if err != nil {
		return nil, "", err
	}
	defer stopBoard()
	var timeout <-chan time.Time
	announced := false
	for {
		if err := m.fetch(ctx); err != nil {
			return nil, "", err
		}
		input, why, exit, err := m.nextWork(ctx)
		if err != nil || exit {
			return nil, "", err
		}
		if input != nil {
			return input, why, nil
		}
		if !announced && m.st.idleHookBlocks < 3 {
			if h := m.cfg.Rules.hooks(); h.Has("TeammateIdle") {
				if out := h.TeammateIdle(ctx, m.who); out.Blocked {
					// At most three times in a row, so a hook cannot keep a
					// member (and the model bill) spinning.
					m.st.idleHookBlocks++
					m.emit(ctx, teamevent.HookTeammateIdle{Member: m.name, Reason: out.Reason})
					return []llm.Block{llm.TextBlock("A TeammateIdle hook sent you back to work: " + out.Reason)}, "TeammateIdle hook", nil
				}
			}
		}
		if !announced {
			// Nothing to do: now the member is idle, and says so once.
			announced = true
			m.setStatus(ctx, store.StatusIdle, m.st.goIdle)
			m.journalCacheChoice(ctx)
			m.send(ctx, store.Message{Type: store.TypeIdleNotification, To: store.LeadName,
				Content: m.name + " is idle", Summary: m.st.goIdle})
			if m.cfg.IdleTimeout > 0 {
				t := time.NewTimer(m.cfg.IdleTimeout)
				defer t.Stop()
				timeout = t.C
			}
		}
		woke, err := m.cfg.Pacer.Wait(ctx, m.name, func(ctx context.Context) int {
			select {
			case <-ctx.Done():
				return -1
			case <-inboxCh:
			case <-boardCh:
			case <-timeout:
				return wokeTimeout
			}
			return 0
		})
		if err != nil {
			return nil, "", err
		}
		if woke == wokeTimeout {
			m.emit(ctx, teamevent.IdleTimeout{Member: m.name, After: m.cfg.IdleTimeout.String()})
			m.markShutdown(ctx, "idle timeout")
			m.send(ctx, store.Message{Type: store.TypeMessage, To: store.LeadName,
				Content: fmt.Sprintf("%s exited after %s idle.", m.name, m.cfg.IdleTimeout), Summary: "exited (idle timeout)"})
			return nil, "", nil
		}
	}
}

// wantsBoard reports whether this idle member would act on a board of
// tasks: a task of its own in progress or one it may claim, or any change
// while a shutdown request waits for its own tasks to end.
func (m *Member) wantsBoard(tasks []store.Task) bool {
	if _, ok := m.proto.shutdownRequest(); ok {
		return true
	}
	return couldAct(tasks, store.Member{Name: m.name, Role: m.me.Role})
}

// wokeTimeout is a wait that ended because its time ran out (an idle
// member's idle timeout, TeamDelete's wait for members).
const wokeTimeout = 1

// nextWork decides what an idle member does next. Messages come first; a
// shutdown request is approved at once when the member holds no unfinished
// task. While a plan waits for approval only messages wake the member.
func (m *Member) nextWork(ctx context.Context) (input []llm.Block, why string, exit bool, err error) {
	// One read of the board for the whole decision.
	var board []store.Task
	read := false
	list := func() ([]store.Task, error) {
		if read {
			return board, nil
		}
		// Read, never changed here: the store's own copy will do.
		b, err := store.ListShared(ctx, m.cfg.Team.Tasks())
		if err != nil {
			return nil, err
		}
		board, read = b, true
		return board, nil
	}
	queued := m.in.queued()
	// A shutdown request nobody answered yet: still queued, or delivered
	// while the member worked and left unanswered by its model.
	var shutdown *store.Message
	if req, ok := m.proto.shutdownRequest(); ok {
		shutdown = &req
	}
	pending, approvedPlan := m.proto.plan()
	planWait := pending != ""

	if shutdown != nil {
		own, err := m.ownUnfinishedIn(list)
		if err != nil {
			return nil, "", false, err
		}
		if len(own) == 0 {
			m.approveShutdown(ctx, *shutdown, "idle with no unfinished task")
			return nil, "", true, nil
		}
	}
	if queued {
		msgs := m.in.deliver(ctx, m.cfg.Team, AtIdle)
		m.st.mu.Lock()
		clear(m.st.nudged)
		m.st.currentTask = ""
		m.st.idleHookBlocks = 0
		m.st.mu.Unlock()
		return messageBlocks(msgs), "message", false, nil
	}
	if planWait {
		return nil, "", false, nil
	}
	m.st.mu.Lock()
	over := m.st.overBudget
	m.st.mu.Unlock()
	if over {
		if err := m.budget.check(ctx, m.name); err != nil {
			return nil, "", false, nil // still over: only a message wakes it
		}
		m.st.mu.Lock()
		m.st.overBudget = false
		m.st.mu.Unlock()
	}
	own, err := m.ownUnfinishedIn(list)
	if err != nil {
		return nil, "", false, err
	}
	for _, t := range own {
		m.st.mu.Lock()
		n := m.st.nudged[t.ID]
		m.st.nudged[t.ID] = n + 1
		m.st.mu.Unlock()
		if n >= MaxReminders {
			// Reminded enough: the task goes back to the board for
			// someone else, and the lead hears of it.
			m.handBack(ctx, t, fmt.Sprintf("after %d reminders it was still unfinished", MaxReminders))
			continue
		}
		m.st.setTask(t.ID)
		approved := m.me.PlanModeRequired && approvedPlan
		head := "You still own unfinished"
		if n > 0 {
			head = fmt.Sprintf("Reminder %d (after %d it goes back to the board): you ended your turn but still own unfinished", n, MaxReminders)
		}
		blocks := []llm.Block{llm.TextBlock(taskText(t, head))}
		if n > 0 {
			blocks = append(blocks, llm.TextBlock("Finish it and mark it completed with TaskUpdate, or give it back (TaskUpdate status pending, owner \"\") and tell the lead why. You claim nothing new while you own it."))
		}
		if approved {
			blocks = append(blocks, llm.TextBlock("Your plan has been approved: go ahead with the work."))
		}
		return blocks, "resume task #" + t.ID, false, nil
	}
	t, err := m.claim(ctx, list)
	if err != nil {
		return nil, "", false, err
	}
	if t != nil {
		m.st.mu.Lock()
		m.st.idleHookBlocks = 0
		m.st.currentTask = t.ID
		m.st.mu.Unlock()
		return []llm.Block{llm.TextBlock(taskText(*t, "You claimed"))}, claimedWhy(t.ID), false, nil
	}
	return nil, "", false, nil
}

// ownUnfinished returns the tasks in progress that this member owns.
func (m *Member) ownUnfinished(ctx context.Context) ([]store.Task, error) {
	return m.ownUnfinishedIn(func() ([]store.Task, error) { return m.cfg.Team.Tasks().List(ctx) })
}

// ownUnfinishedIn is ownUnfinished on the board list returns.
func (m *Member) ownUnfinishedIn(list func() ([]store.Task, error)) ([]store.Task, error) {
	tasks, err := list()
	if err != nil {
		return nil, err
	}
	var out []store.Task
	for _, t := range tasks {
		if t.Owner == m.name && t.Status == store.TaskInProgress {
			out = append(out, t)
		}
	}
	return out, nil
}

// claim takes the lowest-id claimable task that fits this member's role,
// by compare-and-set: the candidates go to the board in one claim, which
// passes over the ones other members took first (store.Tasks.ClaimFirst).
func (m *Member) claim(ctx context.Context, list func() ([]store.Task, error)) (*store.Task, error) {
	tasks, err := list()
	if err != nil {
		return nil, err
	}
	me := store.Member{Name: m.name, Role: m.me.Role}
	// The candidates by their place on the board, not copies: a member
	// looks at the board after every change, and most of it is claimable
	// early in a run.
	var cands []int
	for i := range tasks {
		if t := &tasks[i]; t.Claimable() == nil && roleFits(*t, me) && !handedBackBy(*t, m.name) {
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		return nil, nil
	}
	slices.SortFunc(cands, func(a, b int) int { return cmp.Compare(store.TaskNum(tasks[a].ID), store.TaskNum(tasks[b].ID)) })
	ids := make([]string, len(cands))
	for i, c := range cands {
		ids[i] = tasks[c].ID
	}
	got, err := m.cfg.Team.Tasks().ClaimFirst(ctx, m.name, ids)
	if errors.Is(err, store.ErrNoTask) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// Seed 004: the lead hears of the task before any work on it starts.
	// The notice follows the claim, not the other way round: a notice
	// sent before a claim that then loses would tell the lead of a task
	// the member never takes.
	evs := make([]teamevent.Event, 0, 3)
	if m.st.announce != nil {
		sent, err := m.st.announce(ctx, got)
		if err != nil {
			m.release(ctx, got.ID)
			return nil, fmt.Errorf("tell the lead before working on task #%s: %w", got.ID, err)
		}
		if sent != nil {
			evs = append(evs, sent)
		}
	}
	// The notice's event, the claim's and the wake's status (nextWork's
	// why), in one append, observations of what the board and the lead's
	// inbox hold durably: the model request does not wait for their fsync.
	woke := teamevent.Status{Member: m.name, Status: store.StatusWorking, Why: claimedWhy(got.ID)}
	m.emitDeferred(ctx, append(evs, teamevent.Claim{Task: got.ID, Owner: m.name, Subject: got.Subject}, woke)...)
	m.st.mu.Lock()
	m.st.statusJournaled = true
	m.st.mu.Unlock()
	return &got, nil
}

// claimedWhy is the reason of a wake that claimed task id.
func claimedWhy(id string) string { return "claimed task #" + id }
