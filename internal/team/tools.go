package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/hook"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

// binding is what a team tool knows of its caller.
type binding struct {
	self   string
	lead   bool
	sess   *Session   // the lead's session (lead tools)
	member *Member    // the calling teammate (teammate tools)
	fixed  store.Team // a teammate's team
	rules  *Rules     // hooks on task events
	who    hook.Who
}

func (b *binding) team() (store.Team, error) {
	if b.fixed != nil {
		return b.fixed, nil
	}
	return b.sess.Team()
}

func (b *binding) journal(ctx context.Context, t store.Team, typ string, fields map[string]any) {
	if b.member != nil {
		b.member.journal(ctx, typ, fields)
		return
	}
	b.sess.journal(ctx, t, typ, fields)
}

// --- TeamCreate ---

type teamCreateArgs struct {
	TeamName    string `json:"team_name" required:"true" desc:"The team's name: lower case letters, digits, dot, dash, underscore."`
	Description string `json:"description" desc:"What the team is for."`
	Pattern     string `json:"pattern" desc:"The team pattern to record in the team's config, if any."`
}

type teamCreateTool struct{ b *binding }

var teamCreateSpec = tool.NewSpec[teamCreateArgs]("TeamCreate",
	"Create a team with a shared task board and inboxes. You become its lead ('team-lead'). Spawn teammates with Task (team_name and name) afterwards.")

func (teamCreateTool) Spec() llm.ToolSpec { return teamCreateSpec }
func (teamCreateTool) ReadOnly() bool     { return false }
func (teamCreateTool) Kind() kind.Kind    { return kind.Manage }
func (t teamCreateTool) Run(ctx context.Context, env *tool.Env, input json.RawMessage) tool.Result {
	args, res, ok := tool.DecodeArgs[teamCreateArgs]("TeamCreate", input)
	if !ok {
		return res
	}
	s := t.b.sess
	if cur := s.TeamName(); cur != "" {
		return tool.Errorf("you already lead team %s; delete it with TeamDelete before creating another", cur)
	}
	name, err := store.NormalizeName(args.TeamName)
	if err != nil {
		return tool.Errorf("TeamCreate: %v", err)
	}
	pat, note := args.Pattern, ""
	if pat == "" && s.cfg.Rules != nil {
		pat = s.cfg.Rules.DefaultPattern
	}
	if pat != "" && s.cfg.Rules != nil && s.cfg.Rules.Patterns != nil {
		if p, ok := s.cfg.Rules.Patterns.Lookup(pat); ok {
			pat = p.Name
			if p.ManageOnly() {
				note = fmt.Sprintf(" Pattern %s: you only manage; teammates do the work (your writing tools are refused).", p.Name)
			} else {
				note = fmt.Sprintf(" Pattern %s: you also work alongside the teammates.", p.Name)
			}
		} else {
			note = fmt.Sprintf(" Pattern %q is not known, so it enforces nothing.", pat)
		}
	}
	team, err := s.cfg.Store.CreateTeam(ctx, store.Roster{Name: name, Description: args.Description, Pattern: pat})
	if err != nil {
		return tool.Errorf("TeamCreate: %v", err)
	}
	// The key is made once the name is ours: a team that already existed
	// keeps its own.
	if team, err = s.openKey(ctx, team, true); err != nil {
		if derr := s.cfg.Store.DeleteTeam(context.WithoutCancel(ctx), name); derr != nil {
			s.cfg.Logger.Warn("delete team without key", "team", name, "err", derr)
		}
		return tool.Errorf("TeamCreate: team %s not created: its key: %v", name, err)
	}
	s.mu.Lock()
	s.team = team
	s.pattern = pat
	s.mu.Unlock()
	s.flushPreTeam(team)
	s.follow(team)
	s.startHeartbeat(team)
	s.usage.flush(ctx, team)
	s.hookTeam(team.Name(), "")
	s.journal(ctx, team, "team_create", map[string]any{"description": args.Description, "pattern": args.Pattern, "session_id": s.hookSession()})
	return tool.OK(fmt.Sprintf("Created team %s. You are its lead, %q. Add tasks with TaskCreate and spawn teammates with Task (team_name %q, name, role, prompt).%s", name, store.LeadName, name, note))
}

// --- TeamDelete ---

type teamDeleteArgs struct {
	Force bool `json:"force" desc:"Stop teammates that are still working instead of refusing."`
}

