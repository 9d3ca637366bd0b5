package team

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/hook"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/replay/pace"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/text"
	"github.com/troupe-dev/troupe/internal/todo"
	"github.com/troupe-dev/troupe/internal/tool"
)

// MemberConfig configures one teammate's runtime. Its limits and its
// observers are embedded records (issue 15); their fields are promoted.
type MemberConfig struct {
	Team      store.Team
	Name      string
	Provider  llm.Provider
	Workspace *tool.Workspace
	// Sections are added to the system prompt (project memory, …).
	Sections []string
	// Rules are the settings' permission rules, hooks, guard and patterns.
	Rules *Rules
	// Key, when set, is the team's secret key: Team is sealed with it (see
	// package store/seal). A member of a sealed team needs it; in process
	// it is given the lead's sealed Team instead.
	Key []byte
	// Pacer shares the turn with the rest of a recorded or replayed team.
	Pacer *pace.Pacer
	// Tools are offered after the teammate's own (Config.Tools).
	Tools []tool.Tool

	MemberLimits
	// Observers are the lead's, for an in-process member (see
	// Config.Observers).
	Observers
}

// MemberLimits groups a teammate's model with the bounds on how long it
// runs and waits: the lead passes them on from its own command line.
type MemberLimits struct {
	// DefaultModel is used when the roster names no model.
	DefaultModel string
	IdleTimeout  time.Duration
	MaxTurns     int
	// PermissionTimeout bounds the wait for an answer to a permission
	// request; no answer is a denial (default 10m).
	PermissionTimeout time.Duration
}

// Member is a persistent teammate: its own agent loop and context, an idle
// loop that waits on events only, and its side of the protocols. Its inbox
// and protocol state have their own owners (inbox, protocol); st is the
// rest of its life.
type Member struct {
	cfg    MemberConfig // cfg.Team is sealed when the team has a key
	name   string
	me     store.Member // its roster entry when it started: role, plan mode, permission mode
	agent  *agent.Agent
	jobs   *tool.Jobs
	chain  agent.Gate // guard, PreToolUse hooks, permission policy
	who    hook.Who
	budget *budgets
	in     *inbox
	proto  *protocol
	st     *memberState
	cache  *cacheChooser // the lifetime of its calls' prompt cache
}

// memberState is what a member's loop keeps between turns. Its lock is a
// leaf: nothing else is taken while it is held.
type memberState struct {
	mu          sync.Mutex
	stopRun     context.CancelFunc // ends the turn in progress
	nudged      map[string]int     // own unfinished tasks: reminders given since the last message
	goIdle      string             // the summary of the turn that just ended, for the idle notification
	shutDown    bool               // the roster already says shutdown
	currentTask string             // the task the member works on, for usage
	overBudget  bool               // stopped by a budget: only messages wake it, and the lead is told once
	// idleHookBlocks counts TeammateIdle hooks that sent the member back to
	// work since its last real work.
	idleHookBlocks int
	// announce tells the lead the member takes a task, before an idle
	// claim (seed 004), as its TaskUpdate does (set once, at start). It
	// returns the message's journal event (nil: none sent), to be
	// journaled with the claim.
	announce func(context.Context, store.Task) (teamevent.Event, error)
	// statusJournaled is set by a claim that journaled the wake's status
	// with itself; the wake then writes only the roster.
	statusJournaled bool
}

// task is the task the member works on ("" when none).
func (st *memberState) task() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.currentTask
}

