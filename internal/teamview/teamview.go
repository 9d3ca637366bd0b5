// Package teamview is a UI-neutral model of a team as its people watch it:
// the roster with each member's status, model, current task, tokens and
// cost; the board with dependencies and owners; a timeline of messages,
// protocol steps and journal events; each member's transcript; usage over
// time; and the requests waiting for a human.
//
// A View is changed only by Apply, from typed inputs: decoded journal
// events (teamevent.Envelope), agent events, delivered messages, the
// driver's turn and team-state reports, and snapshots of the store. It is
// read through snapshots (Roster, Board, Timeline, Transcript, Usage,
// Pending) that are copies, so a terminal UI or a web dashboard renders
// them without holding anything of the View. Load builds a View from a
// store, so a dashboard that opens late sees what a live one saw.
//
// It must never depend on the team wing, a UI or the CLI: it imports only
// store, teamevent, agent, llm, usage and text.
package teamview

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/text"
	"github.com/troupe-dev/troupe/internal/usage"
)

// Statuses a roster row can show besides the store's (working, idle,
// shutdown).
const (
	StatusStarting = "starting" // seen, not yet reported working
	StatusWaiting  = "waiting"  // waiting for an answer (a permission, a plan)
	StatusDead     = "dead"     // neither running nor shut down
	StatusStopped  = "stopped"  // its loop ended without a shutdown
)

// Default bounds of what a View keeps in memory.
const (
	DefaultMaxTimeline   = 5000
	DefaultMaxTranscript = 5000
	DefaultMaxUsage      = 10000
)

// Options configure a View.
type Options struct {
	// Prices price the usage; nil leaves costs at 0.
	Prices usage.Prices
	// Driverless: no driver reports the lead's turns nor hands it its
	// messages (the demo, a headless run watched from outside). The lead's
	// turns are inferred from its agent events, and the messages sent to
	// it are taken from the journal.
	Driverless bool
	// Bounds; zero means the default.
	MaxTimeline, MaxTranscript, MaxUsage int
}

// Inputs Apply accepts besides teamevent.Envelope and agent.Event.
type (
	// Delivered: messages were handed to an agent's model; At is "idle"
	// (they woke it) or "tool_boundary" (they arrived mid-turn). A message
	// with an ID is shown once however often it is reported.
	Delivered struct {
		Agent    string
		Messages []store.Message
		At       string
	}
	// TurnStart: the driver started a turn of the lead (Why it woke).
	TurnStart struct{ Why string }
	// TurnEnd: the lead's turn ended; Err is why it failed, if it did.
	TurnEnd struct {
		Err         error
		Interrupted bool
	}
	// TeamState is the driver's word on the team: "done", "stalled: …",
	// "waiting for …", or "" when it is busy again.
	TeamState struct{ Text string }
	// Warning is something the human should review (a settings file
	// changed during the run); it goes in the lead's transcript.
	Warning struct{ Text string }
	// Prompt is what the human told the lead.
	Prompt struct{ Text string }
	// Request is a permission or plan approval request put to the human.
	Request store.Message
	// Answered: the human answered a request (from this UI or another).
	Answered struct{ RequestID string }
	// Snapshot is the team as the store has it; it replaces what events
	// told of the roster and the board.
	Snapshot struct {
		Roster *store.Roster // nil: no team yet (the snapshot is ignored)
		Tasks  []store.Task
		// Corrupt are the tasks whose files cannot be read.
		Corrupt []store.Corrupt
		// Running names the teammates whose runtime is up; a member that
		// is neither shut down nor running is dead. Nil: unknown.
		Running map[string]bool
		// Presence is where each member's inbox is read, from a store
		// shared by several machines (store.PresenceReporter); nil
		// otherwise.
		Presence []store.Presence
	}
)

// View is the model of one team. It is not safe for concurrent use: one
// goroutine applies and reads (a server wraps it in a mutex).
type View struct {
	opts     Options
	team     string
	state    string // TeamState
	members  map[string]*member
	order    []string
	tasks    map[string]*store.Task
	corrupt  []store.Corrupt
	timeline []Entry
	usage    []UsagePoint
	pending  []Pending
	answered map[string]bool // request ids answered before they were seen
	shown    map[string]bool // agent and message id already in a transcript
	seq      int
}