type teamDeleteTool struct{ b *binding }

var teamDeleteSpec = tool.NewSpec[teamDeleteArgs]("TeamDelete",
	"Shut every teammate down, wait for them, and delete the team. Refused while a teammate is still working, unless force is true.")

func (teamDeleteTool) Spec() llm.ToolSpec { return teamDeleteSpec }
func (teamDeleteTool) ReadOnly() bool     { return false }
func (teamDeleteTool) Kind() kind.Kind    { return kind.Manage }
func (t teamDeleteTool) Run(ctx context.Context, env *tool.Env, input json.RawMessage) tool.Result {
	args, res, ok := tool.DecodeArgs[teamDeleteArgs]("TeamDelete", input)
	if !ok {
		return res
	}
	out, err := t.b.sess.deleteTeam(ctx, args.Force)
	if err != nil {
		return tool.Errorf("TeamDelete: %v", err)
	}
	return tool.OK(out)
}

// deleteTeam shuts every member down, waits, and deletes the team.
func (s *Session) deleteTeam(ctx context.Context, force bool) (string, error) {
	t, err := s.Team()
	if err != nil {
		return "", err
	}
	r, err := t.ReadRoster(ctx)
	if err != nil {
		return "", err
	}
	var working, live []string
	for _, m := range r.Members {
		if m.Status == store.StatusShutdown {
			continue
		}
		live = append(live, m.Name)
		if m.Status != store.StatusIdle {
			working = append(working, m.Name)
		}
	}
	if len(working) > 0 && !force {
		return "", fmt.Errorf("teammates still working: %s; wait for them, ask them to shut down, or use force", strings.Join(working, ", "))
	}
	for _, name := range live {
		if _, err := s.sendAs(ctx, t, store.Message{Type: store.TypeShutdownRequest, From: store.LeadName, To: name,
			RequestID: s.ids.next(ctx, t, store.LeadName, "shutdown"), Content: "The team is being deleted."}); err != nil {
			return "", err
		}
	}
	// Wait for the members to stop: their runtimes end, or their roster
	// entries say shutdown (process mode, or members of another process).
	wctx, cancel := context.WithTimeout(ctx, s.cfg.ShutdownWait)
	defer cancel()
	ch, err := t.Tasks().Watch(wctx) // any change pokes us; the roster has no watch of its own
	if err != nil {
		return "", err
	}
	inbox, err := t.Mailbox().Watch(wctx, store.LeadName)
	if err != nil {
		return "", err
	}
	forced, timedOut := false, false
	for {
		left, err := s.notShutdown(ctx, t)
		if err != nil {
			return "", err
		}
		if len(left) == 0 {
			break
		}
		if timedOut {
			if !force {
				return "", fmt.Errorf("teammates did not shut down within %s: %s", s.cfg.ShutdownWait, strings.Join(left, ", "))
			}
			forced = true
			s.stopMembers(left)
			break
		}
		woke, err := s.cfg.Pacer.Wait(ctx, store.LeadName, func(context.Context) int {
			select {
			case <-ctx.Done():
				return -1
			case <-wctx.Done():
				return wokeTimeout
			case <-ch:
			case <-inbox:
			case <-s.anyDone():
			}
			return 0
		})
		if err != nil {
			return "", err
		}
		timedOut = woke == wokeTimeout
	}
	s.mu.Lock()
	hs := s.members
	s.members = map[string]*handle{}
	s.mu.Unlock()
	s.cfg.Pacer.Block(ctx, store.LeadName, func(context.Context) {
		for _, h := range hs {
			<-h.done
		}
	})
	s.stopFollowing()
	if final, err := t.ReadRoster(ctx); err == nil {
		s.cfg.Rules.recordHistory(final)
	}
	s.journal(ctx, t, "team_delete", map[string]any{"members": live, "forced": forced})
	kept := ""
	a, err := s.cfg.Store.ArchiveTeam(ctx, t.Name())
	if err != nil {
		return "", err
	}
	// The archive's name carries the time; the model is told where
	// archives live, not which one, so that what it reads is the same in a
	// replay.
	where := "the store's archive"
	if a.Path != "" {
		where = filepath.Dir(a.Path)
	}
	kept = fmt.Sprintf(" Its journal and transcripts are kept in %s (troupe usage %s still reads them).", where, t.Name())
	s.mu.Lock()
	s.archived, s.archivedTeam = a.Path, t.Name()
	s.mu.Unlock()
	s.dropKey(t.Name())
	s.mu.Lock()
	s.team = nil
	clear(s.awaiting)
	s.mu.Unlock()
	s.hookTeam("", "")
	return fmt.Sprintf("Team %s deleted; %d teammates shut down.%s", t.Name(), len(live), kept), nil
}

