package team

import (
	"context"
	"fmt"
	"strings"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// approveShutdown answers a shutdown request with approval and stops.
func (m *Member) approveShutdown(ctx context.Context, req store.Message, reason string) {
	yes := true
	to := req.From
	if to == "" || to == store.HumanName {
		to = store.LeadName
	}
	// The roster says shutdown before the requester hears the answer, so
	// whoever acts on the answer sees the member gone.
	content := fmt.Sprintf("%s approves the shutdown (%s).", m.name, reason) + m.leaving(ctx)
	m.send(ctx, store.Message{Type: store.TypeShutdownResponse, To: to, RequestID: req.RequestID, Approve: &yes, Reason: reason,
		Content: content})
	m.emit(ctx, teamevent.Protocol{Kind: teamevent.ProtocolShutdown, RequestID: req.RequestID, Member: m.name, Approve: &yes, Reason: reason})
	m.proto.answerShutdown(req.RequestID)
	m.proto.stop()
	// The request itself is consumed: ack everything handed out, after
	// noting in the transcript what the member will never read.
	m.in.drop(ctx, m.cfg.Team)
}

// leaving records the member as shut down and hands its unfinished tasks
// back to the board; it returns what the shutdown answer adds about them.
func (m *Member) leaving(ctx context.Context) string {
	m.markShutdown(ctx, "shutdown approved")
	return handedBackNote(m.handBackAll(ctx, "its owner shut down"))
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
	_, err := m.cfg.Team.Tasks().Update(context.WithoutCancel(ctx), id, func(x *store.Task) error {
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
		m.st.mu.Lock()
		if m.st.currentTask == id {
			m.st.currentTask = ""
		}
		m.st.mu.Unlock()
		m.emit(ctx, teamevent.HandBack{Member: m.name, Task: id})
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
