package teamview

import (
	"fmt"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/text"
)

// journal folds a decoded journal line into the view.
func (v *View) journal(env teamevent.Envelope) {
	if env.Team != "" {
		v.team = env.Team
	}
	at, who := env.TS, env.Agent
	switch e := env.Event.(type) {
	case teamevent.TeamCreate:
		v.line(at, who, e, "creates team "+env.Team)
	case teamevent.TeamDelete:
		v.line(at, who, e, "deletes team "+env.Team)
	case teamevent.Spawn:
		m := v.member(e.Member)
		m.row.Role, m.row.Mode = e.Role, e.Mode
		if e.Model != "" {
			m.row.Model = e.Model
		}
		what := "spawns " + e.Member
		if e.Role != "" {
			what += " (" + e.Role + ")"
		}
		v.line(at, who, e, what, e.Member)
	case teamevent.Status:
		m := v.member(e.Member)
		m.row.Status = e.Status
		if e.Status == store.StatusShutdown {
			m.row.Tool = ""
			// Idle and working flips are the roster's, not the timeline's.
			v.line(at, e.Member, e, "has shut down")
		}
	case teamevent.Stopped:
		m := v.member(e.Member)
		if m.row.Status != store.StatusShutdown && m.row.Status != StatusDead {
			m.row.Status = StatusStopped
		}
		m.row.Tool = ""
		v.line(at, e.Member, e, withWhy("stopped", e.Why))
	case teamevent.Dead:
		m := v.member(e.Member)
		m.row.Status, m.row.Tool = StatusDead, ""
		for _, id := range e.FreedTasks {
			if t, ok := v.tasks[id]; ok && t.Status != store.TaskCompleted {
				t.Owner, t.Status = "", store.TaskPending
			}
		}
		what := "is dead: no heartbeat"
		if !e.HeartbeatAt.IsZero() {
			what += " since " + e.HeartbeatAt.Local().Format("15:04:05")
		}
		if len(e.FreedTasks) > 0 {
			what += "; task #" + strings.Join(e.FreedTasks, ", #") + " back on the board"
		}
		v.line(at, e.Member, e, what)
	case teamevent.Budget:
		v.line(at, e.Member, e, "reached its budget: "+e.Reached)
	case teamevent.IdleTimeout:
		v.line(at, e.Member, e, "left after idling "+e.After)
	case teamevent.HookTeammateIdle:
		v.line(at, e.Member, e, withWhy("was sent back to work by a TeammateIdle hook", e.Reason))
	case teamevent.Send:
		v.send(env, e)
	case teamevent.Deliver:
		where := "while idle"
		if e.At == "tool_boundary" {
			where = "at a tool boundary"
		}
		v.line(at, e.Member, e, fmt.Sprintf("receives %d message(s) %s", len(e.IDs), where))
	case teamevent.Protocol:
		v.protocol(env, e)
	case teamevent.Permission:
		v.answer(e.RequestID)
		verdict := "denied"
		if e.Approve {
			verdict = "allowed"
		}
		v.line(at, e.Member, e, withWhy(fmt.Sprintf("%s was %s", e.Tool, verdict), e.Why))
	case teamevent.PermissionCheck:
		verdict := "denied"
		if e.Allowed {
			verdict = "allowed"
		}
		v.line(at, e.Member, e, fmt.Sprintf("%s %s by rule %s (%s)", e.Tool, verdict, e.Rule, e.Source))
	case teamevent.TaskCreate:
		t := &store.Task{ID: e.Task, Subject: e.Subject, Status: store.TaskPending, BlockedBy: append([]string(nil), e.BlockedBy...)}
		v.tasks[e.Task] = t
		for _, d := range e.BlockedBy {
			if b, ok := v.tasks[d]; ok && !contains(b.Blocks, e.Task) {
				b.Blocks = append(b.Blocks, e.Task)
			}
		}
		v.line(at, who, e, fmt.Sprintf("adds task #%s: %s", e.Task, e.Subject))
	case teamevent.TaskUpdate:
		v.taskChange(env, e.TaskChange, false)
	case teamevent.TaskComplete:
		v.taskChange(env, e.TaskChange, true)
	case teamevent.Claim:
		t := v.task(e.Task)
		t.Owner, t.Status = e.Owner, store.TaskInProgress
		if e.Subject != "" {
			t.Subject = e.Subject
		}
		v.line(at, e.Owner, e, fmt.Sprintf("claims task #%s: %s", t.ID, t.Subject))
	case teamevent.HandBack:
		if t, ok := v.tasks[e.Task]; ok && t.Status != store.TaskCompleted {
			t.Owner, t.Status = "", store.TaskPending
		}
		v.line(at, e.Member, e, fmt.Sprintf("hands task #%s back to the board", e.Task))
	case teamevent.Resume:
		what := "resumes the team"
		if len(e.Restarted) > 0 {
			what += "; restarted " + strings.Join(e.Restarted, ", ")
		}
		if len(e.RunningElsewhere) > 0 {
			what += "; running elsewhere " + strings.Join(e.RunningElsewhere, ", ")
		}
		if e.PendingRequests > 0 {
			what += fmt.Sprintf("; %d request(s) pending", e.PendingRequests)
		}
		v.line(at, who, e, what)
	case teamevent.Forgery:
		v.line(at, who, e, fmt.Sprintf("refused a message to %s claiming to be from %s: %s", e.Inbox, e.ClaimedFrom, e.Why), e.Inbox, e.ClaimedFrom)
	case teamevent.KeyCreated:
		v.line(at, who, e, withWhy("made a team key", e.Why))
	case teamevent.Usage:
		name := e.AgentName
		if name == "" {
			name = who
		}
		v.countUsage(v.member(name), "journal", at, e)
	case teamevent.Unknown:
		v.line(at, who, e, e.Kind)
	}
}

