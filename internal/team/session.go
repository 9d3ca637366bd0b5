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
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/compact"
	"github.com/troupe-dev/troupe/internal/hook"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/replay/pace"
	"github.com/troupe-dev/troupe/internal/skill"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/subagent"
	"github.com/troupe-dev/troupe/internal/teamkey"
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

// Config is what every agent of a session shares.
type Config struct {
	Store     store.Store
	Provider  llm.Provider
	Workspace *tool.Workspace
	// Model is the lead's model; TeammateModel the default for teammates
	// (empty: the provider's default).
	Model         string
	TeammateModel string
	// TeammateMode is ModeInProcess (default) or ModeProcess.
	TeammateMode string
	// AgentCommand is the command that runs one teammate in process mode;
	// "--team T --name N" and the state flags are appended.
	AgentCommand []string
	// AgentEnv is added to the environment of teammate processes.
	AgentEnv []string
	// IdleTimeout makes an idle teammate exit after this long with nothing
	// to do (0: stay until shut down).
	IdleTimeout time.Duration
	// MaxTurns bounds the model calls of one agent run (0: none).
	MaxTurns int
	// PermissionMode is the lead's mode and the default for teammates.
	PermissionMode string
	// Delegate limits the lead to management tools.
	Delegate bool
	// SystemPrompt, when set, replaces the lead's whole system prompt
	// (--system-prompt); AppendSystemPrompt is added at its end
	// (--append-system-prompt). Teammates keep their own.
	SystemPrompt       string
	AppendSystemPrompt string
	// OnDenied, when set, sees every tool call of the lead (and of its
	// subagents) that the permission gate refused, with the reason the
	// model was given.
	OnDenied func(call agent.Call, reason string)
	// Observe receives every agent's events.
	Observe func(agent.Event)
	// OnEvent receives team events (status changes, messages, tasks) as
	// they are journaled.
	OnEvent func(store.Event)
	// AgentStderr receives the standard error of teammate processes
	// (default: the lead's own standard error).
	AgentStderr io.Writer
	// ShutdownWait bounds how long TeamDelete waits for members to stop
	// (default 2m).
	ShutdownWait time.Duration
	// Sections are added to every agent's system prompt (project memory,
	// the skills list); Skills backs the lead's Skill tool.
	Sections []string
	Skills   *skill.Set
	// Agents are the custom subagent types (.claude/agents) the lead's Task
	// tool may start beside the built-in ones.
	Agents *subagent.Catalog
	// HumanRequests, when set, is offered every permission and plan
	// approval request addressed to the lead: a human is attached (the
	// terminal UI). If it returns true the human will answer (with
	// AnswerAsHuman) and the lead's model never sees the request.
	HumanRequests func(store.Message) bool
	// AskHuman, when set, answers the lead's own permission questions (a
	// human is attached); nil refuses them.
	AskHuman func(ctx context.Context, call agent.Call, reason string) agent.Decision
	// Rules are the settings' permission rules, hooks, guard and patterns.
	Rules *Rules
	// Keys holds the teams' secret keys: TeamCreate makes one, Resume
	// reads it, TeamDelete deletes it, and every message of the team is
	// signed with it (see package store/seal); teammate processes get it
	// through an inherited descriptor. Nil leaves messages unsigned.
	Keys *teamkey.Keys
	// Pacer, when set, shares one turn between the lead and its in-process
	// teammates so a run can be recorded and replayed exactly (see package
	// pace); nil runs them freely.
	Pacer  *pace.Pacer
	Logger *slog.Logger
}

// Stats counts what the lead spent.
type Stats struct {
	LeadModelTurns        int `json:"lead_model_turns"`
	LeadTurnsFromIdleOnly int `json:"lead_turns_from_idle_only"`
	LeadWakes             int `json:"lead_wakes"`
}

