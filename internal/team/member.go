package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/hook"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/replay/pace"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/text"
	"github.com/troupe-dev/troupe/internal/todo"
	"github.com/troupe-dev/troupe/internal/tool"
)

// MemberConfig configures one teammate's runtime.
type MemberConfig struct {
	Team      store.Team
	Name      string
	Provider  llm.Provider
	Workspace *tool.Workspace
	// DefaultModel is used when the roster names no model.
	DefaultModel string
	IdleTimeout  time.Duration
	MaxTurns     int
	// PermissionTimeout bounds the wait for an answer to a permission
	// request; no answer is a denial (default 10m).
	PermissionTimeout time.Duration
	// Sections are added to the system prompt (project memory, …).
	Sections []string
	// Rules are the settings' permission rules, hooks, guard and patterns.
	Rules *Rules
	// Key, when set, is the team's secret key: Team is sealed with it (see
	// package store/seal). A member of a sealed team needs it; in process
	// it is given the lead's sealed Team instead.
	Key []byte
	// Pacer shares the turn with the rest of a recorded or replayed team.
	Pacer   *pace.Pacer
	Observe func(agent.Event)
	OnEvent func(store.Event)
	Logger  *slog.Logger
}

// Member is a persistent teammate: its own agent loop and context, an idle
// loop that waits on events only, and its side of the protocols.
type Member struct {
	cfg    MemberConfig
	team   store.Team
	name   string
	role   string
	plan   bool // plan_mode_required
	mode   string
	agent  *agent.Agent
	jobs   *tool.Jobs
	events chan struct{} // wakes a gate waiting for a protocol answer

	mu           sync.Mutex
	queue        []store.Message // received, not yet given to the model
	toAck        string          // last id given to the model, acked once recorded
	delivered    []string        // the ids given to the model, recorded with the message
	seen         map[string]bool // ids already in the conversation (restored): never delivered twice
	planPending  string          // request_id of the plan awaiting approval
	planApproved bool
	permWaiting  map[string]chan bool // permission request_id -> answer
	shutdownReqs map[string]string    // unanswered shutdown request_id -> requester
	stopAfter    bool                 // a shutdown was approved: stop at the next boundary
	stopRun      context.CancelFunc
	nudged       map[string]int // own unfinished tasks: reminders given since the last message
	goIdle       string         // the summary of the turn that just ended, for the idle notification
	shutDown     bool           // the roster already says shutdown
	chain        agent.Gate     // guard, PreToolUse hooks, permission policy
	ids          requestIDs
	who          hook.Who
	currentTask  string // the task the member works on, for usage
	budget       *budgets
	overBudget   bool // stopped by a budget: only messages wake it, and the lead is told once
	// idleHookBlocks counts TeammateIdle hooks that sent the member back to
	// work since its last real work.
	idleHookBlocks int
}

