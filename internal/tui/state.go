package tui

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/text"
)

// entryKind is the kind of a line of the conversation.
type entryKind int

const (
	entryUser     entryKind = iota // the human to the lead
	entryToMember                  // the human to a member (@name)
	entryLead                      // the lead's text (markdown)
	entryTool                      // a tool the lead ran
	entryToolErr                   // a tool of the lead that failed
	entryFromTeam                  // a member's message to the lead, verbatim
	entryRequest                   // a request for the human
	entryNote                      // the UI's own remarks
	entryError                     // something failed
)

// entry is one item of the conversation.
type entry struct {
	kind entryKind
	who  string // sender or recipient
	text string
	// rendered caches the markdown of a lead entry for a width.
	rendered      string
	renderedWidth int
	renderedLen   int
}

// member is one row of the side panel.
type member struct {
	name     string
	role     string
	status   string // working, idle, waiting, shutdown, dead, starting
	activity string // the tool running now
	tokens   int64
}

// event is one line of the timeline.
type event struct {
	at   time.Time
	who  string
	text string
}

// maxTimeline bounds the timeline kept in memory.
const maxTimeline = 500

// state is everything the views show; the Model wraps it with widgets.
type state struct {
	entries  []entry
	stream   int // index of the lead's entry being streamed, -1 if none
	members  map[string]*member
	order    []string // members in order of arrival, the lead first
	tasks    map[string]*store.Task
	corrupt  []store.Corrupt // board entries that cannot be read
	timeline []event
	teamName string
	teamNote string // "done", "stalled: …" from the driver

	busy      bool // the lead is in a turn
	busySince time.Time
	activity  string // what the lead does now
	actSince  time.Time

	requests []store.Message // waiting for the human, first shown
	finished *FinishedMsg
	demo     bool
}

func newState() state {
	s := state{stream: -1, members: map[string]*member{}, tasks: map[string]*store.Task{}}
	s.member(store.LeadName).status = store.StatusIdle
	return s
}

func (s *state) member(name string) *member {
	m, ok := s.members[name]
	if !ok {
		m = &member{name: name, status: "starting"}
		s.members[name] = m
		s.order = append(s.order, name)
	}
	return m
}

func (s *state) add(e entry) {
	s.entries = append(s.entries, e)
}

func (s *state) note(format string, args ...any) {
	s.add(entry{kind: entryNote, text: fmt.Sprintf(format, args...)})
}

func (s *state) addTimeline(at time.Time, who, text string) {
	s.timeline = append(s.timeline, event{at: at, who: who, text: text})
	if len(s.timeline) > maxTimeline {
		s.timeline = s.timeline[len(s.timeline)-maxTimeline:]
	}
}

// setBusy marks the lead in a turn or not.
func (s *state) setBusy(busy bool, now time.Time) {
	if busy == s.busy {
		return
	}
	s.busy = busy
	lead := s.member(store.LeadName)
	if busy {
		s.busySince, s.actSince, s.activity = now, now, "thinking"
		lead.status = store.StatusWorking
	} else {
		s.activity, s.stream = "", -1
		lead.status, lead.activity = store.StatusIdle, ""
	}
}

// agentEvent folds an agent's event into the state.
func (s *state) agentEvent(ev agent.Event, now time.Time) {
	m := s.member(ev.Agent)
	if ev.Agent == store.LeadName && s.demo && !s.busy {
		// The demo's lead has no driver to say when its turns start.
		s.setBusy(true, now)
	}
	if m.status == "starting" {
		m.status = store.StatusWorking
	}
	switch ev.Type {
	case agent.EventUsage:
		if ev.Usage != nil {
			u := *ev.Usage
			m.tokens += u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
		}
	case agent.EventToolCall:
		m.activity = ev.Call.Name
		if ev.Agent == store.LeadName {
			s.activity, s.actSince = "⚙ "+ev.Call.Name, now
			s.stream = -1
			s.add(entry{kind: entryTool, text: toolLine(ev.Call.Name, ev.Call.Input)})
		}
	case agent.EventToolResult:
		m.activity = ""
		if ev.Agent == store.LeadName {
			s.activity, s.actSince = "thinking", now
			if ev.Result != nil && ev.Result.IsError {
				s.add(entry{kind: entryToolErr, text: ev.Call.Name + ": " + text.OneLine(ev.Result.Content, 300)})
			}
		}
	case agent.EventText:
		if ev.Agent != store.LeadName {
			return
		}
		if s.stream < 0 || s.stream >= len(s.entries) {
			s.add(entry{kind: entryLead})
			s.stream = len(s.entries) - 1
		}
		s.entries[s.stream].text += ev.Text
		if s.activity != "writing" {
			s.activity, s.actSince = "writing", now
		}
	case agent.EventMessage:
		if ev.Agent != store.LeadName || ev.Message == nil {
			return
		}
		// The complete message replaces what was streamed of it.
		if text := ev.Message.Text(); text != "" {
			if s.stream >= 0 && s.stream < len(s.entries) {
				s.entries[s.stream].text = text
			} else {
				s.add(entry{kind: entryLead, text: text})
			}
		}
		s.stream = -1
		if s.demo && len(ev.Message.ToolUses()) == 0 {
			s.setBusy(false, now)
		}
	case agent.EventRetry:
		if ev.Agent == store.LeadName {
			s.activity, s.actSince = "retrying", now
		}
	}
}