// Session is the lead's side of a team: the lead agent, its team (once
// created) and the teammates it spawned.
type Session struct {
	cfg  Config
	lead *agent.Agent
	jobs *tool.Jobs

	mu           sync.Mutex
	team         store.Team
	key          []byte // the team's key (nil: unsealed)
	members      map[string]*handle
	requests     map[string]store.Message // protocol requests addressed to the lead, by request_id
	toHuman      map[string]bool          // those of them the human answers
	awaiting     map[string]string        // shutdown requests the lead sent and has no answer to: request_id -> member
	stats        Stats
	ackTeam      store.Team // the lead's inbox messages handed to its conversation,
	ackID        string     // acked once the conversation has recorded them
	delivered    []string
	preTeam      []llm.Message   // the lead's conversation before TeamCreate
	seen         map[string]bool // inbox ids already in the restored conversation
	follower     *follower
	pattern      string // the active team's pattern
	ids          requestIDs
	usage        *leadUsage
	stopBeat     context.CancelFunc
	reaped       map[string]bool // dead members already reported, by name@heartbeat
	archived     string          // where the last deleted team's state went
	archivedTeam string
	budget       *budgets
	who          hook.Who  // the lead, for hooks
	hk           leadHooks // what the lead's hooks need that changes

	wg sync.WaitGroup
}

// handle is a running teammate.
type handle struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}
	member *Member // in-process

	mu  sync.Mutex
	cmd *exec.Cmd // process mode: the current process
}

func (h *handle) setCmd(c *exec.Cmd) {
	h.mu.Lock()
	h.cmd = c
	h.mu.Unlock()
}

// signal sends sig to the member's current process, if any.
func (h *handle) signal(sig os.Signal) {
	h.mu.Lock()
	c := h.cmd
	h.mu.Unlock()
	if c != nil && c.Process != nil {
		_ = c.Process.Signal(sig)
	}
}

// maxRestarts bounds how often the lead restarts a teammate process that
// died without being shut down.
const maxRestarts = 5

// startProcess starts `troupe agent` for member name.
func (s *Session) startProcess(t store.Team, name string) (*exec.Cmd, error) {
	argv := append(append([]string(nil), s.cfg.AgentCommand...), "--team", t.Name(), "--name", name)
	// The key goes through an inherited pipe, never the environment, which
	// every tool of the teammate would inherit.
	keyR, keyArgs, err := s.keyPipe()
	if err != nil {
		return nil, fmt.Errorf("start teammate process %s: %w", name, err)
	}
	if keyR != nil {
		defer keyR.Close() // the child has its own copy once started
	}
	argv = append(argv, keyArgs...)
	cmd := exec.Command(argv[0], argv[1:]...)
	if keyR != nil {
		cmd.ExtraFiles = []*os.File{keyR} // descriptor KeyFD
	}
	cmd.Env = append(os.Environ(), s.cfg.AgentEnv...)
	cmd.Dir = s.cfg.Workspace.Dir()
	cmd.Stdout, cmd.Stderr = nil, s.cfg.AgentStderr
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	// Its own process group (signals to the lead's group do not hit it),
	// and SIGTERM when the lead dies, so no teammate is orphaned: a resume
	// restarts it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start teammate process %s: %w", name, err)
	}
	return cmd, nil
}