// NewMember prepares a teammate from its roster entry.
func NewMember(cfg MemberConfig) (*Member, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if len(cfg.Key) > 0 {
		cfg.Team = sealTeam(cfg.Team, cfg.Key, cfg.OnEvent, cfg.Logger)
	}
	r, err := cfg.Team.ReadRoster(context.Background())
	if err != nil {
		return nil, err
	}
	me, ok := r.Member(cfg.Name)
	if !ok {
		return nil, fmt.Errorf("%w: %q is not on the roster of team %s", store.ErrUnknownMember, cfg.Name, r.Name)
	}
	m := &Member{
		cfg: cfg, team: cfg.Team, name: me.Name, role: me.Role, plan: me.PlanModeRequired, mode: me.PermissionMode,
		jobs: tool.NewJobs(), events: make(chan struct{}, 1), budget: newBudgets(cfg.Team, cfg.Workspace.Dir()),
		permWaiting: map[string]chan bool{}, shutdownReqs: map[string]string{}, nudged: map[string]int{},
	}
	model := me.Model
	if model == "" {
		model = cfg.DefaultModel
	}
	m.who = memberWho(cfg.Rules, r.Name, r, m.name, m.role, func() string { return string(m.permMode()) })
	m.chain = cfg.Rules.gate(cfg.Workspace, m.who, m.permMode,
		func(ctx context.Context, c agent.Call, v permission.Verdict) agent.Decision {
			return m.askPermission(ctx, c, v.Reason)
		},
		recordDecision(m.journal, m.name))
	b := &binding{self: m.name, member: m, fixed: cfg.Team, rules: cfg.Rules, who: m.who}
	id := agent.Identity{Name: m.name, Role: m.role, Team: r.Name}
	instr := teammateInstructions(store.LeadName)
	if m.plan {
		instr += "\n\n" + planModeInstructions
	}
	list := &todo.List{}
	compactor, onCompact := compaction(func() (store.Team, error) { return cfg.Team, nil }, m.name, cfg.Logger)
	ag, err := agent.New(cfg.Rules.withCompactHooks(m.who, agent.Config{
		Name:     m.name,
		Team:     r.Name,
		Provider: cfg.Pacer.Provider(cfg.Provider, me.Name),
		Model:    model,
		System: agent.Prompt{
			Identity:     id,
			Workspace:    cfg.Workspace.Dir(),
			Instructions: instr,
			Sections:     cfg.Sections,
		}.String(),
		Tools:      teammateRegistry(b, list),
		Env:        cfg.Rules.toolEnv(cfg.Workspace, m.name, r.Name, m.jobs),
		MaxTurns:   cfg.MaxTurns,
		Gate:       m.gate,
		AfterTool:  cfg.Rules.afterTool(cfg.Workspace, m.who),
		Boundaries: []agent.Boundary{m.boundary, agent.TodoReminder(list), jobAnnouncer(m.jobs)},
		Observe:    m.observeUsage(cfg.Observe),
		Record:     m.record,
		Identity:   id.Line(),
		Compactor:  compactor,
		OnCompact:  onCompact,
		Budget:     func() error { return m.budget.check(context.Background(), m.name) },
	}))
	if err != nil {
		return nil, err
	}
	m.agent = ag
	// A member that ran before (a restarted process, a resumed team) picks
	// up its conversation, its plan's state and what it was given.
	msgs, seen, err := restoreConversation(context.Background(), cfg.Team, m.name)
	if err != nil {
		return nil, err
	}
	ag.SetMessages(msgs)
	m.seen = seen
	if m.plan {
		if evs, err := cfg.Team.Journal().Read(context.Background()); err == nil {
			m.planPending, m.planApproved = pendingPlan(evs, m.name)
		}
		// The lead's inbox is where a request is committed: one sent just
		// before a crash may be there before the journal says so.
		if unread, err := cfg.Team.Mailbox().Peek(context.Background(), store.LeadName); err == nil {
			for _, u := range unread {
				if u.Type == store.TypePlanApprovalRequest && u.From == m.name {
					m.planPending = u.RequestID
				}
			}
		}
	}
	return m, nil
}

// Agent returns the member's agent.
func (m *Member) Agent() *agent.Agent { return m.agent }

func (m *Member) journal(ctx context.Context, typ string, fields map[string]any) {
	journal(ctx, m.team, m.name, typ, fields, m.cfg.OnEvent, m.cfg.Logger)
}

// setStatus records a state change in the roster and the journal.
func (m *Member) setStatus(ctx context.Context, status, why string) {
	now := time.Now().UTC()
	_, err := m.team.UpdateRoster(context.WithoutCancel(ctx), func(r *store.Roster) error {
		me, ok := r.Member(m.name)
		if !ok {
			return nil
		}
		me.Status, me.HeartbeatAt, me.PID = status, now, os.Getpid()
		return nil
	})
	if err != nil {
		m.cfg.Logger.Warn("roster update", "member", m.name, "err", err)
	}
	f := map[string]any{"member": m.name, "status": status}
	if why != "" {
		f["why"] = why
	}
	m.journal(ctx, "status", f)
}