// fromTeam shows messages that reached the lead, verbatim (seed 004).
func (s *state) fromTeam(msgs []store.Message) {
	for _, m := range msgs {
		switch m.Type {
		case store.TypeIdleNotification, store.TypePermissionRequest, store.TypePlanApprovalRequest:
			continue // the side panel and the prompt show these
		}
		text := m.Content
		if m.Feedback != "" {
			text += "\nFeedback: " + m.Feedback
		}
		who := m.From
		if m.Type != store.TypeMessage {
			who += " [" + m.Type + "]"
		}
		s.add(entry{kind: entryFromTeam, who: who, text: text})
	}
	s.stream = -1
}

// teamEvent folds a journal event into the state.
func (s *state) teamEvent(e store.Event) {
	f := e.Field
	if e.Team != "" {
		s.teamName = e.Team
	}
	switch e.Type {
	case "team_create":
		s.addTimeline(e.TS, e.Agent, "creates team "+e.Team)
	case "team_delete":
		s.addTimeline(e.TS, e.Agent, "deletes team "+e.Team)
	case "spawn":
		m := s.member(f("member"))
		m.role = f("role")
		what := "spawns " + m.name
		if m.role != "" {
			what += " (" + m.role + ")"
		}
		s.addTimeline(e.TS, e.Agent, what)
	case "status":
		m := s.member(f("member"))
		m.status = f("status")
		if m.status == store.StatusShutdown {
			m.activity = ""
			s.addTimeline(e.TS, m.name, "has shut down")
		}
	case "task_create":
		id := f("task")
		t := &store.Task{ID: id, Subject: f("subject"), Status: store.TaskPending}
		if deps, ok := e.Fields["blocked_by"].([]string); ok {
			t.BlockedBy = append([]string(nil), deps...)
		}
		s.tasks[id] = t
		s.addTimeline(e.TS, e.Agent, fmt.Sprintf("adds task #%s: %s", id, t.Subject))
	case "task_update", "complete":
		t := s.task(f("task"))
		if st := f("status"); st != "" {
			t.Status = st
		}
		if _, ok := e.Fields["owner"]; ok {
			t.Owner = f("owner")
		}
		if deps, ok := e.Fields["add_blocked_by"].([]string); ok {
			for _, d := range deps {
				if !contains(t.BlockedBy, d) {
					t.BlockedBy = append(t.BlockedBy, d)
				}
			}
		}
		if t.Status == store.TaskCompleted || t.Status == store.TaskDeleted {
			s.unblock(t.ID)
		}
		if e.Type == "complete" {
			s.addTimeline(e.TS, e.Agent, fmt.Sprintf("completes task #%s", t.ID))
		}
		if t.Status == store.TaskDeleted {
			delete(s.tasks, t.ID)
		}
	case "claim":
		t := s.task(f("task"))
		t.Owner, t.Status = f("owner"), store.TaskInProgress
		if sub := f("subject"); sub != "" {
			t.Subject = sub
		}
		s.addTimeline(e.TS, t.Owner, fmt.Sprintf("claims task #%s: %s", t.ID, t.Subject))
	case "send":
		s.sendEvent(e, f)
	case "permission":
		verdict := "denied"
		if e.Fields["approve"] == true {
			verdict = "allowed"
		}
		s.addTimeline(e.TS, f("member"), fmt.Sprintf("%s was %s", f("tool"), verdict))
	}
}

