package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// AgentTypeExternal is the roster's agent_type of a member that an MCP
// client (Claude Code, an IDE, another agent) plays through TeamServer.
const AgentTypeExternal = "external"

// Defaults of TeamOptions.
const (
	// DefaultHeartbeat is how often the member's heartbeat is written; the
	// team counts a member live while it is fresh.
	DefaultHeartbeat = 10 * time.Second
	// DefaultWait is how long ReceiveMessages waits for a message when the
	// client names no wait; MaxWait bounds what it may name.
	DefaultWait = 60 * time.Second
	MaxWait     = 10 * time.Minute
	// staleBy is how far back Close sets the heartbeat of a member whose
	// client left: past any lease the team uses.
	staleBy = 24 * time.Hour
)

// TeamOptions configure a TeamServer.
type TeamOptions struct {
	// Team is the team's durable state, sealed with the team's key when it
	// has one (so that the runtime takes this member's protocol answers).
	Team store.Team
	// Member is the name the client plays; Role is shown on the roster.
	Member string
	Role   string
	// Heartbeat is the heartbeat interval (default DefaultHeartbeat).
	Heartbeat time.Duration
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// TeamServer seats an MCP client on a team as a member: it offers the
// teammate tool set (TaskList, TaskGet, TaskCreate, TaskUpdate,
// SendMessage, ReceiveMessages) and the board and roster as resources,
// keeps the member's heartbeat and status, and takes part in shutdown.
type TeamServer struct {
	opts TeamOptions
	team store.Team
	me   string
	srv  *sdk.Server

	mu       sync.Mutex
	status   string
	requests map[string]string // shutdown request id -> who asked
	shutDown bool
	waiting  int // ReceiveMessages calls under way
	closed   bool

	// acks carries the consumption of handed-out messages to a worker, so
	// that a waiting client gets its messages without waiting for the
	// inbox cursor's fsync. A crash before the ack hands them out again:
	// the store's at-least-once contract, de-duplicated by message id.
	acks     chan []store.Message
	ackDone  chan struct{}
	stop     context.CancelFunc
	beatDone chan struct{}
	done     chan struct{} // closed when the member shuts down
}

// NewTeamServer puts the member on the roster (agent_type external, idle)
// and starts its heartbeat. A name that a member of another kind holds, or
// that a live external member holds, is refused.
func NewTeamServer(ctx context.Context, opts TeamOptions) (*TeamServer, error) {
	if opts.Team == nil {
		return nil, errors.New("mcp serve: no team")
	}
	name, err := store.NormalizeMemberName(opts.Member)
	if err != nil {
		return nil, fmt.Errorf("mcp serve: member name: %w", err)
	}
	if name == store.LeadName {
		return nil, fmt.Errorf("mcp serve: %s is the lead's seat; an MCP client joins as a teammate", store.LeadName)
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &TeamServer{opts: opts, team: opts.Team, me: name, status: store.StatusIdle,
		requests: map[string]string{}, done: make(chan struct{})}
	now := opts.Now().UTC()
	_, err = s.team.UpdateRoster(ctx, func(r *store.Roster) error {
		if m, ok := r.Member(name); ok {
			if m.AgentType != AgentTypeExternal {
				return fmt.Errorf("%s is already a %s member of team %s; choose another name", name, cmpOr(m.AgentType, "runtime"), r.Name)
			}
			if m.Status != store.StatusShutdown && m.PID != os.Getpid() && now.Sub(m.HeartbeatAt) < 3*opts.Heartbeat {
				return fmt.Errorf("%s is live in team %s already (pid %d, heartbeat %s ago)", name, r.Name, m.PID, now.Sub(m.HeartbeatAt).Round(time.Second))
			}
			m.Status, m.PID, m.HeartbeatAt, m.Role = store.StatusIdle, os.Getpid(), now, cmpOr(opts.Role, m.Role)
			return nil
		}
		cwd, _ := os.Getwd()
		r.Members = append(r.Members, store.Member{Name: name, Role: cmpOr(opts.Role, "external"), AgentType: AgentTypeExternal,
			Status: store.StatusIdle, PermissionMode: "default", CWD: cwd, PID: os.Getpid(), HeartbeatAt: now, JoinedAt: now})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("mcp serve: join team %s: %w", s.team.Name(), err)
	}
	s.journal(ctx, teamevent.Spawn{Member: name, Role: cmpOr(opts.Role, "external"), PermissionMode: "default", Mode: AgentTypeExternal})
	bctx, stop := context.WithCancel(context.Background())
	s.stop, s.beatDone = stop, make(chan struct{})
	go s.beat(bctx)
	s.acks, s.ackDone = make(chan []store.Message, 64), make(chan struct{})
	go s.ackLoop()
	s.srv = s.newServer()
	return s, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Server is the MCP server to run on a transport (stdio, streamable HTTP).
func (s *TeamServer) Server() *sdk.Server { return s.srv }

// Member is the name the client plays.
func (s *TeamServer) Member() string { return s.me }

// Done is closed when the member has approved a shutdown.
func (s *TeamServer) Done() <-chan struct{} { return s.done }

// Close stops the heartbeat; the member stays on the roster, and the
// team finds it dead once its heartbeat is stale, unless it shut down.
// Close waits for the acknowledgements under way and, unless the member
// shut down, marks its heartbeat stale: the client is gone, the team finds
// the member dead (and frees its tasks), and the name may join again at
// once. Call it after the MCP server has stopped.
func (s *TeamServer) Close() error {
	s.stop()
	<-s.beatDone
	s.mu.Lock()
	gone := s.shutDown || s.closed
	s.mu.Unlock()
	if !gone {
		stale := s.opts.Now().UTC().Add(-staleBy)
		if _, err := s.team.UpdateRoster(context.Background(), func(r *store.Roster) error {
			if m, ok := r.Member(s.me); ok && m.Status != store.StatusShutdown && m.PID == os.Getpid() {
				m.HeartbeatAt = stale
			}
			return nil
		}); err != nil {
			s.opts.Logger.Warn("roster", "member", s.me, "err", err)
		}
		s.journal(context.Background(), teamevent.Stopped{Member: s.me, Why: "the MCP client disconnected"})
	}
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.acks)
	}
	s.mu.Unlock()
	<-s.ackDone
	return nil
}

func (s *TeamServer) ackLoop() {
	defer close(s.ackDone)
	ctx := context.Background()
	for msgs := range s.acks {
		ids := make([]string, len(msgs))
		for i, m := range msgs {
			ids[i] = m.ID
		}
		if err := s.team.Mailbox().Ack(ctx, s.me, msgs[len(msgs)-1].ID); err != nil {
			s.opts.Logger.Warn("ack", "member", s.me, "err", err)
		}
		s.journal(ctx, teamevent.Deliver{Member: s.me, IDs: ids, At: "receive"})
	}
}

func (s *TeamServer) beat(ctx context.Context) {
	defer close(s.beatDone)
	tick := time.NewTicker(s.opts.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.mu.Lock()
		gone := s.shutDown
		s.mu.Unlock()
		if gone {
			return
		}
		now := s.opts.Now().UTC()
		if _, err := s.team.UpdateRoster(ctx, func(r *store.Roster) error {
			if m, ok := r.Member(s.me); ok && m.Status != store.StatusShutdown {
				m.HeartbeatAt, m.PID = now, os.Getpid()
			}
			return nil
		}); err != nil && ctx.Err() == nil {
			s.opts.Logger.Warn("heartbeat", "member", s.me, "err", err)
		}
	}
}

// journal records ev as this member, in the team's typed form
// (teamevent), so the team's UI, usage and resume read it as they read a
// runtime teammate's.
func (s *TeamServer) journal(ctx context.Context, ev teamevent.Event) {
	e, err := teamevent.Encode(s.me, ev)
	if err == nil {
		e.TS, e.Team = time.Now().UTC(), s.team.Name()
		err = s.team.Journal().Append(context.WithoutCancel(ctx), e)
	}
	if err != nil {
		s.opts.Logger.Warn("journal", "type", ev.Type(), "err", err)
	}
}

// setStatus writes the member's status when it changes: working during a
// call, idle while it waits for messages.
func (s *TeamServer) setStatus(ctx context.Context, status string) {
	s.mu.Lock()
	if s.shutDown || s.status == status {
		s.mu.Unlock()
		return
	}
	was := s.status
	s.status = status
	s.mu.Unlock()
	_, err := s.team.UpdateRoster(context.WithoutCancel(ctx), func(r *store.Roster) error {
		if m, ok := r.Member(s.me); ok && m.Status != store.StatusShutdown {
			m.Status = status
		}
		return nil
	})
	if err != nil {
		s.opts.Logger.Warn("status", "member", s.me, "err", err)
		return
	}
	s.journal(ctx, teamevent.Status{Member: s.me, Status: status})
	if was == store.StatusWorking && status == store.StatusIdle {
		// As a runtime teammate does: the lead's waker looks at the team
		// again when a member goes idle.
		if _, err := s.send(ctx, store.Message{Type: store.TypeIdleNotification, From: s.me, To: store.LeadName,
			Content: s.me + " is idle", Summary: "waiting for messages"}); err != nil {
			s.opts.Logger.Warn("idle notification", "member", s.me, "err", err)
		}
	}
}

// live is the check at the start of every call: a member that shut down
// does no more; any other call makes it working.
func (s *TeamServer) live(ctx context.Context, working bool) error {
	s.mu.Lock()
	gone := s.shutDown
	s.mu.Unlock()
	if gone {
		return fmt.Errorf("%w: %s left team %s; nothing more to do", ErrShutDown, s.me, s.team.Name())
	}
	if working {
		s.setStatus(ctx, store.StatusWorking)
	}
	return nil
}

func textResult(format string, args ...any) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// The tools' arguments. Field names follow troupe's own team tools, so a
// model that knows one knows the other.
type (
	noArgs     struct{}
	taskGetArg struct {
		TaskID string `json:"taskId" jsonschema:"the task's id"`
	}
	taskCreateArg struct {
		Subject     string   `json:"subject" jsonschema:"a short imperative title"`
		Description string   `json:"description,omitempty" jsonschema:"what done means, in enough detail for a teammate"`
		ActiveForm  string   `json:"activeForm,omitempty" jsonschema:"the title in the present continuous, shown while the task is in progress"`
		BlockedBy   []string `json:"blockedBy,omitempty" jsonschema:"ids of tasks that must be completed first"`
	}
	taskUpdateArg struct {
		TaskID       string   `json:"taskId" jsonschema:"the task's id"`
		Status       string   `json:"status,omitempty" jsonschema:"pending, in_progress (claims the task when it is pending and unowned), completed or deleted"`
		Owner        *string  `json:"owner,omitempty" jsonschema:"the new owner (a member name; empty to unassign); assigning tells that member"`
		Subject      string   `json:"subject,omitempty" jsonschema:"a new title"`
		Description  string   `json:"description,omitempty" jsonschema:"a new description"`
		ActiveForm   string   `json:"activeForm,omitempty" jsonschema:"a new present-continuous title"`
		AddBlocks    []string `json:"addBlocks,omitempty" jsonschema:"ids of tasks that must wait for this one"`
		AddBlockedBy []string `json:"addBlockedBy,omitempty" jsonschema:"ids of tasks this one must wait for"`
	}
	sendArg struct {
		Type      string `json:"type,omitempty" jsonschema:"message (default), broadcast, or shutdown_response"`
		Recipient string `json:"recipient,omitempty" jsonschema:"the member to send to (the lead is team-lead); not needed for broadcast or shutdown_response"`
		Content   string `json:"content,omitempty" jsonschema:"the text of the message"`
		Summary   string `json:"summary,omitempty" jsonschema:"a few words shown in previews"`
		RequestID string `json:"request_id,omitempty" jsonschema:"for a shutdown_response: the request_id of the shutdown_request it answers"`
		Approve   *bool  `json:"approve,omitempty" jsonschema:"for a shutdown_response: true to shut down, false to refuse"`
		Reason    string `json:"reason,omitempty" jsonschema:"for a refused shutdown_response: why"`
	}
	receiveArg struct {
		WaitSeconds *float64 `json:"wait_seconds,omitempty" jsonschema:"how long to wait for a message when none is waiting (default 60, at most 600; 0 returns at once)"`
	}
)

func (s *TeamServer) newServer() *sdk.Server {
	srv := sdk.NewServer(&sdk.Implementation{Name: "troupe", Title: "troupe team " + s.team.Name(), Version: "1"}, &sdk.ServerOptions{
		Instructions: fmt.Sprintf("You are %s, a member of the troupe team %s, led by %s. Take tasks from the board: TaskList, then claim a pending unblocked task with TaskUpdate (status in_progress), do it, and mark it completed with TaskUpdate. Talk to the team with SendMessage. Between tasks, call ReceiveMessages to wait for messages; when a shutdown_request arrives, answer it with SendMessage type shutdown_response (approve true when you have finished).", s.me, s.team.Name(), store.LeadName),
	})
	ro := &sdk.ToolAnnotations{ReadOnlyHint: true}
	sdk.AddTool(srv, &sdk.Tool{Name: "TaskList", Description: "Show the team's task board: every task with its status, owner and what blocks it.", Annotations: ro}, s.taskList)
	sdk.AddTool(srv, &sdk.Tool{Name: "TaskGet", Description: "Show one task in full.", Annotations: ro}, s.taskGet)
	sdk.AddTool(srv, &sdk.Tool{Name: "TaskCreate", Description: "Add a task to the team's shared board. It starts pending; idle teammates claim pending, unblocked tasks."}, s.taskCreate)
	sdk.AddTool(srv, &sdk.Tool{Name: "TaskUpdate", Description: "Change a task. Claim a pending, unowned, unblocked task with status in_progress (it becomes yours; a task someone else took first is refused); finish it with status completed, which unblocks the tasks that wait for it."}, s.taskUpdate)
	sdk.AddTool(srv, &sdk.Tool{Name: "SendMessage", Description: "Send a message to a teammate or the lead (team-lead) through their inbox, broadcast to everyone, or answer a shutdown_request with a shutdown_response (request_id and approve)."}, s.sendMessage)
	sdk.AddTool(srv, &sdk.Tool{Name: "ReceiveMessages", Description: "Wait for messages in your inbox and return them (messages from the lead and teammates, task assignments, shutdown requests). Call it whenever you are between tasks."}, s.receiveMessages)
	base := "troupe://team/" + s.team.Name()
	srv.AddResource(&sdk.Resource{URI: base + "/board", Name: "board", Title: "Task board of team " + s.team.Name(), MIMEType: "application/json"}, s.readBoard)
	srv.AddResource(&sdk.Resource{URI: base + "/roster", Name: "roster", Title: "Roster of team " + s.team.Name(), MIMEType: "application/json"}, s.readRoster)
	return srv
}

func (s *TeamServer) taskList(ctx context.Context, _ *sdk.CallToolRequest, _ noArgs) (*sdk.CallToolResult, any, error) {
	if err := s.live(ctx, true); err != nil {
		return nil, nil, err
	}
	tasks, err := s.team.Tasks().List(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("TaskList: %w", err)
	}
	if len(tasks) == 0 {
		return textResult("The board is empty."), nil, nil
	}
	lines := make([]string, len(tasks))
	for i, t := range tasks {
		lines[i] = t.Line()
	}
	return textResult("%s", strings.Join(lines, "\n")), nil, nil
}

func (s *TeamServer) taskGet(ctx context.Context, _ *sdk.CallToolRequest, a taskGetArg) (*sdk.CallToolResult, any, error) {
	if err := s.live(ctx, true); err != nil {
		return nil, nil, err
	}
	t, err := s.team.Tasks().Get(ctx, taskID(a.TaskID))
	if err != nil {
		return nil, nil, fmt.Errorf("TaskGet: %w", err)
	}
	var b strings.Builder
	b.WriteString(t.Line())
	if d := strings.TrimSpace(t.Description); d != "" {
		b.WriteString("\n\n" + d)
	}
	if len(t.Blocks) > 0 {
		fmt.Fprintf(&b, "\n\nBlocks: #%s", strings.Join(t.Blocks, ", #"))
	}
	return textResult("%s", b.String()), nil, nil
}

func taskID(s string) string { return strings.TrimPrefix(strings.TrimSpace(s), "#") }

func (s *TeamServer) taskCreate(ctx context.Context, _ *sdk.CallToolRequest, a taskCreateArg) (*sdk.CallToolResult, any, error) {
	if err := s.live(ctx, true); err != nil {
		return nil, nil, err
	}
	if strings.TrimSpace(a.Subject) == "" {
		return nil, nil, errors.New("TaskCreate: a task needs a subject")
	}
	var blocked []string
	for _, id := range a.BlockedBy {
		blocked = append(blocked, taskID(id))
	}
	got, err := s.team.Tasks().Create(ctx, store.Task{Subject: a.Subject, Description: a.Description, ActiveForm: a.ActiveForm, BlockedBy: blocked})
	if err != nil {
		return nil, nil, fmt.Errorf("TaskCreate: %w", err)
	}
	s.journal(ctx, teamevent.TaskCreate{Task: got.ID, Subject: got.Subject, BlockedBy: got.BlockedBy})
	return textResult("Created task #%s: %s", got.ID, got.Subject), nil, nil
}

func (s *TeamServer) taskUpdate(ctx context.Context, _ *sdk.CallToolRequest, a taskUpdateArg) (*sdk.CallToolResult, any, error) {
	if err := s.live(ctx, true); err != nil {
		return nil, nil, err
	}
	id := taskID(a.TaskID)
	tasks := s.team.Tasks()
	switch a.Status {
	case "", store.TaskPending, store.TaskInProgress, store.TaskCompleted, store.TaskDeleted:
	default:
		return nil, nil, fmt.Errorf("TaskUpdate: status %q is not one of pending, in_progress, completed, deleted", a.Status)
	}
	var owner string
	if a.Owner != nil && *a.Owner != "" {
		r, err := s.team.ReadRoster(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("TaskUpdate: %w", err)
		}
		if owner, err = store.ResolveRecipient(&r, *a.Owner); err != nil {
			return nil, nil, fmt.Errorf("TaskUpdate: owner: %w", err)
		}
	}
	cur, err := tasks.Get(ctx, id)
	if err != nil {
		return nil, nil, fmt.Errorf("TaskUpdate: %w", err)
	}
	// Taking a pending task is a claim: a compare-and-set, so that two
	// members never both think they own it.
	claim := a.Status == store.TaskInProgress && cur.Status == store.TaskPending && (a.Owner == nil || owner == s.me)
	if claim {
		got, err := tasks.Claim(ctx, id, s.me)
		if err != nil {
			return nil, nil, fmt.Errorf("TaskUpdate: claim task #%s: %w", id, err)
		}
		s.journal(ctx, teamevent.Claim{Task: got.ID, Owner: s.me, Subject: got.Subject})
		cur = got
		a.Status = ""
		if a.Owner != nil {
			a.Owner = nil
		}
		if a.Subject == "" && a.Description == "" && a.ActiveForm == "" && len(a.AddBlocks) == 0 && len(a.AddBlockedBy) == 0 {
			return textResult("Claimed %s. When it is done, mark it completed with TaskUpdate.", got.Line()), nil, nil
		}
	}
	edit := store.TaskEdit{Status: a.Status, Subject: a.Subject, Description: a.Description, ActiveForm: a.ActiveForm,
		AddBlocks: a.AddBlocks, AddBlockedBy: a.AddBlockedBy}
	if a.Owner != nil {
		edit.Owner = &owner
	}
	var before store.Task
	got, err := tasks.Update(ctx, id, func(t *store.Task) error {
		before = *t
		edit.Apply(t)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("TaskUpdate: %w", err)
	}
	change := teamevent.TaskChange{Task: got.ID, Status: got.Status, Owner: got.Owner, AddBlockedBy: a.AddBlockedBy, AddBlocks: a.AddBlocks}
	if got.Status == store.TaskCompleted && before.Status != store.TaskCompleted {
		s.journal(ctx, teamevent.TaskComplete{TaskChange: change})
	} else {
		s.journal(ctx, teamevent.TaskUpdate{TaskChange: change})
	}
	if a.Owner != nil && got.Owner != "" && got.Owner != before.Owner && got.Owner != s.me {
		if _, err := s.send(ctx, store.Message{Type: store.TypeTaskAssignment, From: s.me, To: got.Owner, TaskID: got.ID,
			Content: fmt.Sprintf("You were assigned task #%s: %s\n\n%s\n\nWhen it is done, mark it completed with TaskUpdate.", got.ID, got.Subject, got.Description),
			Summary: "task #" + got.ID + " assigned"}); err != nil {
			return nil, nil, fmt.Errorf("TaskUpdate: task #%s updated but telling %s failed: %w", got.ID, got.Owner, err)
		}
	}
	if got.Status == store.TaskDeleted {
		return textResult("Deleted task #%s.", got.ID), nil, nil
	}
	return textResult("Updated %s", got.Line()), nil, nil
}

func (s *TeamServer) send(ctx context.Context, m store.Message) (store.Message, error) {
	sent, err := s.team.Mailbox().Send(ctx, m)
	if err != nil {
		return sent, err
	}
	s.journal(ctx, teamevent.Sent(sent))
	return sent, nil
}

func (s *TeamServer) sendMessage(ctx context.Context, _ *sdk.CallToolRequest, a sendArg) (*sdk.CallToolResult, any, error) {
	if err := s.live(ctx, true); err != nil {
		return nil, nil, err
	}
	typ := cmpOr(a.Type, store.TypeMessage)
	switch typ {
	case store.TypeMessage:
		if strings.TrimSpace(a.Content) == "" {
			return nil, nil, errors.New("SendMessage: a message needs content")
		}
		if a.Recipient == "" {
			return nil, nil, errors.New("SendMessage: a message needs a recipient")
		}
		r, err := s.team.ReadRoster(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("SendMessage: %w", err)
		}
		to, err := store.ResolveRecipient(&r, a.Recipient)
		if err != nil {
			return nil, nil, fmt.Errorf("SendMessage: %w", err)
		}
		sent, err := s.send(ctx, store.Message{Type: typ, From: s.me, To: to, Content: a.Content, Summary: a.Summary})
		if err != nil {
			return nil, nil, fmt.Errorf("SendMessage: %w", err)
		}
		return textResult("Sent to %s.", sent.To), nil, nil
	case store.TypeBroadcast:
		if strings.TrimSpace(a.Content) == "" {
			return nil, nil, errors.New("SendMessage: a broadcast needs content")
		}
		sent, err := s.team.Mailbox().Broadcast(ctx, store.Message{Type: typ, From: s.me, Content: a.Content, Summary: a.Summary})
		if err != nil {
			return nil, nil, fmt.Errorf("SendMessage: %w", err)
		}
		var to []string
		for _, m := range sent {
			to = append(to, m.To)
			s.journal(ctx, teamevent.Sent(m))
		}
		if len(to) == 0 {
			return textResult("Broadcast sent to nobody: you are the only member."), nil, nil
		}
		return textResult("Broadcast sent to %s.", strings.Join(to, ", ")), nil, nil
	case store.TypeShutdownResponse:
		return s.answerShutdown(ctx, a)
	case store.TypeShutdownRequest:
		return nil, nil, errors.New("SendMessage: only the lead asks members to shut down")
	default:
		return nil, nil, fmt.Errorf("SendMessage: type %q is not sent by an external member (message, broadcast, shutdown_response)", typ)
	}
}

func (s *TeamServer) answerShutdown(ctx context.Context, a sendArg) (*sdk.CallToolResult, any, error) {
	if a.Approve == nil || a.RequestID == "" {
		return nil, nil, errors.New("SendMessage: a shutdown_response needs request_id and approve (true or false)")
	}
	s.mu.Lock()
	from, ok := s.requests[a.RequestID]
	s.mu.Unlock()
	if !ok {
		return nil, nil, fmt.Errorf("SendMessage: no shutdown request %q was sent to you", a.RequestID)
	}
	if !*a.Approve && strings.TrimSpace(a.Reason) == "" && strings.TrimSpace(a.Content) == "" {
		return nil, nil, errors.New("SendMessage: refusing a shutdown needs a reason")
	}
	if from == "" || from == store.HumanName {
		from = store.LeadName
	}
	msg := store.Message{Type: store.TypeShutdownResponse, From: s.me, To: from, RequestID: a.RequestID, Approve: a.Approve,
		Reason: a.Reason, Content: cmpOr(a.Content, map[bool]string{true: "Shutting down.", false: "Not shutting down."}[*a.Approve])}
	if *a.Approve {
		// The roster says shutdown before the requester hears it, and the
		// tasks it leaves go back to the board.
		msg.Content += handBackNote(s.handBack(ctx))
		s.mu.Lock()
		s.shutDown = true
		s.status = store.StatusShutdown
		s.mu.Unlock()
		if _, err := s.team.UpdateRoster(context.WithoutCancel(ctx), func(r *store.Roster) error {
			if m, ok := r.Member(s.me); ok {
				m.Status = store.StatusShutdown
			}
			return nil
		}); err != nil {
			s.opts.Logger.Warn("roster", "member", s.me, "err", err)
		}
		s.journal(ctx, teamevent.Status{Member: s.me, Status: store.StatusShutdown, Why: "shutdown approved"})
	}
	if _, err := s.send(context.WithoutCancel(ctx), msg); err != nil {
		return nil, nil, fmt.Errorf("SendMessage: %w", err)
	}
	s.mu.Lock()
	delete(s.requests, a.RequestID)
	s.mu.Unlock()
	s.journal(ctx, teamevent.Protocol{Kind: teamevent.ProtocolShutdown, RequestID: a.RequestID, Member: s.me, Approve: a.Approve, Reason: a.Reason})
	if *a.Approve {
		close(s.done)
		return textResult("Shutdown approved: you have left team %s. Stop working on it.", s.team.Name()), nil, nil
	}
	return textResult("Shutdown refused; keep working."), nil, nil
}

// handBack releases the tasks this member holds in progress.
func (s *TeamServer) handBack(ctx context.Context) []string {
	tasks, err := s.team.Tasks().List(context.WithoutCancel(ctx))
	if err != nil {
		s.opts.Logger.Warn("hand back tasks", "member", s.me, "err", err)
		return nil
	}
	var out []string
	for _, t := range tasks {
		if t.Owner != s.me || t.Status != store.TaskInProgress {
			continue
		}
		_, err := s.team.Tasks().Update(context.WithoutCancel(ctx), t.ID, func(x *store.Task) error {
			if x.Owner != s.me || x.Status != store.TaskInProgress {
				return errNotMine
			}
			x.Owner, x.Status = "", store.TaskPending
			return nil
		})
		if err == nil {
			out = append(out, t.ID)
			s.journal(ctx, teamevent.HandBack{Member: s.me, Task: t.ID})
		}
	}
	return out
}

var errNotMine = errors.New("no longer this member's")

func handBackNote(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return fmt.Sprintf(" Unfinished task #%s went back to the board, unowned.", strings.Join(ids, ", #"))
}

// Delivered is one message as ReceiveMessages returns it.
type Delivered struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	From      string    `json:"from"`
	Content   string    `json:"content,omitempty"`
	Summary   string    `json:"summary,omitempty"`
	RequestID string    `json:"request_id,omitempty"`
	TaskID    string    `json:"task_id,omitempty"`
	Approve   *bool     `json:"approve,omitempty"`
	Timestamp time.Time `json:"timestamp"`
}

// Received is ReceiveMessages' structured result.
type Received struct {
	Messages []Delivered `json:"messages"`
}

func (s *TeamServer) receiveMessages(ctx context.Context, _ *sdk.CallToolRequest, a receiveArg) (*sdk.CallToolResult, Received, error) {
	if err := s.live(ctx, false); err != nil {
		return nil, Received{}, err
	}
	wait := DefaultWait
	if a.WaitSeconds != nil {
		wait = min(max(time.Duration(*a.WaitSeconds*float64(time.Second)), 0), MaxWait)
	}
	s.mu.Lock()
	s.waiting++
	s.mu.Unlock()
	s.setStatus(ctx, store.StatusIdle)
	wctx, cancel := context.WithTimeout(ctx, wait)
	msgs, err := s.team.Mailbox().Receive(wctx, s.me)
	cancel()
	s.mu.Lock()
	s.waiting--
	s.mu.Unlock()
	if err != nil && len(msgs) == 0 && wctx.Err() == nil {
		return nil, Received{}, fmt.Errorf("ReceiveMessages: %w", err)
	}
	if len(msgs) == 0 {
		return textResult("No messages (waited %s). Call ReceiveMessages again to keep waiting, or check the board with TaskList.", wait.Round(time.Millisecond)), Received{Messages: []Delivered{}}, nil
	}
	s.mu.Lock()
	if !s.closed {
		s.acks <- msgs
	}
	s.mu.Unlock()
	out := make([]Delivered, len(msgs))
	var b strings.Builder
	for i, m := range msgs {
		out[i] = Delivered{ID: m.ID, Type: m.Type, From: m.From, Content: m.Content, Summary: m.Summary, RequestID: m.RequestID, TaskID: m.TaskID, Approve: m.Approve, Timestamp: m.Timestamp}
		if m.Type == store.TypeShutdownRequest && m.RequestID != "" {
			s.mu.Lock()
			s.requests[m.RequestID] = m.From
			s.mu.Unlock()
		}
		if i > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "<message id=%q type=%q from=%q", m.ID, m.Type, m.From)
		if m.RequestID != "" {
			fmt.Fprintf(&b, " request_id=%q", m.RequestID)
		}
		if m.TaskID != "" {
			fmt.Fprintf(&b, " task_id=%q", m.TaskID)
		}
		fmt.Fprintf(&b, ">%s</message>", m.Content)
		if m.Type == store.TypeShutdownRequest {
			fmt.Fprintf(&b, "\nAnswer it with SendMessage type shutdown_response, request_id %q, approve true (or false with a reason).", m.RequestID)
		}
	}
	// The member stays idle until it acts on what it read: its next call
	// makes it working.
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: b.String()}}}, Received{Messages: out}, nil
}

func (s *TeamServer) readBoard(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	b, err := s.team.Tasks().Board(ctx)
	if err != nil {
		return nil, err
	}
	return jsonResource(req.Params.URI, b)
}

func (s *TeamServer) readRoster(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	r, err := s.team.ReadRoster(ctx)
	if err != nil {
		return nil, err
	}
	return jsonResource(req.Params.URI, r)
}

func jsonResource(uri string, v any) (*sdk.ReadResourceResult, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}