// superviseProcess waits for a teammate process and, when it dies without
// having been shut down (killed, crashed), starts it again: the new process
// restores the member's conversation from its transcript, so its tasks wait
// for it instead of going back to the board.
func (s *Session) superviseProcess(ctx context.Context, t store.Team, h *handle, cmd *exec.Cmd) {
	for restarts := 0; ; restarts++ {
		err := cmd.Wait()
		if ctx.Err() != nil || restarts >= maxRestarts {
			return
		}
		r, rerr := t.ReadRoster(context.Background())
		if rerr != nil {
			return
		}
		if m, ok := r.Member(h.name); !ok || m.Status == store.StatusShutdown {
			return
		}
		s.journal(context.Background(), t, "restart", map[string]any{"member": h.name, "exit": fmt.Sprint(err), "restarts": restarts + 1})
		next, serr := s.startProcess(t, h.name)
		if serr != nil {
			s.cfg.Logger.Warn("restart teammate", "member", h.name, "err", serr)
			return
		}
		h.setCmd(next)
		cmd = next
	}
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
	if cfg.TeammateMode == ModeProcess && len(cfg.AgentCommand) == 0 {
		return nil, errors.New("team: process mode needs an agent command")
	}
	if cfg.TeammateMode == ModeProcess && cfg.Pacer != nil {
		return nil, errors.New("team: a paced (recorded or replayed) run needs in-process teammates")
	}
	if cfg.PermissionMode == "" {
		// The CLI always names a mode (default unless asked otherwise);
		// the team tests still rely on this fallback.
		cfg.PermissionMode = PermBypass
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
	s := &Session{cfg: cfg, members: map[string]*handle{}, requests: map[string]store.Message{}, toHuman: map[string]bool{}, awaiting: map[string]string{}, jobs: tool.NewJobs(), reaped: map[string]bool{}}
	s.hk.session = hook.NewSessionID()
	cfg.Rules.agentHooks(cfg.Provider, cfg.Model, cfg.Workspace)
	who := s.leadWho()
	b := &binding{self: store.LeadName, lead: true, sess: s, rules: cfg.Rules, who: who}
	var ask func(context.Context, agent.Call, permission.Verdict) agent.Decision
	if cfg.AskHuman != nil {
		ask = func(ctx context.Context, c agent.Call, v permission.Verdict) agent.Decision {
			return cfg.AskHuman(ctx, c, v.Reason)
		}
	}
	gate := cfg.Rules.gate(cfg.Workspace, who, s.leadMode, ask, recordDecision(func(ctx context.Context, typ string, f map[string]any) {
		if t, err := s.Team(); err == nil {
			s.journal(ctx, t, typ, f)
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
		AfterTool: cfg.Rules.afterTool(cfg.Workspace, who), Agents: cfg.Agents}
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
		Tools:      leadRegistry(b, list, cfg.Skills, tool.TaskHandlers{Subagent: subagent.Handler(sub), Teammate: s.teammateHandler}),
		Env:        cfg.Rules.toolEnv(cfg.Workspace, store.LeadName, "", s.jobs),
		MaxTurns:   cfg.MaxTurns,
		Gate:       gate,
		AfterTool:  cfg.Rules.afterTool(cfg.Workspace, who),
		Boundaries: []agent.Boundary{s.leadBoundary, agent.TodoReminder(list), jobAnnouncer(s.jobs)},
		Observe:    s.usage.observe(cfg.Observe),
		Record:     s.recordLead,
		Identity:   id.Line(),
		Compactor:  compactor,
		OnCompact:  onCompact,
		Budget: func() error {
			t, err := s.Team()
			if err != nil {
				return nil
			}
			s.mu.Lock()
			if s.budget == nil || s.budget.t != t {
				s.budget = newBudgets(t, cfg.Workspace.Dir())
			}
			b := s.budget
			s.mu.Unlock()
			return b.check(context.Background(), store.LeadName)
		},
	}))
	if err != nil {
		return nil, err
	}
	s.lead = lead
	return s, nil
}

// Lead returns the lead agent.
func (s *Session) Lead() *agent.Agent { return s.lead }

// Stats returns the lead's counters.
func (s *Session) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Team returns the active team, or ErrNoTeam.
func (s *Session) Team() (store.Team, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.team == nil {
		return nil, ErrNoTeam
	}
	return s.team, nil
}

// TeamName returns the active team's name, or "".
func (s *Session) TeamName() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.team == nil {
		return ""
	}
	return s.team.Name()
}

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
		sys = agent.Prompt{Identity: id, Workspace: cfg.Workspace.Dir(), Instructions: leadInstructions, Sections: cfg.Sections}.String()
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
// it unless the settings name a default. Delegate is refused here: it
// changes the lead's tools, which are fixed when the session starts.
func (s *Session) SetPermissionMode(mode string) error {
	if !validPermissionMode(mode) || mode == PermDelegate {
		return fmt.Errorf("team: cannot switch the lead to permission mode %q (want one of %s)", mode, modeNames(permission.TeammateModes))
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
	p, mode := s.pattern, s.cfg.PermissionMode
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
	s.stats.LeadWakes++
	s.mu.Unlock()
	r, err := s.lead.Run(ctx, s.withStartContext(input)...)
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
	s.stats.LeadModelTurns += r.Turns
	if idleOnly {
		s.stats.LeadTurnsFromIdleOnly += r.Turns
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

// fetchLead takes what waits in the lead's inbox without blocking, and
// remembers the protocol requests among it.
func (s *Session) fetchLead(ctx context.Context, t store.Team) ([]store.Message, error) {
	now, cancel := context.WithCancel(ctx)
	cancel()
	msgs, err := t.Mailbox().Receive(now, store.LeadName)
	if err != nil && !errors.Is(err, context.Canceled) {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var forLead []store.Message
	for _, m := range msgs {
		s.mu.Lock()
		dup := s.seen[m.ID]
		s.mu.Unlock()
		if dup {
			continue // already in the restored conversation
		}
		switch m.Type {
		case store.TypeShutdownResponse:
			s.mu.Lock()
			delete(s.awaiting, m.RequestID)
			s.mu.Unlock()
		case store.TypePlanApprovalRequest, store.TypePermissionRequest:
			s.mu.Lock()
			s.requests[m.RequestID] = m
			s.mu.Unlock()
			if s.cfg.HumanRequests != nil && s.cfg.HumanRequests(m) {
				s.mu.Lock()
				s.toHuman[m.RequestID] = true
				s.mu.Unlock()
				continue
			}
		}
		forLead = append(forLead, m)
	}
	if len(msgs) > 0 {
		last := msgs[len(msgs)-1].ID
		if len(forLead) == 0 {
			// Everything went to the human: consumed now.
			if err := t.Mailbox().Ack(context.WithoutCancel(ctx), store.LeadName, last); err != nil {
				s.cfg.Logger.Warn("ack lead inbox", "err", err)
			}
		} else {
			// The lead's messages are acked once its conversation, which
			// records them in the transcript, has them.
			s.pendingAck(t, forLead)
		}
	}
	return forLead, nil
}

// AnswerAsHuman answers a permission or plan approval request addressed to
// the lead, as the human at the keyboard.
func (s *Session) AnswerAsHuman(ctx context.Context, requestID string, approve bool, feedback string) error {
	req, ok := s.request(requestID)
	if !ok {
		return fmt.Errorf("no pending request %q", requestID)
	}
	t, err := s.Team()
	if err != nil {
		return err
	}
	typ := store.TypePermissionResponse
	if req.Type == store.TypePlanApprovalRequest {
		typ = store.TypePlanApprovalResponse
	}
	verdict := "approved"
	if !approve {
		verdict = "denied"
	}
	msg := store.Message{Type: typ, From: store.HumanName, To: req.From, RequestID: requestID, Approve: &approve, Feedback: feedback,
		Content: fmt.Sprintf("The human %s your request.", verdict)}
	if _, err := t.Mailbox().Send(ctx, msg); err != nil {
		return err
	}
	s.answered(requestID)
	journal(ctx, t, store.HumanName, "protocol", map[string]any{"kind": typ, "request_id": requestID, "member": req.From, "approve": approve}, s.cfg.OnEvent, s.cfg.Logger)
	return nil
}

// SendAsHuman sends text from the human to a member of the team (the lead
// is "team-lead").
func (s *Session) SendAsHuman(ctx context.Context, to, text string) error {
	t, err := s.Team()
	if err != nil {
		return err
	}
	sent, err := t.Mailbox().Send(ctx, store.Message{Type: store.TypeMessage, From: store.HumanName, To: to, Content: text})
	if err != nil {
		return err
	}
	journal(ctx, t, store.HumanName, "send", sentFields(sent), s.cfg.OnEvent, s.cfg.Logger)
	return nil
}

func (s *Session) pendingAck(t store.Team, msgs []store.Message) {
	s.mu.Lock()
	s.ackTeam, s.ackID = t, msgs[len(msgs)-1].ID
	s.delivered = append(s.delivered, ids(msgs)...)
	s.mu.Unlock()
}

// flushPreTeam writes the lead's conversation from before TeamCreate to the
// new team's transcript.
func (s *Session) flushPreTeam(t store.Team) {
	s.mu.Lock()
	pre := s.preTeam
	s.preTeam = nil
	s.mu.Unlock()
	markSpawn(t, store.LeadName)
	for _, m := range pre {
		appendTranscript(t, store.LeadName, m, nil, s.cfg.Logger)
	}
}

// recordLead writes the lead's messages to its transcript, then acks the
// inbox messages they carry.
func (s *Session) recordLead(m llm.Message) {
	t, err := s.Team()
	if err != nil {
		// No team yet: kept until TeamCreate writes the transcript.
		s.mu.Lock()
		s.preTeam = append(s.preTeam, m)
		s.mu.Unlock()
		return
	}
	var delivered []string
	var at store.Team
	id := ""
	if m.Role == llm.RoleUser {
		s.mu.Lock()
		at, id, delivered = s.ackTeam, s.ackID, s.delivered
		s.ackTeam, s.ackID, s.delivered = nil, "", nil
		s.mu.Unlock()
	}
	appendTranscript(t, store.LeadName, m, delivered, s.cfg.Logger)
	if at != nil && id != "" {
		if err := at.Mailbox().Ack(context.Background(), store.LeadName, id); err != nil {
			s.cfg.Logger.Warn("ack lead inbox", "err", err)
		}
	}
}

// leadBoundary delivers the lead's inbox at each of its tool boundaries.
func (s *Session) leadBoundary(ctx context.Context, _ []string) []llm.Block {
	t, err := s.Team()
	if err != nil {
		return nil
	}
	msgs, err := s.fetchLead(ctx, t)
	if err != nil {
		return nil
	}
	return messageBlocks(msgs)
}

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

// journal records a team event and passes it to the observer.
func journal(ctx context.Context, t store.Team, agentName, typ string, fields map[string]any, onEvent func(store.Event), log *slog.Logger) {
	e := store.Event{TS: time.Now().UTC(), Type: typ, Team: t.Name(), Agent: agentName, Fields: fields}
	if err := t.Journal().Append(context.WithoutCancel(ctx), e); err != nil && log != nil {
		log.Warn("journal", "type", typ, "err", err)
	}
	if onEvent != nil {
		onEvent(e)
	}
}

func (s *Session) journal(ctx context.Context, t store.Team, typ string, fields map[string]any) {
	journal(ctx, t, store.LeadName, typ, fields, s.cfg.OnEvent, s.cfg.Logger)
}

// Close stops every teammate this session started and waits for them, and
// stops the lead's background jobs. Teammates that were still running are
// marked shut down.
func (s *Session) Close() error {
	s.sessionEnd("other")
	s.mu.Lock()
	hs := make([]*handle, 0, len(s.members))
	for _, h := range s.members {
		hs = append(hs, h)
	}
	s.mu.Unlock()
	for _, h := range hs {
		h.cancel()
		h.signal(syscall.SIGTERM)
	}
	s.mu.Lock()
	if s.stopBeat != nil {
		s.stopBeat()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.jobs.StopAll()
	s.stopFollowing()
	s.mu.Lock()
	dir, name := s.archived, s.archivedTeam
	s.mu.Unlock()
	return s.usage.flushArchive(dir, name)
}

// running returns the names of members whose runtime is still up.
func (s *Session) running() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for n, h := range s.members {
		select {
		case <-h.done:
		default:
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
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

// teammateHandler is the Task tool with team_name and name.
func (s *Session) teammateHandler(ctx context.Context, _ *tool.Env, args tool.TaskArgs) tool.Result {
	out, err := s.spawn(ctx, args)
	if err != nil {
		return tool.Errorf("Task: %v", err)
	}
	return tool.OK(out)
}

// spawn puts a new teammate on the roster, gives it its prompt as its first
// message, and starts it.
func (s *Session) spawn(ctx context.Context, args tool.TaskArgs) (string, error) {
	t, err := s.Team()
	if err != nil {
		return "", err
	}
	if args.TeamName != "" && !strings.EqualFold(args.TeamName, t.Name()) {
		return "", fmt.Errorf("team %q is not this session's team (%s)", args.TeamName, t.Name())
	}
	name, err := store.NormalizeMemberName(args.Name)
	if err != nil {
		return "", err
	}
	if name == store.LeadName {
		return "", fmt.Errorf("%q is the lead's name", name)
	}
	mode := args.PermissionMode
	if mode == "" && s.cfg.Rules != nil {
		mode = s.cfg.Rules.DefaultMode
	}
	if mode == "" {
		mode = s.PermissionMode()
	}
	if !validPermissionMode(mode) || mode == PermDelegate {
		return "", fmt.Errorf("permission_mode %q is not one of %s", mode, modeNames(permission.TeammateModes))
	}
	role := strings.TrimSpace(args.Role)
	if role == "" {
		role = strings.TrimSpace(args.SubagentType)
	}
	model := args.Model
	if model == "" {
		s.mu.Lock()
		p := s.pattern
		s.mu.Unlock()
		model = s.cfg.Rules.roleModel(p, role)
	}
	if model == "" && s.cfg.Rules != nil {
		model = s.cfg.Rules.TeammateModel
	}
	if model == "" {
		model = s.cfg.TeammateModel
	}
	now := time.Now().UTC()
	_, err = t.UpdateRoster(ctx, func(r *store.Roster) error {
		if m, ok := r.Member(name); ok {
			if m.Status != store.StatusShutdown && !Dead(*m, now) {
				return fmt.Errorf("a teammate called %q is already on the team (%s); message it instead of spawning another", name, m.Status)
			}
			// A member that was shut down may be spawned again.
			*m = store.Member{}
			r.Members = removeMember(r.Members, name)
		}
		r.Members = append(r.Members, store.Member{
			Name: name, Role: role, Model: model, Provider: providerOf(model, s.cfg.Provider), AgentType: "teammate", Status: store.StatusWorking,
			PlanModeRequired: args.PlanModeRequired, PermissionMode: mode, CWD: s.cfg.Workspace.Dir(),
			BudgetTokens: args.BudgetTokens, BudgetUSD: args.BudgetUSD,
			JoinedAt: now, HeartbeatAt: now,
		})
		return nil
	})
	if err != nil {
		return "", err
	}
	markSpawn(t, name)
	prompt := strings.TrimSpace(args.Prompt)
	if prompt == "" {
		prompt = args.Description
	}
	if _, err := t.Mailbox().Send(ctx, store.Message{Type: store.TypeMessage, From: store.LeadName, To: name, Content: prompt, Summary: args.Description}); err != nil {
		return "", fmt.Errorf("give %s its prompt: %w", name, err)
	}
	s.journal(ctx, t, "spawn", map[string]any{"member": name, "role": role, "model": model, "plan_mode_required": args.PlanModeRequired, "permission_mode": mode, "mode": s.cfg.TeammateMode})
	if err := s.start(t, name); err != nil {
		return "", err
	}
	desc := name
	if role != "" {
		desc += " (" + role + ")"
	}
	return fmt.Sprintf("Spawned teammate %s in team %s. It has your prompt as its first message and will claim unblocked tasks when idle.", desc, t.Name()), nil
}

// providerOf names the provider a model spec runs on: its "provider:"
// prefix, else the session's default provider.
func providerOf(model string, def llm.Provider) string {
	if p, _, ok := strings.Cut(model, ":"); ok && (p == "anthropic" || p == "openai") {
		return p
	}
	return def.Name()
}

func removeMember(ms []store.Member, name string) []store.Member {
	out := ms[:0]
	for _, m := range ms {
		if m.Name != name {
			out = append(out, m)
		}
	}
	return out
}

// start runs a roster member, in process or as its own process.
func (s *Session) start(t store.Team, name string) error {
	ctx, cancel := context.WithCancel(context.Background())
	h := &handle{name: name, cancel: cancel, done: make(chan struct{})}
	if s.cfg.TeammateMode == ModeProcess {
		cmd, err := s.startProcess(t, name)
		if err != nil {
			cancel()
			return err
		}
		h.setCmd(cmd)
		s.mu.Lock()
		s.members[name] = h
		s.mu.Unlock()
		s.wg.Go(func() {
			defer close(h.done)
			s.superviseProcess(ctx, t, h, cmd)
		})
		return nil
	}
	m, err := NewMember(MemberConfig{
		Team: t, Name: name, Provider: s.cfg.Provider, Pacer: s.cfg.Pacer, Workspace: s.cfg.Workspace,
		DefaultModel: s.cfg.TeammateModel, IdleTimeout: s.cfg.IdleTimeout, MaxTurns: s.cfg.MaxTurns,
		Sections: s.cfg.Sections, Rules: s.cfg.Rules, Observe: s.cfg.Observe, OnEvent: s.cfg.OnEvent, Logger: s.cfg.Logger,
	})
	if err != nil {
		cancel()
		return err
	}
	h.member = m
	s.mu.Lock()
	s.members[name] = h
	s.mu.Unlock()
	s.wg.Go(func() {
		defer close(h.done)
		if err := m.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			s.cfg.Logger.Warn("teammate stopped", "name", name, "err", err)
		}
	})
	return nil
}