// anyDone returns a channel closed when any running member's runtime ends.
func (s *Session) anyDone() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(chan struct{})
	for _, h := range s.members {
		select {
		case <-h.done:
			continue
		default:
		}
		go func(h *handle) {
			select {
			case <-h.done:
				select {
				case <-out:
				default:
					close(out)
				}
			case <-out:
			}
		}(h)
	}
	return out
}

func (s *Session) stopMembers(names []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		if h, ok := s.members[n]; ok {
			h.cancel()
			h.signal(syscall.SIGTERM)
		}
	}
}

func (s *Session) notShutdown(ctx context.Context, t store.Team) ([]string, error) {
	r, err := t.ReadRoster(context.WithoutCancel(ctx))
	if err != nil {
		return nil, err
	}
	var left []string
	for _, m := range r.Members {
		if m.Status != store.StatusShutdown {
			left = append(left, m.Name)
		}
	}
	return left, nil
}

// --- SendMessage ---

type sendMessageArgs struct {
	Type      string `json:"type" enum:"message|broadcast|shutdown_request|shutdown_response|plan_approval_request|plan_approval_response|permission_response" desc:"What kind of message; default message."`
	Recipient string `json:"recipient" desc:"The member to send to (the lead is team-lead). Not needed for broadcast."`
	Content   string `json:"content" desc:"The text of the message (for a plan_approval_request: the plan)."`
	Summary   string `json:"summary" desc:"A few words shown in previews."`
	RequestID string `json:"request_id" desc:"For a response: the request_id of the request it answers."`
	Approve   *bool  `json:"approve" desc:"For a response: true to approve, false to refuse."`
	Feedback  string `json:"feedback" desc:"For a plan_approval_response: what to change."`
	Reason    string `json:"reason" desc:"For a refused shutdown_response: why."`
}

type sendMessageTool struct{ b *binding }

var sendMessageSpec = tool.NewSpec[sendMessageArgs]("SendMessage",
	"Send a message to a teammate or the lead through their inbox, broadcast to everyone, or take part in a protocol: shutdown_request / shutdown_response, plan_approval_request / plan_approval_response, permission_response. Responses need the request_id of the request and approve.")

func (sendMessageTool) Spec() llm.ToolSpec { return sendMessageSpec }
func (sendMessageTool) ReadOnly() bool     { return false }
func (sendMessageTool) Kind() kind.Kind    { return kind.Manage }
func (t sendMessageTool) Run(ctx context.Context, env *tool.Env, input json.RawMessage) tool.Result {
	args, res, ok := tool.DecodeArgs[sendMessageArgs]("SendMessage", input)
	if !ok {
		return res
	}
	out, err := t.b.sendMessage(ctx, args)
	if err != nil {
		return tool.Errorf("SendMessage: %v", err)
	}
	return tool.OK(out)
}