func (st *memberState) setTask(id string) {
	st.mu.Lock()
	st.currentTask = id
	st.mu.Unlock()
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
		cfg: cfg, name: me.Name, me: *me, jobs: tool.NewJobs(), budget: newBudgets(cfg.Team, cfg.Workspace.Dir()),
		proto: newProtocol(), st: &memberState{nudged: map[string]int{}},
	}
	m.in = newInbox(m.name, m.emitter(), cfg.OnDelivered)
	m.in.writeBehind()
	model := me.Model
	if model == "" {
		model = cfg.DefaultModel
	}
	m.cache = newCacheChooser(m.budget.prices, model)
	m.who = memberWho(cfg.Rules, r.Name, r, m.name, m.me.Role, func() string { return string(m.permMode()) })
	m.chain = cfg.Rules.gate(cfg.Workspace, m.who, m.permMode,
		func(ctx context.Context, c agent.Call, v permission.Verdict) agent.Decision {
			return m.askPermission(ctx, c, v.Reason)
		},
		recordDecision(m.emit, m.name))
	b := &binding{self: m.name, member: m, fixed: cfg.Team, proto: m.proto, em: m.emitter(), rules: cfg.Rules, who: m.who}
	m.st.announce = func(ctx context.Context, t store.Task) (teamevent.Event, error) {
		return b.announceClaimLater(ctx, cfg.Team, t)
	}
	id := agent.Identity{Name: m.name, Role: m.me.Role, Team: r.Name}
	instr := teammateInstructions(store.LeadName)
	if p := teammatePersona(r, me.Name); p != "" {
		instr += "\n\n" + p
		// A teammate in its own process guards the team's words too.
		cfg.Rules.playTheme(r.Theme, r.Personas)
	}
	if m.me.PlanModeRequired {
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
		Tools:      teammateRegistry(b, list, cfg.Tools...),
		Env:        cfg.Rules.leaseEnv(cfg.Rules.toolEnv(cfg.Workspace, m.name, r.Name, m.jobs), fixedTeam(cfg.Team), m.name, m.emitter()),
		MaxTurns:   cfg.MaxTurns,
		Gate:       m.gate,
		AfterTool:  cfg.Rules.afterTool(cfg.Workspace, m.who),
		Boundaries: []agent.Boundary{m.boundary, agent.TodoReminder(list), jobAnnouncer(m.jobs)},
		Observe:    m.observeUsage(m.observeTools(cfg.Observe)),
		Record:     func(msg llm.Message) { m.in.record(m.cfg.Team, msg) },
		Identity:   id.Line(),
		CacheTTL:   m.cacheTTL,
		Compactor:  compactor,
		OnCompact: func(c agent.Compaction) error {
			m.in.settle() // its marker goes after the lines still being written
			return onCompact(c)
		},
		Budget: func() error { return m.budget.check(context.Background(), m.name) },
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
	m.in.restore(seen)
	if m.me.PlanModeRequired {
		ctx := context.Background()
		evs, _ := cfg.Team.Journal().Read(ctx)
		leadUnread, _ := cfg.Team.Mailbox().Peek(ctx, store.LeadName)
		ownUnread, _ := cfg.Team.Mailbox().Peek(ctx, m.name)
		pending, approved := restorePlan(evs, m.name, leadUnread, ownUnread, seen)
		m.proto.setPlan(pending, approved)
	}
	return m, nil
}

// Agent returns the member's agent.
func (m *Member) Agent() *agent.Agent { return m.agent }

func (m *Member) emitter() emitter {
	return emitter{agent: m.name, onEvent: m.cfg.OnEvent, log: m.cfg.Logger}
}

// emit journals ev as this member, after what it still writes behind.
func (m *Member) emit(ctx context.Context, ev teamevent.Event) {
	m.in.settle()
	emit(ctx, m.cfg.Team, m.name, ev, m.cfg.OnEvent, m.cfg.Logger)
}

// emitAll journals evs in order as this member, in one append where the
// journal takes several, after what it still writes behind.
func (m *Member) emitAll(ctx context.Context, evs []teamevent.Event) {
	m.in.settle()
	emitAll(ctx, m.cfg.Team, m.name, evs, m.cfg.OnEvent, m.cfg.Logger)
}

// emitDeferred journals evs as this member, after what it still writes
// behind, without waiting for their fsync (see the package's emitDeferred).
func (m *Member) emitDeferred(ctx context.Context, evs ...teamevent.Event) {
	m.in.settle()
	emitDeferred(ctx, m.cfg.Team, m.name, evs, m.cfg.OnEvent, m.cfg.Logger)
}