// Run is the member's life: work on what woke it, go idle, wait for the
// next event, until it is shut down or ctx ends.
func (m *Member) Run(ctx context.Context) (err error) {
	m.cfg.Pacer.Enter(ctx, m.name)
	defer m.cfg.Pacer.Leave(m.name)
	m.jobs.SetPacing(jobPacing(ctx, m.cfg.Pacer, m.name))
	defer m.jobs.StopAll()
	defer func() {
		m.mu.Lock()
		done := m.shutDown
		m.mu.Unlock()
		if !done {
			// Stopped without a shutdown (its process or lead is going
			// away): not shut down, so resumable, and not running, so its
			// heartbeat is left stale: dead until a resume brings it back.
			m.markStopped(ctx, exitWhy(err))
		}
	}()
	m.setStatus(ctx, store.StatusWorking, "")
	m.goIdle = "available"
	for {
		input, why, err := m.idle(ctx)
		if err != nil || input == nil {
			return err
		}
		m.setStatus(ctx, store.StatusWorking, why)
		runCtx, cancel := context.WithCancel(ctx)
		m.mu.Lock()
		m.stopRun = cancel
		m.mu.Unlock()
		// Stop hooks are the session's main agent's (the lead's); a
		// teammate that ends its turn meets the TeammateIdle hooks instead.
		res, runErr := m.agent.Run(runCtx, input...)
		cancel()
		if m.stopping() {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		summary := "available"
		if errors.Is(runErr, ErrBudget) {
			summary = "stopped: " + runErr.Error()
			m.mu.Lock()
			told := m.overBudget
			m.overBudget = true
			m.mu.Unlock()
			m.journal(ctx, "budget", map[string]any{"member": m.name, "reached": runErr.Error()})
			if !told {
				m.send(ctx, store.Message{Type: store.TypeMessage, To: store.LeadName, Summary: "budget reached",
					Content: fmt.Sprintf("I stopped making model calls: %v. Raise my limit (troupe budget %s %s --tokens N, or the budgets of .troupe/settings.json) and message me to let me go on.", runErr, m.team.Name(), m.name)})
			}
		} else if runErr != nil {
			// A failed turn does not end a teammate: it tells the lead and
			// waits for the next event.
			summary = "turn failed: " + runErr.Error()
			m.send(ctx, store.Message{Type: store.TypeMessage, To: store.LeadName,
				Content: fmt.Sprintf("My turn failed and I stopped working: %v", runErr), Summary: "turn failed"})
		} else if res != nil && res.Text != "" {
			summary = text.OneLine(res.Text, 100)
		}
		m.mu.Lock()
		if m.planPending != "" {
			summary = "waiting for plan approval"
		}
		m.mu.Unlock()
		m.goIdle = summary
	}
}

// markShutdown records the member as shut down; its runtime is about to
// end.
func (m *Member) markShutdown(ctx context.Context, why string) {
	m.setStatus(ctx, store.StatusShutdown, why)
	m.mu.Lock()
	m.shutDown = true
	m.mu.Unlock()
}

// markStopped records that the member's runtime ended without a shutdown.
func (m *Member) markStopped(ctx context.Context, why string) {
	stale := time.Now().UTC().Add(-Lease - time.Second)
	_, err := m.team.UpdateRoster(context.WithoutCancel(ctx), func(r *store.Roster) error {
		if me, ok := r.Member(m.name); ok && me.Status != store.StatusShutdown {
			me.HeartbeatAt = stale
		}
		return nil
	})
	if err != nil {
		m.cfg.Logger.Warn("roster update", "member", m.name, "err", err)
	}
	f := map[string]any{"member": m.name}
	if why != "" {
		f["why"] = why
	}
	m.journal(ctx, "stopped", f)
}

func exitWhy(err error) string {
	if err == nil || errors.Is(err, context.Canceled) {
		return ""
	}
	return err.Error()
}

func (m *Member) stopping() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopAfter
}