func (b *binding) sendMessage(ctx context.Context, a sendMessageArgs) (string, error) {
	t, err := b.team()
	if err != nil {
		return "", err
	}
	typ := a.Type
	if typ == "" {
		typ = store.TypeMessage
	}
	msg := store.Message{Type: typ, From: b.self, Content: a.Content, Summary: a.Summary, RequestID: a.RequestID, Approve: a.Approve, Feedback: a.Feedback, Reason: a.Reason}
	needApprove := func() error {
		if a.Approve == nil {
			return fmt.Errorf("a %s needs approve (true or false)", typ)
		}
		if a.RequestID == "" {
			return fmt.Errorf("a %s needs the request_id of the request it answers", typ)
		}
		return nil
	}
	switch typ {
	case store.TypeMessage, store.TypeBroadcast:
		// A plain message carries no protocol fields: an "approve" on it
		// would only look like an answer to its reader's model.
		msg.RequestID, msg.Approve, msg.Feedback, msg.Reason = "", nil, "", ""
	}
	switch typ {
	case store.TypeBroadcast:
		if strings.TrimSpace(a.Content) == "" {
			return "", errors.New("a broadcast needs content")
		}
		sent, err := t.Mailbox().Broadcast(ctx, msg)
		if err != nil {
			return "", err
		}
		names := make([]string, len(sent))
		for i, m := range sent {
			names[i] = m.To
			b.journal(ctx, t, "send", sentFields(m))
		}
		if len(names) == 0 {
			return "Broadcast sent to nobody: you are the only member.", nil
		}
		return fmt.Sprintf("Broadcast sent to %s.", strings.Join(names, ", ")), nil
	case store.TypeMessage:
		if strings.TrimSpace(a.Content) == "" {
			return "", errors.New("a message needs content")
		}
	case store.TypeShutdownRequest:
		if !b.lead {
			return "", errors.New("only the lead asks teammates to shut down; end your turn instead")
		}
		msg.RequestID = b.sess.ids.next(ctx, t, b.self, "shutdown")
		if msg.Content == "" {
			msg.Content = "Please shut down."
		}
	case store.TypeShutdownResponse:
		if err := needApprove(); err != nil {
			return "", err
		}
		if b.member == nil {
			return "", errors.New("only a teammate answers a shutdown request")
		}
		m := b.member
		m.mu.Lock()
		from, ok := m.shutdownReqs[a.RequestID]
		m.mu.Unlock()
		if !ok {
			return "", fmt.Errorf("no shutdown request %q was sent to you", a.RequestID)
		}
		if !*a.Approve && strings.TrimSpace(a.Reason) == "" && strings.TrimSpace(a.Content) == "" {
			return "", errors.New("refusing a shutdown needs a reason")
		}
		m.mu.Lock()
		delete(m.shutdownReqs, a.RequestID)
		m.mu.Unlock()
		if from == "" || from == store.HumanName {
			from = store.LeadName
		}
		a.Recipient = from
		if *a.Approve {
			// The roster says shutdown before the requester hears it, and
			// the tasks it leaves go back to the board.
			m.markShutdown(ctx, "shutdown approved")
			msg.Content += handedBackNote(m.handBackAll(ctx, "its owner shut down"))
		}
	case store.TypePlanApprovalRequest:
		if b.member == nil {
			return "", errors.New("only a teammate asks for plan approval")
		}
		if strings.TrimSpace(a.Content) == "" {
			return "", errors.New("a plan_approval_request needs the plan as content")
		}
		if a.Recipient != "" {
			if r, err := store.NormalizeName(a.Recipient); err != nil || r != store.LeadName {
				return "", fmt.Errorf("a plan_approval_request goes to the lead (%s), not %q", store.LeadName, a.Recipient)
			}
		}
		msg.RequestID = b.member.ids.next(ctx, t, b.self, "plan")
		msg.Plan = a.Content
		a.Recipient = store.LeadName
	case store.TypePlanApprovalResponse, store.TypePermissionResponse:
		if err := needApprove(); err != nil {
			return "", err
		}
		if !b.lead {
			return "", fmt.Errorf("only the lead answers a %s", strings.TrimSuffix(typ, "_response")+"_request")
		}
		req, ok := b.sess.request(a.RequestID)
		if !ok {
			return "", fmt.Errorf("no pending request %q was sent to you", a.RequestID)
		}
		if want := strings.TrimSuffix(typ, "_response") + "_request"; req.Type != want {
			return "", fmt.Errorf("request %q is a %s; answer it with a %s", a.RequestID, req.Type, strings.TrimSuffix(req.Type, "_request")+"_response")
		}
		if typ == store.TypePermissionResponse && *a.Approve {
			// The lead may only grant what its own rules would let it do.
			call := agent.Call{Name: req.ToolName, Input: req.ToolInput}
			if ok, why := b.sess.cfg.Rules.policy().Grantable(b.sess.leadMode(), call); !ok {
				return "", fmt.Errorf("you may not grant %s's %s call: %s; answer with approve false", req.From, req.ToolName, why)
			}
		}
		a.Recipient = req.From
	default:
		return "", fmt.Errorf("type %q is sent by the runtime, not with SendMessage", typ)
	}
	if a.Recipient == "" {
		return "", fmt.Errorf("a %s needs a recipient", typ)
	}
	msg.To = a.Recipient
	sent, err := b.sendAsIn(ctx, t, msg)
	if err != nil {
		return "", err
	}
	switch typ {
	case store.TypeShutdownRequest:
		b.sess.mu.Lock()
		b.sess.awaiting[sent.RequestID] = sent.To
		b.sess.mu.Unlock()
		return fmt.Sprintf("Shutdown request %s sent to %s; its answer will reach you as a shutdown_response.", sent.RequestID, sent.To), nil
	case store.TypePlanApprovalRequest:
		b.member.mu.Lock()
		b.member.planPending = sent.RequestID
		b.member.mu.Unlock()
		b.journal(ctx, t, "protocol", map[string]any{"kind": "plan_approval_request", "request_id": sent.RequestID, "member": b.self})
		return fmt.Sprintf("Plan sent to %s for approval (request %s). End your turn; the answer will wake you.", sent.To, sent.RequestID), nil
	case store.TypeShutdownResponse:
		b.journal(ctx, t, "protocol", map[string]any{"kind": "shutdown", "request_id": a.RequestID, "member": b.self, "approve": *a.Approve, "reason": a.Reason})
		if *a.Approve {
			b.member.mu.Lock()
			b.member.stopAfter = true
			b.member.mu.Unlock()
			return "Shutdown approved; you stop now. Any other tool call in this reply is not run.", nil
		}
		return "Shutdown refused; keep working.", nil
	case store.TypePlanApprovalResponse, store.TypePermissionResponse:
		b.sess.answered(a.RequestID)
		b.journal(ctx, t, "protocol", map[string]any{"kind": typ, "request_id": a.RequestID, "member": sent.To, "approve": *a.Approve})
	}
	return fmt.Sprintf("Sent to %s.", sent.To), nil
}