// setStatus records a state change in the roster and the journal, after
// what the member still writes behind; both are durable when it returns.
// The roster is written even when it already says status: the first word
// of a life, an idle or a shutdown also carry the pid and the heartbeat.
func (m *Member) setStatus(ctx context.Context, status, why string) {
	now := time.Now().UTC()
	m.in.durable(m.cfg.Team) // the reply that ended a turn first (see inbox.record)
	m.in.observe(func() { m.writeStatus(ctx, now, status, why, false) })
	m.in.settle()
}

// setStatusLater records a wake's state change in the roster and the
// journal behind the member's path (the status is an observation: a wake
// does not wait for it). The two are independent files: they are written
// at once, one fsync instead of two in a row. With keep, a roster that
// already says status is left as it is (writeRosterStatus); with
// journaled, the journal already holds the status (a claim wrote it with
// itself) and only the roster is written.
func (m *Member) setStatusLater(ctx context.Context, status, why string, keep, journaled bool) {
	now := time.Now().UTC()
	m.in.observe(func() {
		if journaled {
			m.writeRosterStatus(ctx, now, status, keep)
			return
		}
		m.writeStatus(ctx, now, status, why, keep)
	})
}

func (m *Member) writeStatus(ctx context.Context, now time.Time, status, why string, keep bool) {
	var wg sync.WaitGroup
	wg.Go(func() { m.writeRosterStatus(ctx, now, status, keep) })
	emit(ctx, m.cfg.Team, m.name, teamevent.Status{Member: m.name, Status: status, Why: why}, m.cfg.OnEvent, m.cfg.Logger)
	wg.Wait()
}

// writeRosterStatus is writeStatus's roster side. With keep (a wake
// between two tasks) a roster already saying status, with this process's
// pid and a fresh heartbeat, is not written (the heartbeat has a loop of
// its own; the journal still tells why it woke).
func (m *Member) writeRosterStatus(ctx context.Context, now time.Time, status string, keep bool) {
	if keep {
		me, ok, err := m.cfg.Team.ReadMember(context.WithoutCancel(ctx), m.name)
		if err == nil && ok && me.Status == status && me.PID == os.Getpid() && now.Sub(me.HeartbeatAt) < HeartbeatEvery {
			return
		}
	}
	_, _, err := m.cfg.Team.UpdateMember(context.WithoutCancel(ctx), m.name, func(me *store.Member) error {
		me.Status, me.HeartbeatAt, me.PID = status, now, os.Getpid()
		return nil
	})
	if err != nil {
		m.cfg.Logger.Warn("roster update", "member", m.name, "err", err)
	}
}