// member is the mutable state behind a roster row and a transcript.
type member struct {
	row    Member
	items  []Item
	stream int // index in items of the text being streamed, -1 if none
	// usageFrom is where the member's usage is counted from: the first
	// source seen ("agent" or "journal"), so that a call reported by both
	// is counted once.
	usageFrom string
}

// New returns an empty View with the lead on its roster.
func New(opts Options) *View {
	if opts.MaxTimeline <= 0 {
		opts.MaxTimeline = DefaultMaxTimeline
	}
	if opts.MaxTranscript <= 0 {
		opts.MaxTranscript = DefaultMaxTranscript
	}
	if opts.MaxUsage <= 0 {
		opts.MaxUsage = DefaultMaxUsage
	}
	v := &View{opts: opts, members: map[string]*member{}, tasks: map[string]*store.Task{},
		answered: map[string]bool{}, shown: map[string]bool{}}
	v.member(store.LeadName).row.Status = store.StatusIdle
	return v
}

func (v *View) member(name string) *member {
	m, ok := v.members[name]
	if !ok {
		m = &member{row: Member{Name: name, Status: StatusStarting}, stream: -1}
		v.members[name] = m
		v.order = append(v.order, name)
	}
	return m
}

// Apply folds one input into the view. now is the time of inputs that
// carry none (agent events, driver reports). Inputs of other types are
// ignored; it reports whether the input was one it knows.
func (v *View) Apply(now time.Time, in any) bool {
	switch in := in.(type) {
	case teamevent.Envelope:
		v.journal(in)
	case *teamevent.Envelope:
		v.journal(*in)
	case agent.Event:
		v.agentEvent(in, now)
	case Delivered:
		v.delivered(in, now)
	case TurnStart:
		v.setTurn(true, now)
	case TurnEnd:
		v.setTurn(false, now)
		if in.Err != nil && !in.Interrupted {
			v.add(store.LeadName, Item{Kind: ItemError, Text: "the lead's turn failed: " + in.Err.Error()}, now)
		}
	case TeamState:
		v.state = in.Text
	case Warning:
		v.add(store.LeadName, Item{Kind: ItemError, Text: in.Text}, now)
	case Prompt:
		v.add(store.LeadName, Item{Kind: ItemHuman, Who: store.HumanName, Text: in.Text}, now)
	case Request:
		v.request(store.Message(in), now)
	case Answered:
		v.answer(in.RequestID)
	case Snapshot:
		v.snapshot(in)
	default:
		return false
	}
	return true
}

// setTurn marks the lead in a turn or not.
func (v *View) setTurn(busy bool, now time.Time) {
	lead := v.member(store.LeadName)
	r := &lead.row
	if busy == r.InTurn {
		return
	}
	r.InTurn = busy
	if busy {
		r.TurnSince, r.DoingSince, r.Doing = now, now, "thinking"
		r.Status = store.StatusWorking
		return
	}
	r.Doing, r.Tool, r.Status = "", "", store.StatusIdle
	lead.stream = -1
}

// add appends an item to a member's transcript; anything but streamed
// text ends the text being streamed.
func (v *View) add(name string, it Item, at time.Time) {
	m := v.member(name)
	v.seq++
	it.Seq, it.At = v.seq, at
	m.items = append(m.items, it)
	m.stream = -1
	if over := len(m.items) - v.opts.MaxTranscript; over > 0 {
		m.items = append([]Item(nil), m.items[over:]...)
	}
}