// sendAsIn sends msg (From set) and journals it.
func (b *binding) sendAsIn(ctx context.Context, t store.Team, msg store.Message) (store.Message, error) {
	sent, err := t.Mailbox().Send(ctx, msg)
	if err != nil {
		return sent, err
	}
	b.journal(ctx, t, "send", sentFields(sent))
	return sent, nil
}

func (s *Session) sendAs(ctx context.Context, t store.Team, msg store.Message) (store.Message, error) {
	sent, err := t.Mailbox().Send(ctx, msg)
	if err != nil {
		return sent, err
	}
	s.journal(ctx, t, "send", sentFields(sent))
	return sent, nil
}

// request returns a pending protocol request addressed to the lead. A
// request the lead has not fetched yet (still in its inbox) counts too.
func (s *Session) request(id string) (store.Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.requests[id]
	return m, ok
}

func (s *Session) answered(id string) {
	s.mu.Lock()
	delete(s.requests, id)
	delete(s.toHuman, id)
	s.mu.Unlock()
}

// --- TaskCreate ---

type taskCreateArgs struct {
	Subject     string   `json:"subject" required:"true" desc:"A short imperative title."`
	Description string   `json:"description" desc:"What done means, in enough detail for a teammate."`
	ActiveForm  string   `json:"activeForm" desc:"The title in the present continuous, shown while the task is in progress."`
	Role        string   `json:"role" desc:"Reserve the task for teammates with this role (or name)."`
	BlockedBy   []string `json:"blockedBy" desc:"Ids of tasks that must be completed first."`
}

type taskCreateTool struct{ b *binding }

var taskCreateSpec = tool.NewSpec[taskCreateArgs]("TaskCreate", "Add a task to the team's shared board. It starts pending; idle teammates claim pending, unblocked tasks by themselves.")

func (taskCreateTool) Spec() llm.ToolSpec { return taskCreateSpec }
func (taskCreateTool) ReadOnly() bool     { return false }
func (taskCreateTool) Kind() kind.Kind    { return kind.Manage }
func (t taskCreateTool) Run(ctx context.Context, env *tool.Env, input json.RawMessage) tool.Result {
	args, res, ok := tool.DecodeArgs[taskCreateArgs]("TaskCreate", input)
	if !ok {
		return res
	}
	team, err := t.b.team()
	if err != nil {
		return tool.Errorf("TaskCreate: %v", err)
	}
	task := store.Task{Subject: args.Subject, Description: args.Description, ActiveForm: args.ActiveForm, BlockedBy: args.BlockedBy}
	if r := strings.TrimSpace(args.Role); r != "" {
		task.Metadata = map[string]any{"role": r}
	}
	got, err := team.Tasks().Create(ctx, task)
	if err != nil {
		return tool.Errorf("TaskCreate: %v", err)
	}
	if h := t.b.rules.hooks(); h.Has("TaskCreated") {
		out := h.TaskCreated(ctx, t.b.who, hookTask(got))
		if out.Blocked {
			_, _ = team.Tasks().Update(ctx, got.ID, func(x *store.Task) error { x.Status = store.TaskDeleted; return nil })
			return tool.Errorf("TaskCreate: a TaskCreated hook refused the task: %s", out.Reason)
		}
	}
	t.b.journal(ctx, team, "task_create", map[string]any{"task": got.ID, "subject": got.Subject, "blocked_by": got.BlockedBy})
	return tool.OK(fmt.Sprintf("Created task #%s: %s", got.ID, got.Subject))
}