// send sends a message from this member; failures are logged.
func (m *Member) send(ctx context.Context, msg store.Message) {
	msg.From = m.name
	sent, err := m.team.Mailbox().Send(context.WithoutCancel(ctx), msg)
	if err != nil {
		m.cfg.Logger.Warn("send", "from", m.name, "to", msg.To, "err", err)
		return
	}
	m.journal(ctx, "send", sentFields(sent))
}

func sentFields(m store.Message) map[string]any {
	f := map[string]any{"id": m.ID, "msg_type": m.Type, "from": m.From, "to": m.To}
	if m.RequestID != "" {
		f["request_id"] = m.RequestID
	}
	if m.Approve != nil {
		f["approve"] = *m.Approve
	}
	if m.Summary != "" {
		f["summary"] = m.Summary
	}
	if m.Feedback != "" {
		f["feedback"] = m.Feedback
	}
	if m.Content != "" {
		f["content"] = text.OneLine(m.Content, 200)
	}
	return f
}

// fetch moves what waits in the inbox into the queue without blocking, and
// applies the protocol answers addressed to this member's runtime.
func (m *Member) fetch(ctx context.Context) error {
	now, cancel := context.WithCancel(ctx)
	cancel()
	msgs, err := m.team.Mailbox().Receive(now, m.name)
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if len(msgs) == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, msg := range msgs {
		if m.seen[msg.ID] {
			// Already in the conversation before a restart: consumed now.
			if err := m.team.Mailbox().Ack(context.WithoutCancel(ctx), m.name, msg.ID); err != nil {
				m.cfg.Logger.Warn("ack", "member", m.name, "err", err)
			}
			continue
		}
		// Only the lead and the human answer a member's requests or ask it
		// to shut down; the same types from anyone else reach the model as
		// text and bind nothing.
		binds := fromLeadOrHuman(msg.From)
		switch msg.Type {
		case store.TypePlanApprovalResponse:
			if binds && msg.RequestID != "" && msg.RequestID == m.planPending {
				m.planPending = ""
				m.planApproved = msg.Approve != nil && *msg.Approve
			}
		case store.TypePermissionResponse:
			if ch, ok := m.permWaiting[msg.RequestID]; ok && binds {
				ch <- msg.Approve != nil && *msg.Approve
				delete(m.permWaiting, msg.RequestID)
			}
		case store.TypeShutdownRequest:
			if binds {
				m.shutdownReqs[msg.RequestID] = msg.From
			}
		}
		m.queue = append(m.queue, msg)
	}
	select {
	case m.events <- struct{}{}:
	default:
	}
	return nil
}

// take empties the queue for delivery to the model and marks its last id to
// be acked once the conversation has recorded it.
func (m *Member) take() []store.Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.queue
	m.queue = nil
	if len(q) > 0 {
		m.toAck = q[len(q)-1].ID
		m.delivered = append(m.delivered, ids(q)...)
	}
	return q
}

// boundary delivers waiting messages at each tool boundary, and ends the
// run once a shutdown was approved.
func (m *Member) boundary(ctx context.Context, _ []string) []llm.Block {
	m.mu.Lock()
	stop, cancel := m.stopAfter, m.stopRun
	m.mu.Unlock()
	if stop && cancel != nil {
		cancel()
	}
	if err := m.fetch(ctx); err != nil {
		m.cfg.Logger.Warn("inbox", "member", m.name, "err", err)
	}
	msgs := m.take()
	if len(msgs) == 0 {
		return nil
	}
	m.journal(ctx, "deliver", map[string]any{"member": m.name, "ids": ids(msgs), "at": "tool_boundary"})
	return messageBlocks(msgs)
}