func (v *View) taskChange(env teamevent.Envelope, c teamevent.TaskChange, complete bool) {
	t := v.task(c.Task)
	if c.Status != "" {
		t.Status = c.Status
	}
	t.Owner = c.Owner
	for _, d := range c.AddBlockedBy {
		if !contains(t.BlockedBy, d) {
			t.BlockedBy = append(t.BlockedBy, d)
		}
		if b, ok := v.tasks[d]; ok && !contains(b.Blocks, t.ID) {
			b.Blocks = append(b.Blocks, t.ID)
		}
	}
	for _, d := range c.AddBlocks {
		if !contains(t.Blocks, d) {
			t.Blocks = append(t.Blocks, d)
		}
		if b, ok := v.tasks[d]; ok && !contains(b.BlockedBy, t.ID) {
			b.BlockedBy = append(b.BlockedBy, t.ID)
		}
	}
	if t.Status == store.TaskCompleted || t.Status == store.TaskDeleted {
		v.unblock(t.ID, t.Status == store.TaskDeleted)
		t.Blocks = nil
	}
	if complete {
		v.line(env.TS, env.Agent, teamevent.TaskComplete{TaskChange: c}, fmt.Sprintf("completes task #%s", t.ID), c.Owner)
	} else {
		what := fmt.Sprintf("updates task #%s: %s", t.ID, t.Status)
		if c.Owner != "" {
			what += ", owner " + c.Owner
		}
		if len(c.AddBlockedBy) > 0 {
			what += ", waits for #" + strings.Join(c.AddBlockedBy, ", #")
		}
		v.line(env.TS, env.Agent, teamevent.TaskUpdate{TaskChange: c}, what, c.Owner)
	}
	if t.Status == store.TaskDeleted {
		delete(v.tasks, t.ID)
	}
}

func (v *View) send(env teamevent.Envelope, e teamevent.Send) {
	at, who := env.TS, env.Agent
	body := e.Content
	switch e.MsgType {
	case store.TypeIdleNotification:
		return
	case store.TypeMessage, store.TypeBroadcast:
		v.line(at, who, e, fmt.Sprintf("→ %s: %s", e.To, body), e.To)
	case store.TypePlanApprovalResponse:
		verdict := "rejects"
		if e.Approve != nil && *e.Approve {
			verdict = "approves"
		}
		if e.Feedback != "" {
			body = e.Feedback
		}
		v.line(at, who, e, fmt.Sprintf("%s %s's plan: %s", verdict, e.To, body), e.To)
	default:
		v.line(at, who, e, fmt.Sprintf("→ %s [%s] %s", e.To, e.MsgType, body), e.To)
	}
	if v.opts.Driverless && e.To == store.LeadName && (e.MsgType == store.TypeMessage || e.MsgType == store.TypeBroadcast || e.MsgType == store.TypePlanApprovalRequest) {
		// No driver hands these over; the journal's copy is what there is.
		key := store.LeadName + "\x00" + e.ID
		if e.ID == "" || !v.shown[key] {
			if e.ID != "" {
				v.shown[key] = true
			}
			v.add(store.LeadName, Item{Kind: ItemMessage, Who: who, Text: body, Message: e.ID}, at)
		}
	}
}

func (v *View) protocol(env teamevent.Envelope, e teamevent.Protocol) {
	at, who := env.TS, env.Agent
	what := strings.ReplaceAll(e.Kind, "_", " ")
	if e.Approve == nil {
		if !v.answered[e.RequestID] && v.pendingIndex(e.RequestID) < 0 {
			v.pending = append(v.pending, Pending{ID: e.RequestID, Kind: e.Kind, From: e.Member, Tool: e.Tool, Since: at})
		}
		if e.Tool != "" {
			what += " for " + e.Tool
		}
		v.line(at, who, e, withWhy("sends a "+what, e.Reason), e.Member)
		return
	}
	v.answer(e.RequestID)
	verdict := "refuses"
	if *e.Approve {
		verdict = "approves"
	}
	subject := e.Member + "'s " + what
	if e.Member == who {
		subject = "a " + what
	}
	v.line(at, who, e, withWhy(verdict+" "+subject, e.Reason), e.Member)
}

func (v *View) pendingIndex(id string) int {
	for i, p := range v.pending {
		if id != "" && p.ID == id {
			return i
		}
	}
	return -1
}

// line adds an entry to the timeline; others are the members it concerns
// besides who.
func (v *View) line(at time.Time, who string, e teamevent.Event, what string, others ...string) {
	members := []string{}
	for _, n := range append([]string{who}, others...) {
		if n != "" && !contains(members, n) {
			members = append(members, n)
		}
	}
	v.seq++
	v.timeline = append(v.timeline, Entry{Seq: v.seq, At: at, Who: who, Type: e.Type(), Text: what, Members: members})
	if over := len(v.timeline) - v.opts.MaxTimeline; over > 0 {
		v.timeline = append([]Entry(nil), v.timeline[over:]...)
	}
}

func withWhy(what, why string) string {
	if why == "" {
		return what
	}
	return what + ": " + text.OneLine(why, 200)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func remove(xs []string, x string) []string {
	if !contains(xs, x) {
		return xs
	}
	out := make([]string, 0, len(xs))
	for _, y := range xs {
		if y != x {
			out = append(out, y)
		}
	}
	return out
}

func trimSpace(s string) string { return strings.TrimSpace(s) }

func cloneTask(t store.Task) store.Task {
	t.BlockedBy = append([]string(nil), t.BlockedBy...)
	t.Blocks = append([]string(nil), t.Blocks...)
	return t
}