// --- TaskUpdate ---

type taskUpdateArgs struct {
	TaskID       string   `json:"taskId" required:"true" desc:"The task's id."`
	Status       string   `json:"status" enum:"pending|in_progress|completed|deleted" desc:"The new status."`
	Owner        *string  `json:"owner" desc:"The new owner (a member name; empty to unassign). Assigning tells that member."`
	Subject      string   `json:"subject" desc:"A new title."`
	Description  string   `json:"description" desc:"A new description."`
	ActiveForm   string   `json:"activeForm" desc:"A new present-continuous title."`
	AddBlocks    []string `json:"addBlocks" desc:"Ids of tasks that must wait for this one."`
	AddBlockedBy []string `json:"addBlockedBy" desc:"Ids of tasks this one must wait for."`
}

type taskUpdateTool struct{ b *binding }

var taskUpdateSpec = tool.NewSpec[taskUpdateArgs]("TaskUpdate", "Change a task: status, owner, subject, description, or its dependencies. Completing a task unblocks the tasks that wait for it.")

func (taskUpdateTool) Spec() llm.ToolSpec { return taskUpdateSpec }
func (taskUpdateTool) ReadOnly() bool     { return false }
func (taskUpdateTool) Kind() kind.Kind    { return kind.Manage }
func (t taskUpdateTool) Run(ctx context.Context, env *tool.Env, input json.RawMessage) tool.Result {
	args, res, ok := tool.DecodeArgs[taskUpdateArgs]("TaskUpdate", input)
	if !ok {
		return res
	}
	team, err := t.b.team()
	if err != nil {
		return tool.Errorf("TaskUpdate: %v", err)
	}
	id := strings.TrimPrefix(strings.TrimSpace(args.TaskID), "#")
	var owner string
	if args.Owner != nil {
		if *args.Owner == "" {
			owner = ""
		} else {
			r, err := team.ReadRoster(ctx)
			if err != nil {
				return tool.Errorf("TaskUpdate: %v", err)
			}
			if owner, err = store.ResolveRecipient(&r, *args.Owner); err != nil {
				return tool.Errorf("TaskUpdate: owner: %v", err)
			}
		}
	}
	if args.Status == store.TaskCompleted {
		if h := t.b.rules.hooks(); h.Has("TaskCompleted") {
			cur, err := team.Tasks().Get(ctx, id)
			if err != nil {
				return tool.Errorf("TaskUpdate: %v", err)
			}
			if cur.Status != store.TaskCompleted {
				cur.Status = store.TaskCompleted
				if out := h.TaskCompleted(ctx, t.b.who, hookTask(cur)); out.Blocked {
					return tool.Errorf("TaskUpdate: task #%s not completed: a TaskCompleted hook says: %s", id, out.Reason)
				}
			}
		}
	}
	var before store.Task
	got, err := team.Tasks().Update(ctx, id, func(task *store.Task) error {
		before = *task
		if args.Status != "" {
			task.Status = args.Status
		}
		if args.Owner != nil {
			task.Owner = owner
		}
		if args.Subject != "" {
			task.Subject = args.Subject
		}
		if args.Description != "" {
			task.Description = args.Description
		}
		if args.ActiveForm != "" {
			task.ActiveForm = args.ActiveForm
		}
		task.Blocks = appendNew(task.Blocks, args.AddBlocks)
		task.BlockedBy = appendNew(task.BlockedBy, args.AddBlockedBy)
		if !t.b.lead && before.Owner == t.b.self && task.Owner == "" && task.Status == store.TaskPending {
			// A teammate gave its task back: it will not claim it again by
			// itself, or it would take it straight back.
			markHandedBack(task, t.b.self)
		}
		return nil
	})
	if err != nil {
		return tool.Errorf("TaskUpdate: %v", err)
	}
	f := map[string]any{"task": got.ID, "status": got.Status, "owner": got.Owner}
	if len(args.AddBlockedBy) > 0 {
		f["add_blocked_by"] = args.AddBlockedBy
	}
	if len(args.AddBlocks) > 0 {
		f["add_blocks"] = args.AddBlocks
	}
	typ := "task_update"
	if got.Status == store.TaskCompleted && before.Status != store.TaskCompleted {
		typ = "complete"
	}
	t.b.journal(ctx, team, typ, f)
	if args.Owner != nil && got.Owner != "" && got.Owner != before.Owner && got.Owner != t.b.self {
		if _, err := t.b.sendAsIn(ctx, team, store.Message{Type: store.TypeTaskAssignment, From: t.b.self, To: got.Owner, TaskID: got.ID,
			Content: taskText(got, "You were assigned"), Summary: "task #" + got.ID + " assigned"}); err != nil {
			return tool.Errorf("TaskUpdate: task #%s updated but telling %s failed: %v", got.ID, got.Owner, err)
		}
	}
	if got.Status == store.TaskDeleted {
		return tool.OK(fmt.Sprintf("Deleted task #%s.", got.ID))
	}
	return tool.OK("Updated " + taskLine(got))
}