// Run is the member's life: work on what woke it, go idle, wait for the
// next event, until it is shut down or ctx ends.
func (m *Member) Run(ctx context.Context) (err error) {
	m.cfg.Pacer.Enter(ctx, m.name)
	defer m.cfg.Pacer.Leave(m.name)
	m.jobs.SetPacing(jobPacing(ctx, m.cfg.Pacer, m.name))
	defer m.in.durable(m.cfg.Team) // nothing it wrote behind is left when it returns, nor waits for an fsync
	defer m.jobs.StopAll()
	defer func() {
		m.st.mu.Lock()
		done := m.st.shutDown
		m.st.mu.Unlock()
		if !done {
			// Stopped without a shutdown (its process or lead is going
			// away): not shut down, so resumable, and not running, so its
			// heartbeat is left stale: dead until a resume brings it back.
			m.markStopped(ctx, exitWhy(err))
		}
	}()
	// In line, not behind: it is the roster's first word of this life (its
	// pid, its heartbeat), and whoever watches the roster (a lead deciding
	// the member is dead, a restart) must see it before anything the member
	// does next. Only a wake's status goes behind the model request.
	m.setStatus(ctx, store.StatusWorking, "")
	m.st.goIdle = "available"
	for wakes := 0; ; wakes++ {
		input, why, err := m.idle(ctx)
		if err != nil || input == nil {
			return err
		}
		// The model request goes out while the status is written. The
		// first wake of a life writes the roster whatever it says: its
		// heartbeat then reaches the store's own record of heartbeats
		// (the file store's beats/ file, made once), which the heartbeat
		// loop would otherwise make later, all members' at once.
		m.st.mu.Lock()
		journaled := m.st.statusJournaled
		m.st.statusJournaled = false
		m.st.mu.Unlock()
		m.setStatusLater(ctx, store.StatusWorking, why, wakes > 0, journaled)
		runCtx, cancel := context.WithCancel(ctx)
		m.st.mu.Lock()
		m.st.stopRun = cancel
		m.st.mu.Unlock()
		// Stop hooks are the session's main agent's (the lead's); a
		// teammate that ends its turn meets the TeammateIdle hooks instead.
		res, runErr := m.agent.Run(runCtx, input...)
		cancel()
		if m.proto.stopping() {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		summary := "available"
		if errors.Is(runErr, ErrBudget) {
			summary = "stopped: " + runErr.Error()
			m.st.mu.Lock()
			told := m.st.overBudget
			m.st.overBudget = true
			m.st.mu.Unlock()
			m.emit(ctx, teamevent.Budget{Member: m.name, Reached: runErr.Error()})
			if !told {
				m.send(ctx, store.Message{Type: store.TypeMessage, To: store.LeadName, Summary: "budget reached",
					Content: fmt.Sprintf("I stopped making model calls: %v. Raise my limit (troupe budget %s %s --tokens N, or the budgets of .troupe/settings.json) and message me to let me go on.", runErr, m.cfg.Team.Name(), m.name)})
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
		if pending, _ := m.proto.plan(); pending != "" {
			summary = "waiting for plan approval"
		}
		m.st.goIdle = summary
	}
}

// markShutdown records the member as shut down; its runtime is about to
// end.
func (m *Member) markShutdown(ctx context.Context, why string) {
	m.setStatus(ctx, store.StatusShutdown, why)
	m.st.mu.Lock()
	m.st.shutDown = true
	m.st.mu.Unlock()
}

// markStopped records that the member's runtime ended without a shutdown.
func (m *Member) markStopped(ctx context.Context, why string) {
	m.in.settle()
	stale := time.Now().UTC().Add(-Lease - time.Second)
	_, _, err := m.cfg.Team.UpdateMember(context.WithoutCancel(ctx), m.name, func(me *store.Member) error {
		if me.Status != store.StatusShutdown {
			me.HeartbeatAt = stale
		}
		return nil
	})
	if err != nil {
		m.cfg.Logger.Warn("roster update", "member", m.name, "err", err)
	}
	m.emit(ctx, teamevent.Stopped{Member: m.name, Why: why})
}

func exitWhy(err error) string {
	if err == nil || errors.Is(err, context.Canceled) {
		return ""
	}
	return err.Error()
}

// send sends a message from this member; failures are logged.
func (m *Member) send(ctx context.Context, msg store.Message) {
	m.in.durable(m.cfg.Team) // what it says follows the turn that led to it
	msg.From = m.name
	sent, err := m.cfg.Team.Mailbox().Send(context.WithoutCancel(ctx), msg)
	if err != nil {
		m.cfg.Logger.Warn("send", "from", m.name, "to", msg.To, "err", err)
		return
	}
	m.emit(ctx, teamevent.Sent(sent))
}

// fetch moves what waits in the inbox into the queue without blocking,
// and applies the protocol answers addressed to this member's runtime.
func (m *Member) fetch(ctx context.Context) error {
	return m.in.fetch(ctx, m.cfg.Team, m.proto.toMember)
}

// boundary delivers waiting messages at each tool boundary, and ends the
// run once a shutdown was approved.
func (m *Member) boundary(ctx context.Context, _ []string) []llm.Block {
	if m.proto.stopping() {
		m.st.mu.Lock()
		cancel := m.st.stopRun
		m.st.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	}
	if err := m.fetch(ctx); err != nil {
		m.cfg.Logger.Warn("inbox", "member", m.name, "err", err)
	}
	return messageBlocks(m.in.deliver(ctx, m.cfg.Team, AtToolBoundary))
}