func ids(msgs []store.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

// record writes each message of the conversation to the transcript, then
// acks the inbox messages it carries: a crash before the ack re-delivers
// them (de-duplicated by id), never loses them.
func (m *Member) record(msg llm.Message) {
	var delivered []string
	id := ""
	if msg.Role == llm.RoleUser {
		m.mu.Lock()
		id, delivered = m.toAck, m.delivered
		m.toAck, m.delivered = "", nil
		m.mu.Unlock()
	}
	appendTranscript(m.team, m.name, msg, delivered, m.cfg.Logger)
	if id != "" {
		if err := m.team.Mailbox().Ack(context.Background(), m.name, id); err != nil {
			m.cfg.Logger.Warn("ack", "member", m.name, "err", err)
		}
	}
}

func appendTranscript(t store.Team, name string, msg llm.Message, delivered []string, log *slog.Logger) {
	line, err := json.Marshal(transcriptLine{TS: time.Now().UTC(), Message: msg, Delivered: delivered})
	if err == nil {
		err = t.Transcripts().Append(context.Background(), name, line)
	}
	if err != nil && log != nil {
		log.Warn("transcript", "member", name, "err", err)
	}
}

// idle waits for the next thing to work on, without any model call: queued
// or arriving messages, the member's own unfinished task, or a claimable
// task that fits its role. It returns nil input when the member should
// exit (shutdown approved, idle timeout).
func (m *Member) idle(ctx context.Context) ([]llm.Block, string, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inboxCh, err := m.team.Mailbox().Watch(wctx, m.name)
	if err != nil {
		return nil, "", err
	}
	boardCh, err := m.team.Tasks().Watch(wctx)
	if err != nil {
		return nil, "", err
	}
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
		if !announced && m.idleHookBlocks < 3 {
			if h := m.cfg.Rules.hooks(); h.Has("TeammateIdle") {
				if out := h.TeammateIdle(ctx, m.who); out.Blocked {
					// At most three times in a row, so a hook cannot keep a
					// member (and the model bill) spinning.
					m.idleHookBlocks++
					m.journal(ctx, "hook_teammate_idle", map[string]any{"member": m.name, "reason": out.Reason})
					return []llm.Block{llm.TextBlock("A TeammateIdle hook sent you back to work: " + out.Reason)}, "TeammateIdle hook", nil
				}
			}
		}
		if !announced {
			// Nothing to do: now the member is idle, and says so once.
			announced = true
			m.setStatus(ctx, store.StatusIdle, m.goIdle)
			m.send(ctx, store.Message{Type: store.TypeIdleNotification, To: store.LeadName,
				Content: m.name + " is idle", Summary: m.goIdle})
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
			m.journal(ctx, "idle_timeout", map[string]any{"member": m.name, "after": m.cfg.IdleTimeout.String()})
			m.markShutdown(ctx, "idle timeout")
			m.send(ctx, store.Message{Type: store.TypeMessage, To: store.LeadName,
				Content: fmt.Sprintf("%s exited after %s idle.", m.name, m.cfg.IdleTimeout), Summary: "exited (idle timeout)"})
			return nil, "", nil
		}
	}
}

// wokeTimeout is a wait that ended because its time ran out (an idle
// member's idle timeout, TeamDelete's wait for members).
const wokeTimeout = 1

