// Package team runs a team of agents: the lead's session, persistent
// teammates with their own agent loops, the idle loop that wakes them on
// events and lets them claim work, and the protocols (shutdown, plan
// approval, permission) that pass through their inboxes.
//
// It builds on agent (the turn loop) and store (durable state). It must never
// be imported by either of them.
package team

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/compact"
	"github.com/troupe-dev/troupe/internal/hook"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/replay/pace"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/subagent"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/todo"
	"github.com/troupe-dev/troupe/internal/tool"
)

// Teammate modes.
const (
	ModeInProcess = "in-process" // each teammate is a goroutine of the lead's process
	ModeProcess   = "process"    // each teammate is its own `troupe agent` process
)

// Errors of the team layer.
var (
	// ErrNoTeam means a team tool was used before TeamCreate.
	ErrNoTeam = errors.New("no team yet: create one with TeamCreate")
	// ErrStalled means every teammate is idle, work remains that none of
	// them can take, and the lead did nothing about it.
	ErrStalled = errors.New("team stalled")
)

// Stats counts what the lead spent.
type Stats struct {
	LeadModelTurns        int `json:"lead_model_turns"`
	LeadTurnsFromIdleOnly int `json:"lead_turns_from_idle_only"`
	LeadWakes             int `json:"lead_wakes"`
}

// Session is the lead's side of a team: the lead agent, its inbox and
// protocols, its team (once created) and the teammates it runs (its
// supervisor).
type Session struct {
	cfg   Config
	lead  *agent.Agent
	jobs  *tool.Jobs
	in    *inbox
	proto *protocol
	sup   *supervisor
	usage *leadUsage
	who   hook.Who  // the lead, for hooks
	hk    leadHooks // what the lead's hooks need that changes
	wt    worktreeRuntime

	mu  sync.Mutex
	cur current
}

// current is the session's team and what goes with it; Session.mu guards
// it.
type current struct {
	team    store.Team
	key     []byte // the team's key (nil: unsealed)
	pattern string // the team's pattern
	// beforeDelegate is the lead's mode before it was switched to delegate
	// (Shift+Tab), to go back to.
	beforeDelegate string
	budget         *budgets
	stats          Stats
	archived       string // where the last deleted team's state went
	archivedTeam   string
}