func (v *View) agentEvent(ev agent.Event, now time.Time) {
	m := v.member(ev.Agent)
	r := &m.row
	if ev.Agent == store.LeadName && v.opts.Driverless && !r.InTurn {
		v.setTurn(true, now)
	}
	if r.Status == StatusStarting {
		r.Status = store.StatusWorking
	}
	switch ev.Type {
	case agent.EventUsage:
		if ev.Usage == nil {
			return
		}
		u := ev.Usage
		kind := teamevent.UsageWork
		if ev.Agent == store.LeadName {
			kind = teamevent.UsageCoordination
		}
		v.countUsage(m, "agent", now, teamevent.Usage{AgentName: ev.Agent, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens, Model: ev.Model, Kind: kind})
	case agent.EventToolCall:
		if ev.Call == nil {
			return
		}
		r.Tool = ev.Call.Name
		r.Doing, r.DoingSince = "⚙ "+ev.Call.Name, now
		v.add(ev.Agent, Item{Kind: ItemTool, Tool: ev.Call.Name, Input: ev.Call.Input, Text: ToolLine(ev.Call.Name, ev.Call.Input)}, now)
	case agent.EventToolResult:
		r.Tool = ""
		r.Doing, r.DoingSince = "thinking", now
		if ev.Result != nil && ev.Result.IsError {
			name := ""
			if ev.Call != nil {
				name = ev.Call.Name
			}
			v.add(ev.Agent, Item{Kind: ItemToolError, Tool: name, Text: name + ": " + text.OneLine(ev.Result.Content, 300)}, now)
		}
	case agent.EventText:
		if m.stream < 0 || m.stream >= len(m.items) {
			v.add(ev.Agent, Item{Kind: ItemText}, now)
			m.stream = len(m.items) - 1
		}
		m.items[m.stream].Text += ev.Text
		if r.Doing != "writing" {
			r.Doing, r.DoingSince = "writing", now
		}
	case agent.EventMessage:
		if ev.Message == nil {
			return
		}
		// The complete message replaces what was streamed of it.
		if t := ev.Message.Text(); t != "" {
			if m.stream >= 0 && m.stream < len(m.items) {
				m.items[m.stream].Text = t
			} else {
				v.add(ev.Agent, Item{Kind: ItemText, Text: t}, now)
			}
		}
		m.stream = -1
		if ev.Agent == store.LeadName && v.opts.Driverless && len(ev.Message.ToolUses()) == 0 {
			v.setTurn(false, now)
		}
	case agent.EventRetry:
		r.Doing, r.DoingSince = "retrying", now
	}
}

// countUsage adds one model call to a member's figures and the series.
func (v *View) countUsage(m *member, from string, at time.Time, u teamevent.Usage) {
	if m.usageFrom == "" {
		m.usageFrom = from
	}
	if m.usageFrom != from {
		return
	}
	r := &m.row
	n := u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
	cost := 0.0
	if v.opts.Prices != nil {
		if p, ok := v.opts.Prices.Lookup(u.Model); ok {
			cost = p.Cost(usage.Tokens{Input: u.InputTokens, Output: u.OutputTokens, CacheRead: u.CacheReadTokens, CacheWrite: u.CacheWriteTokens})
		}
	}
	r.Tokens += n
	r.CostUSD += cost
	r.InputTokens += u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens
	r.CacheReadTokens += u.CacheReadTokens
	if r.Model == "" && u.Model != "" {
		r.Model = u.Model
	}
	v.usage = append(v.usage, UsagePoint{At: at, Member: r.Name, Kind: u.Kind, Task: u.Task, Tokens: n, CostUSD: cost,
		TotalTokens: r.Tokens, TotalCostUSD: r.CostUSD})
	if over := len(v.usage) - v.opts.MaxUsage; over > 0 {
		v.usage = append([]UsagePoint(nil), v.usage[over:]...)
	}
}

// delivered puts messages handed to an agent in its transcript, verbatim
// (seed 004), once each.
func (v *View) delivered(d Delivered, now time.Time) {
	for _, msg := range d.Messages {
		if msg.ID != "" {
			if v.shown[d.Agent+"\x00"+msg.ID] {
				continue
			}
			v.shown[d.Agent+"\x00"+msg.ID] = true
		}
		switch msg.Type {
		case store.TypeIdleNotification, store.TypePermissionRequest, store.TypePlanApprovalRequest:
			if d.Agent == store.LeadName {
				continue // the roster and the pending requests show these
			}
		}
		body := msg.Content
		if msg.Feedback != "" {
			body += "\nFeedback: " + msg.Feedback
		}
		who := msg.From
		if msg.Type != store.TypeMessage {
			who += " [" + msg.Type + "]"
		}
		v.add(d.Agent, Item{Kind: ItemMessage, Who: who, Text: body, Message: msg.ID}, now)
	}
}