func hookTask(t store.Task) hook.Task {
	return hook.Task{ID: t.ID, Subject: t.Subject, Description: t.Description, Owner: t.Owner, Status: t.Status}
}

func appendNew(have, add []string) []string {
	for _, a := range add {
		a = strings.TrimPrefix(strings.TrimSpace(a), "#")
		dup := false
		for _, h := range have {
			if h == a {
				dup = true
				break
			}
		}
		if !dup && a != "" {
			have = append(have, a)
		}
	}
	return have
}

func taskLine(t store.Task) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%s [%s] %s", t.ID, t.Status, t.Subject)
	if t.Owner != "" {
		fmt.Fprintf(&b, " (owner: %s)", t.Owner)
	}
	if r, _ := t.Metadata["role"].(string); r != "" {
		fmt.Fprintf(&b, " (role: %s)", r)
	}
	if len(t.BlockedBy) > 0 {
		fmt.Fprintf(&b, " (blocked by: #%s)", strings.Join(t.BlockedBy, ", #"))
	}
	return b.String()
}

// --- TaskList / TaskGet ---

type taskListArgs struct{}

type taskListTool struct{ b *binding }

var taskListSpec = tool.NewSpec[taskListArgs]("TaskList", "Show the team's task board: every task with its status, owner and what blocks it.")

func (taskListTool) Spec() llm.ToolSpec { return taskListSpec }
func (taskListTool) ReadOnly() bool     { return true }
func (taskListTool) Kind() kind.Kind    { return kind.Manage }
func (t taskListTool) Run(ctx context.Context, env *tool.Env, input json.RawMessage) tool.Result {
	team, err := t.b.team()
	if err != nil {
		return tool.Errorf("TaskList: %v", err)
	}
	board, err := team.Tasks().Board(ctx)
	if err != nil {
		return tool.Errorf("TaskList: %v", err)
	}
	lines := boardLines(board)
	if len(lines) == 0 {
		return tool.OK("The board is empty.")
	}
	return tool.OK(strings.Join(lines, "\n"))
}

type taskGetArgs struct {
	TaskID string `json:"taskId" required:"true" desc:"The task's id."`
}

type taskGetTool struct{ b *binding }

var taskGetSpec = tool.NewSpec[taskGetArgs]("TaskGet", "Show one task in full.")

func (taskGetTool) Spec() llm.ToolSpec { return taskGetSpec }
func (taskGetTool) ReadOnly() bool     { return true }
func (taskGetTool) Kind() kind.Kind    { return kind.Manage }
func (t taskGetTool) Run(ctx context.Context, env *tool.Env, input json.RawMessage) tool.Result {
	args, res, ok := tool.DecodeArgs[taskGetArgs]("TaskGet", input)
	if !ok {
		return res
	}
	team, err := t.b.team()
	if err != nil {
		return tool.Errorf("TaskGet: %v", err)
	}
	task, err := team.Tasks().Get(ctx, strings.TrimPrefix(strings.TrimSpace(args.TaskID), "#"))
	if err != nil {
		return tool.Errorf("TaskGet: %v", err)
	}
	b, _ := json.MarshalIndent(task, "", "  ")
	return tool.OK(string(b))
}