// NewSession returns a session whose lead is ready to run.
func NewSession(cfg Config) (*Session, error) {
	if cfg.Store == nil || cfg.Provider == nil || cfg.Workspace == nil {
		return nil, errors.New("team: a session needs a store, a provider and a workspace")
	}
	if cfg.TeammateMode == "" {
		cfg.TeammateMode = ModeInProcess
	}
	if cfg.TeammateMode != ModeInProcess && cfg.TeammateMode != ModeProcess {
		return nil, fmt.Errorf("team: unknown teammate mode %q (want %s or %s)", cfg.TeammateMode, ModeInProcess, ModeProcess)
	}
	if cfg.TeammateMode == ModeProcess && len(cfg.AgentCommand) == 0 && cfg.Placement == nil {
		return nil, errors.New("team: process mode needs an agent command")
	}
	if cfg.TeammateMode == ModeProcess && cfg.Pacer != nil {
		return nil, errors.New("team: a paced (recorded or replayed) run needs in-process teammates")
	}
	if cfg.PermissionMode == "" {
		// As in Claude Code: no mode named is the default mode (writes and
		// commands no rule allows ask, and are refused headless).
		cfg.PermissionMode = PermDefault
	}
	if !validPermissionMode(cfg.PermissionMode) {
		return nil, fmt.Errorf("team: unknown permission mode %q (want one of %s)", cfg.PermissionMode, modeNames(permission.Modes))
	}
	if cfg.ShutdownWait <= 0 {
		cfg.ShutdownWait = 2 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Session{cfg: cfg, jobs: tool.NewJobs(), proto: newProtocol()}
	s.in = newInbox(store.LeadName, s.emitter(), cfg.OnDelivered)
	s.sup = newSupervisor(&s.cfg, s.emitter(), s.teamKey)
	s.hk.session = hook.NewSessionID()
	cfg.Rules.agentHooks(cfg.Provider, cfg.Model, cfg.Workspace)
	who := s.leadWho()
	b := &binding{self: store.LeadName, lead: true, sess: s, proto: s.proto, em: s.emitter(), rules: cfg.Rules, who: who}
	var ask func(context.Context, agent.Call, permission.Verdict) agent.Decision
	if cfg.AskHuman != nil {
		ask = func(ctx context.Context, c agent.Call, v permission.Verdict) agent.Decision {
			return cfg.AskHuman(ctx, c, v.Reason)
		}
	}
	gate := cfg.Rules.gate(cfg.Workspace, who, s.leadMode, ask, recordDecision(func(ctx context.Context, ev teamevent.Event) {
		if t, err := s.Team(); err == nil {
			s.emit(ctx, t, ev)
		}
	}, store.LeadName))
	if cfg.OnDenied != nil {
		inner := gate
		gate = func(ctx context.Context, c agent.Call) agent.Decision {
			d := inner(ctx, c)
			if !d.Allow {
				cfg.OnDenied(c, d.Reason)
			}
			return d
		}
	}
	s.who = who
	s.usage = &leadUsage{s: s}
	sub := &subagent.Runner{Provider: cfg.Provider, Model: cfg.Model, Workspace: cfg.Workspace, Parent: store.LeadName,
		Observe: s.usage.observe(cfg.Observe), Gate: gate, Compactor: &compact.Compactor{}, Hidden: cfg.Rules.hidden(), ShellEnv: cfg.Rules.shellEnv(), Sandbox: cfg.Rules.sandbox(),
		AfterTool: cfg.Rules.afterTool(cfg.Workspace, who), Agents: cfg.Agents, Extra: cfg.Tools}
	sub.Start, sub.Stop = cfg.Rules.subagentHooks(who)
	sub.TranscriptDir = s.subagentTranscripts
	sub.OnTranscriptError = func(path string, err error) { cfg.Logger.Warn("subagent transcript", "path", path, "err", err) }
	list := &todo.List{}
	id := agent.Identity{Name: store.LeadName}
	compactor, onCompact := compaction(s.Team, store.LeadName, cfg.Logger)
	lead, err := agent.New(cfg.Rules.withCompactHooks(who, agent.Config{
		Name:       store.LeadName,
		Provider:   cfg.Pacer.Provider(cfg.Provider, store.LeadName),
		Model:      cfg.Model,
		System:     leadSystem(cfg, id),
		Tools:      leadRegistry(b, list, cfg.Skills, tool.TaskHandlers{Subagent: subagent.Handler(sub), Teammate: s.teammateHandler, Teammates: s.teammatesHandler}, cfg.Tools...),
		Env:        cfg.Rules.leaseEnv(cfg.Rules.toolEnv(cfg.Workspace, store.LeadName, "", s.jobs), s.Team, store.LeadName, s.emitter()),
		MaxTurns:   cfg.MaxTurns,
		Gate:       gate,
		AfterTool:  cfg.Rules.afterTool(cfg.Workspace, who),
		Boundaries: []agent.Boundary{s.leadBoundary, agent.TodoReminder(list), jobAnnouncer(s.jobs)},
		Observe:    s.usage.observe(cfg.Observe),
		Record:     s.recordLead,
		Identity:   id.Line(),
		Compactor:  compactor,
		OnCompact:  onCompact,
		Budget:     s.checkBudget,
	}))
	if err != nil {
		return nil, err
	}
	s.lead = lead
	return s, nil
}

// checkBudget is the lead's budget check, against its current team's.
func (s *Session) checkBudget() error {
	t, err := s.Team()
	if err != nil {
		return nil
	}
	s.mu.Lock()
	b := s.cur.budget
	s.mu.Unlock()
	if b == nil || b.t != t {
		// Made without the lock: it reads the workspace's prices.
		made := newBudgets(t, s.cfg.Workspace.Dir())
		s.mu.Lock()
		if s.cur.budget == nil || s.cur.budget.t != t {
			s.cur.budget = made
		}
		b = s.cur.budget
		s.mu.Unlock()
	}
	return b.check(context.Background(), store.LeadName)
}

// Lead returns the lead agent.
func (s *Session) Lead() *agent.Agent { return s.lead }

// Stats returns the lead's counters.
func (s *Session) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur.stats
}