// nextWork decides what an idle member does next. Messages come first; a
// shutdown request is approved at once when the member holds no unfinished
// task. While a plan waits for approval only messages wake the member.
func (m *Member) nextWork(ctx context.Context) (input []llm.Block, why string, exit bool, err error) {
	m.mu.Lock()
	queued := len(m.queue) > 0
	// A shutdown request nobody answered yet: still queued, or delivered
	// while the member worked and left unanswered by its model.
	var shutdown *store.Message
	for id, from := range m.shutdownReqs {
		shutdown = &store.Message{RequestID: id, From: from}
		break
	}
	planWait := m.planPending != ""
	m.mu.Unlock()

	if shutdown != nil {
		own, err := m.ownUnfinished(ctx)
		if err != nil {
			return nil, "", false, err
		}
		if len(own) == 0 {
			m.approveShutdown(ctx, *shutdown, "idle with no unfinished task")
			return nil, "", true, nil
		}
	}
	if queued {
		msgs := m.take()
		m.mu.Lock()
		clear(m.nudged)
		m.currentTask = ""
		m.mu.Unlock()
		m.journal(ctx, "deliver", map[string]any{"member": m.name, "ids": ids(msgs), "at": "idle"})
		m.idleHookBlocks = 0
		return messageBlocks(msgs), "message", false, nil
	}
	if planWait {
		return nil, "", false, nil
	}
	m.mu.Lock()
	over := m.overBudget
	m.mu.Unlock()
	if over {
		if err := m.budget.check(ctx, m.name); err != nil {
			return nil, "", false, nil // still over: only a message wakes it
		}
		m.mu.Lock()
		m.overBudget = false
		m.mu.Unlock()
	}
	own, err := m.ownUnfinished(ctx)
	if err != nil {
		return nil, "", false, err
	}
	for _, t := range own {
		m.mu.Lock()
		n := m.nudged[t.ID]
		m.nudged[t.ID] = n + 1
		m.mu.Unlock()
		if n >= MaxReminders {
			// Reminded enough: the task goes back to the board for
			// someone else, and the lead hears of it.
			m.handBack(ctx, t, fmt.Sprintf("after %d reminders it was still unfinished", MaxReminders))
			continue
		}
		m.mu.Lock()
		m.currentTask = t.ID
		approved := m.plan && m.planApproved
		m.mu.Unlock()
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
	t, err := m.claim(ctx)
	if err != nil {
		return nil, "", false, err
	}
	if t != nil {
		m.idleHookBlocks = 0
		m.mu.Lock()
		m.currentTask = t.ID
		m.mu.Unlock()
		return []llm.Block{llm.TextBlock(taskText(*t, "You claimed"))}, "claimed task #" + t.ID, false, nil
	}
	return nil, "", false, nil
}

// approveShutdown answers a shutdown request with approval and stops.
func (m *Member) approveShutdown(ctx context.Context, req store.Message, reason string) {
	yes := true
	to := req.From
	if to == "" || to == store.HumanName {
		to = store.LeadName
	}
	// The roster says shutdown before the requester hears the answer, so
	// whoever acts on the answer sees the member gone.
	m.markShutdown(ctx, "shutdown approved")
	content := fmt.Sprintf("%s approves the shutdown (%s).", m.name, reason)
	content += handedBackNote(m.handBackAll(ctx, "its owner shut down"))
	m.send(ctx, store.Message{Type: store.TypeShutdownResponse, To: to, RequestID: req.RequestID, Approve: &yes, Reason: reason,
		Content: content})
	m.journal(ctx, "protocol", map[string]any{"kind": "shutdown", "request_id": req.RequestID, "member": m.name, "approve": true, "reason": reason})
	// The request itself is consumed: ack everything handed out, after
	// noting in the transcript what the member will never read.
	m.mu.Lock()
	q := m.queue
	m.queue = nil
	m.stopAfter = true
	m.mu.Unlock()
	if len(q) > 0 {
		line, _ := json.Marshal(map[string]any{"ts": time.Now().UTC(), "type": "unread_at_shutdown", "ids": ids(q)})
		_ = m.team.Transcripts().Append(context.WithoutCancel(ctx), m.name, line)
	}
	if len(q) > 0 {
		if err := m.team.Mailbox().Ack(context.WithoutCancel(ctx), m.name, q[len(q)-1].ID); err != nil {
			m.cfg.Logger.Warn("ack", "member", m.name, "err", err)
		}
	}
}

// MaxReminders bounds how often an idle teammate is reminded of a task it
// owns and left unfinished before the task goes back to the board.
const MaxReminders = 3

// handBack gives task t back to the board (pending, unowned) if this member
// still holds it in progress, and tells the lead why.
func (m *Member) handBack(ctx context.Context, t store.Task, why string) bool {
	if !m.release(ctx, t.ID) {
		return false
	}
	m.send(ctx, store.Message{Type: store.TypeMessage, To: store.LeadName, Summary: "gave back task #" + t.ID,
		Content: fmt.Sprintf("Task #%s (%s) went back to the board unowned: %s.", t.ID, t.Subject, why)})
	return true
}

// release puts task id back on the board if this member holds it in
// progress, and journals it.
func (m *Member) release(ctx context.Context, id string) bool {
	freed := false
	_, err := m.team.Tasks().Update(context.WithoutCancel(ctx), id, func(x *store.Task) error {
		if x.Owner == m.name && x.Status == store.TaskInProgress {
			x.Owner, x.Status = "", store.TaskPending
			markHandedBack(x, m.name)
			freed = true
		}
		return nil
	})
	if err != nil {
		m.cfg.Logger.Warn("hand back task", "member", m.name, "task", id, "err", err)
		return false
	}
	if freed {
		m.mu.Lock()
		if m.currentTask == id {
			m.currentTask = ""
		}
		m.mu.Unlock()
		m.journal(ctx, "hand_back", map[string]any{"member": m.name, "task": id})
	}
	return freed
}

// handedBackKey is the task metadata that lists the members who gave the
// task back unfinished. They never claim it again by themselves (the lead
// may still assign it to them), so a member cannot loop on a task it
// cannot finish, and the lead's view of who can take a task agrees with
// the members' own, across processes and restarts.
const handedBackKey = "handed_back_by"

func handedBackBy(t store.Task, name string) bool {
	list, _ := t.Metadata[handedBackKey].([]any)
	for _, v := range list {
		if v == name {
			return true
		}
	}
	return false
}

func markHandedBack(t *store.Task, name string) {
	if handedBackBy(*t, name) {
		return
	}
	if t.Metadata == nil {
		t.Metadata = map[string]any{}
	}
	list, _ := t.Metadata[handedBackKey].([]any)
	t.Metadata[handedBackKey] = append(list, name)
}

// handBackAll releases every task this member holds in progress (it is
// shutting down) and returns their ids.
func (m *Member) handBackAll(ctx context.Context, why string) []string {
	own, err := m.ownUnfinished(context.WithoutCancel(ctx))
	if err != nil {
		m.cfg.Logger.Warn("hand back tasks", "member", m.name, "err", err)
		return nil
	}
	var out []string
	for _, t := range own {
		if m.release(ctx, t.ID) {
			out = append(out, t.ID)
		}
	}
	return out
}

// handedBackNote is what a shutdown answer adds when tasks went back.
func handedBackNote(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return fmt.Sprintf(" Unfinished task #%s went back to the board, unowned.", strings.Join(ids, ", #"))
}

// ownUnfinished returns the tasks in progress that this member owns.
func (m *Member) ownUnfinished(ctx context.Context) ([]store.Task, error) {
	tasks, err := m.team.Tasks().List(ctx)
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

// claim takes the lowest-id claimable task that fits this member's role, by
// compare-and-set: a task another member took first is skipped.
func (m *Member) claim(ctx context.Context) (*store.Task, error) {
	tasks, err := m.team.Tasks().List(ctx)
	if err != nil {
		return nil, err
	}
	sort.Slice(tasks, func(i, j int) bool { return store.TaskNum(tasks[i].ID) < store.TaskNum(tasks[j].ID) })
	me := store.Member{Name: m.name, Role: m.role}
	for _, t := range tasks {
		if t.Claimable() != nil || !roleFits(t, me) || handedBackBy(t, m.name) {
			continue
		}
		got, err := m.team.Tasks().Claim(ctx, t.ID, m.name)
		if err == nil {
			m.journal(ctx, "claim", map[string]any{"task": got.ID, "owner": m.name, "subject": got.Subject})
			return &got, nil
		}
		if errors.Is(err, store.ErrClaimed) || errors.Is(err, store.ErrNotPending) || errors.Is(err, store.ErrBlocked) || errors.Is(err, store.ErrTaskNotFound) {
			continue
		}
		return nil, err
	}
	return nil, nil
}

// permMode is the member's permission mode now: plan until its plan is
// approved when it was spawned with plan_mode_required.
func (m *Member) permMode() permission.Mode {
	m.mu.Lock()
	planBlocked := m.plan && !m.planApproved
	m.mu.Unlock()
	if planBlocked {
		return permission.Plan
	}
	mode, err := permission.ParseMode(m.mode)
	if err != nil {
		return permission.Default
	}
	return mode
}

// gate enforces plan mode (with a message that says how to get out of it),
// then the artifact guard, the PreToolUse hooks and the permission policy.
// A call that needs permission becomes a permission_request to the lead.
func (m *Member) gate(ctx context.Context, c agent.Call) agent.Decision {
	if m.stopping() {
		return agent.Decision{Reason: "you approved your shutdown earlier in this reply, so your run is over and nothing after it runs"}
	}
	if m.permMode() == permission.Plan && permission.Writes(c.Name) {
		return agent.Decision{Reason: "plan mode: this tool is refused until the lead approves your plan (send it with SendMessage type plan_approval_request)"}
	}
	return m.chain(ctx, c)
}

// askPermission sends a permission_request to the lead and waits for the
// permission_response with the same request_id.
func (m *Member) askPermission(ctx context.Context, c agent.Call, why string) agent.Decision {
	reqID := m.ids.next(ctx, m.team, m.name, "perm")
	ch := make(chan bool, 1)
	m.mu.Lock()
	m.permWaiting[reqID] = ch
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.permWaiting, reqID)
		m.mu.Unlock()
	}()
	// Watch before asking, so an answer that comes at once is not missed.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inboxCh, err := m.team.Mailbox().Watch(wctx, m.name)
	if err != nil {
		return agent.Decision{Reason: "permission request failed: " + err.Error()}
	}
	m.setStatus(ctx, StatusWaiting, "permission for "+c.Name)
	defer m.setStatus(ctx, store.StatusWorking, "")
	m.send(ctx, store.Message{Type: store.TypePermissionRequest, To: store.LeadName, RequestID: reqID, ToolName: c.Name, ToolInput: c.Input,
		Content: fmt.Sprintf("%s asks to run %s %s (%s)", m.name, c.Name, text.OneLine(compactJSON(c.Input), 300), why), Summary: "permission for " + c.Name})
	m.journal(ctx, "protocol", map[string]any{"kind": "permission_request", "request_id": reqID, "member": m.name, "tool": c.Name})
	wait := m.cfg.PermissionTimeout
	if wait <= 0 {
		wait = 10 * time.Minute
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	// The answer is applied by fetch, which puts it on ch; the wait is on
	// the inbox, so that a replay can give the turn back at the recorded
	// moment and fetch then finds the answer where it was.
	const (
		wokeInbox = iota
		wokeNoAnswer
	)
	for {
		select {
		case ok := <-ch:
			m.journal(ctx, "permission", map[string]any{"request_id": reqID, "member": m.name, "tool": c.Name, "approve": ok})
			if ok {
				return agent.Decision{Allow: true}
			}
			return agent.Decision{Reason: "the lead denied permission"}
		default:
		}
		woke, err := m.cfg.Pacer.Wait(ctx, m.name, func(ctx context.Context) int {
			select {
			case <-ctx.Done():
				return -1
			case <-timer.C:
				return wokeNoAnswer
			case <-inboxCh:
				return wokeInbox
			}
		})
		switch {
		case err != nil:
			return agent.Decision{Reason: "stopped while waiting for permission"}
		case woke == wokeNoAnswer:
			m.journal(ctx, "permission", map[string]any{"request_id": reqID, "member": m.name, "tool": c.Name, "approve": false, "why": "no answer"})
			return agent.Decision{Reason: fmt.Sprintf("no answer to the permission request within %s", wait)}
		}
		if err := m.fetch(ctx); err != nil {
			return agent.Decision{Reason: "permission request failed: " + err.Error()}
		}
	}
}