func (v *View) request(msg store.Message, now time.Time) {
	if msg.RequestID != "" && v.answered[msg.RequestID] {
		return
	}
	kind := teamevent.ProtocolPermission
	if msg.Type == store.TypePlanApprovalRequest {
		kind = teamevent.ProtocolPlanRequest
	}
	found := false
	for i := range v.pending {
		if msg.RequestID != "" && v.pending[i].ID == msg.RequestID {
			v.pending[i].Human, v.pending[i].Message = true, msg
			found = true
		}
	}
	if !found {
		at := msg.Timestamp
		if at.IsZero() {
			at = now
		}
		id := msg.RequestID
		if id == "" {
			// Still answerable by Answered{ID} (Message keeps the empty id).
			id = fmt.Sprintf("local-%d", v.seq+1)
		}
		v.pending = append(v.pending, Pending{ID: id, Kind: kind, From: msg.From, Tool: msg.ToolName, Since: at, Human: true, Message: msg})
	}
	v.add(store.LeadName, Item{Kind: ItemRequest, Who: msg.From, Text: RequestText(msg)}, now)
}

// answer drops a request from the pending ones; one answered before it was
// seen is never shown.
func (v *View) answer(id string) {
	if id == "" {
		return
	}
	v.answered[id] = true
	out := v.pending[:0]
	for _, p := range v.pending {
		if p.ID != id {
			out = append(out, p)
		}
	}
	v.pending = out
}

func (v *View) task(id string) *store.Task {
	t, ok := v.tasks[id]
	if !ok {
		t = &store.Task{ID: id, Status: store.TaskPending}
		v.tasks[id] = t
	}
	return t
}

// unblock removes a finished task from every other task's blocked_by (and
// a deleted one from their blocks too), as the board does.
func (v *View) unblock(id string, deleted bool) {
	for _, t := range v.tasks {
		t.BlockedBy = remove(t.BlockedBy, id)
		if deleted {
			t.Blocks = remove(t.Blocks, id)
		}
	}
}

func (v *View) snapshot(sn Snapshot) {
	if sn.Roster == nil {
		return
	}
	v.team = sn.Roster.Name
	for _, rm := range sn.Roster.Members {
		m := v.member(rm.Name)
		r := &m.row
		r.Role, r.Status = rm.Role, rm.Status
		if rm.Model != "" {
			r.Model = rm.Model
		}
		r.Worktree = rm.Worktree
		for _, p := range sn.Presence {
			if p.Member == rm.Name {
				r.Host = p.Where()
			}
		}
		if sn.Running != nil && rm.Status != store.StatusShutdown && !sn.Running[rm.Name] {
			r.Status = StatusDead
		}
	}
	v.corrupt = append([]store.Corrupt(nil), sn.Corrupt...)
	v.tasks = map[string]*store.Task{}
	for _, t := range sn.Tasks {
		t := cloneTask(t)
		v.tasks[t.ID] = &t
	}
}

// ToolLine summarises a tool call in a few words: its name and its telling
// argument.
func ToolLine(name string, input json.RawMessage) string {
	if arg := ToolArg(input); arg != "" {
		return name + " " + arg
	}
	return name
}

// ToolArg is the telling argument of a tool call, if any.
func ToolArg(input json.RawMessage) string {
	var in map[string]any
	_ = json.Unmarshal(input, &in)
	for _, k := range []string{"command", "path", "pattern", "name", "team_name", "subject", "recipient", "taskId", "description"} {
		if val, ok := in[k]; ok {
			s := fmt.Sprint(val)
			if k == "recipient" {
				s = "→ " + s
			}
			if k == "taskId" {
				s = "#" + s
			}
			return text.OneLine(s, 120)
		}
	}
	return ""
}

// RequestText is what a request asks, in a line or a few.
func RequestText(r store.Message) string {
	switch r.Type {
	case store.TypePlanApprovalRequest:
		return "asks you to approve a plan:\n" + trimSpace(r.Content)
	case store.TypePermissionRequest:
		if arg := ToolArg(r.ToolInput); arg != "" {
			return fmt.Sprintf("asks to run %s: %s", r.ToolName, arg)
		}
		return "asks to run " + r.ToolName
	}
	return r.Content
}

func sortTasks(ts []store.Task) {
	sort.SliceStable(ts, func(i, j int) bool {
		a, b := store.TaskNum(ts[i].ID), store.TaskNum(ts[j].ID)
		if a != b {
			return a < b
		}
		return ts[i].ID < ts[j].ID
	})
}