func (s *state) sendEvent(e store.Event, f func(string) string) {
	typ, to, text := f("msg_type"), f("to"), f("content")
	switch typ {
	case store.TypeIdleNotification:
		return
	case store.TypeMessage, store.TypeBroadcast:
		s.addTimeline(e.TS, e.Agent, fmt.Sprintf("→ %s: %s", to, text))
	case store.TypePlanApprovalResponse:
		verdict := "rejects"
		if e.Fields["approve"] == true {
			verdict = "approves"
		}
		if fb := f("feedback"); fb != "" {
			text = fb
		}
		s.addTimeline(e.TS, e.Agent, fmt.Sprintf("%s %s's plan: %s", verdict, to, text))
	default:
		s.addTimeline(e.TS, e.Agent, fmt.Sprintf("→ %s [%s] %s", to, typ, text))
	}
	if s.demo && to == store.LeadName && (typ == store.TypeMessage || typ == store.TypeBroadcast || typ == store.TypePlanApprovalRequest) {
		// The demo has no driver to hand these over; the journal's copy
		// is what there is.
		s.add(entry{kind: entryFromTeam, who: e.Agent, text: text})
		s.stream = -1
	}
}

func (s *state) task(id string) *store.Task {
	t, ok := s.tasks[id]
	if !ok {
		t = &store.Task{ID: id, Status: store.TaskPending}
		s.tasks[id] = t
	}
	return t
}

// unblock removes a finished task from every other task's blocked_by, as
// the board does.
func (s *state) unblock(id string) {
	for _, t := range s.tasks {
		out := t.BlockedBy[:0]
		for _, d := range t.BlockedBy {
			if d != id {
				out = append(out, d)
			}
		}
		t.BlockedBy = out
	}
}

// snapshot replaces what events told of the roster and the board with what
// the store says.
func (s *state) snapshot(sn Snapshot) {
	if sn.Roster == nil {
		return
	}
	s.teamName = sn.Roster.Name
	for _, rm := range sn.Roster.Members {
		m := s.member(rm.Name)
		m.role, m.status = rm.Role, rm.Status
		if sn.Running != nil && rm.Status != store.StatusShutdown && !sn.Running[rm.Name] {
			m.status = "dead"
		}
	}
	s.corrupt = sn.Corrupt
	s.tasks = map[string]*store.Task{}
	for _, t := range sn.Tasks {
		t := t
		s.tasks[t.ID] = &t
	}
}

// sortedTasks returns the board in id order.
func (s *state) sortedTasks() []*store.Task {
	out := make([]*store.Task, 0, len(s.tasks))
	for _, t := range s.tasks {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return store.TaskNum(out[i].ID) < store.TaskNum(out[j].ID) })
	return out
}

// currentTask is the task member owns and has in progress, if any.
func (s *state) currentTask(name string) *store.Task {
	for _, t := range s.sortedTasks() {
		if t.Owner == name && t.Status == store.TaskInProgress {
			return t
		}
	}
	return nil
}

// counts are the status line's figures.
type counts struct {
	done, total                  int
	working, idle, waiting, gone int
	tokens                       int64
}

func (s *state) counts() counts {
	var c counts
	for _, t := range s.tasks {
		c.total++
		if t.Status == store.TaskCompleted {
			c.done++
		}
	}
	for _, name := range s.order {
		m := s.members[name]
		c.tokens += m.tokens
		switch m.status {
		case store.StatusWorking, "starting":
			c.working++
		case store.StatusIdle:
			c.idle++
		case team.StatusWaiting:
			c.waiting++
		default:
			c.gone++
		}
	}
	return c
}

// toolLine summarises a tool call in a few words.
func toolLine(name string, input json.RawMessage) string {
	if arg := toolArg(input); arg != "" {
		return name + " " + arg
	}
	return name
}

// toolArg is the telling argument of a tool call, if any.
func toolArg(input json.RawMessage) string {
	var in map[string]any
	_ = json.Unmarshal(input, &in)
	for _, k := range []string{"command", "path", "pattern", "name", "team_name", "subject", "recipient", "taskId", "description"} {
		if v, ok := in[k]; ok {
			s := fmt.Sprint(v)
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

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