// Team returns the active team, or ErrNoTeam.
func (s *Session) Team() (store.Team, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur.team == nil {
		return nil, ErrNoTeam
	}
	return s.cur.team, nil
}

// TeamName returns the active team's name, or "".
func (s *Session) TeamName() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur.team == nil {
		return ""
	}
	return s.cur.team.Name()
}

// setTeam makes t the session's team (nil: none), with its pattern.
func (s *Session) setTeam(t store.Team, pattern string) {
	s.mu.Lock()
	s.cur.team, s.cur.pattern = t, pattern
	s.mu.Unlock()
}

func (s *Session) pattern() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur.pattern
}

func (s *Session) emitter() emitter {
	return emitter{agent: store.LeadName, onEvent: s.cfg.OnEvent, log: s.cfg.Logger}
}

// emit journals ev as the lead.
func (s *Session) emit(ctx context.Context, t store.Team, ev teamevent.Event) {
	emit(ctx, t, store.LeadName, ev, s.cfg.OnEvent, s.cfg.Logger)
}

// Close stops every teammate this session started and waits for them, and
// stops the lead's background jobs. Teammates that were still running are
// marked shut down.
func (s *Session) Close() error {
	s.sessionEnd("other")
	s.stopRemote()
	s.sup.stopAll()
	s.jobs.StopAll()
	s.stopMergeQueue()
	s.closeSpares()
	s.mu.Lock()
	dir, name := s.cur.archived, s.cur.archivedTeam
	s.mu.Unlock()
	return s.usage.flushArchive(dir, name)
}

// running returns the names of members whose runtime is still up.
func (s *Session) running() []string { return s.sup.running() }

// roleFits reports whether member m may take task t: a task may reserve
// itself for a role (metadata "role"), matched against the member's role or
// name.
func roleFits(t store.Task, m store.Member) bool {
	want, _ := t.Metadata["role"].(string)
	want = strings.ToLower(strings.TrimSpace(want))
	if want == "" {
		return true
	}
	return want == strings.ToLower(m.Name) || want == strings.ToLower(strings.TrimSpace(m.Role))
}

// jobPacing orders the ends of an agent's background jobs with the turns of
// a paced run: a job that ends takes a turn of its own (as "agent/bg_N") to
// say so, and the agent gives its turn up while it waits for its jobs. Once
// ctx ends, jobs end unpaced.
func jobPacing(ctx context.Context, p *pace.Pacer, agent string) tool.JobPacing {
	if p == nil {
		return tool.JobPacing{}
	}
	return tool.JobPacing{
		Start: func(id string) func() { return p.Busy(agent + "/" + id) },
		Settle: func(id string, apply func()) {
			name := agent + "/" + id
			p.Enter(ctx, name)
			defer p.Leave(name)
			apply()
		},
		Block: func(f func()) { p.Block(ctx, agent, func(context.Context) { f() }) },
	}
}

// jobAnnouncer tells an agent, at its next tool boundary, which of its
// background jobs finished since.
func jobAnnouncer(jobs *tool.Jobs) agent.Boundary {
	return func(context.Context, []string) []llm.Block {
		done := jobs.TakeFinished()
		if len(done) == 0 {
			return nil
		}
		var b strings.Builder
		for _, j := range done {
			fmt.Fprintf(&b, "<background-job id=%q state=%q>%s finished; read its output with TaskOutput.</background-job>\n", j.ID, j.State, j.Description)
		}
		return []llm.Block{llm.TextBlock(strings.TrimSpace(b.String()))}
	}
}
