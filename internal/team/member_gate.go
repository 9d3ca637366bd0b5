package team

import (
	"context"
	"fmt"
	"time"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/text"
)

// permMode is the member's permission mode now: plan until its plan is
// approved when it was spawned with plan_mode_required.
func (m *Member) permMode() permission.Mode {
	_, approved := m.proto.plan()
	planBlocked := m.me.PlanModeRequired && !approved
	if planBlocked {
		return permission.Plan
	}
	mode, err := permission.ParseMode(m.me.PermissionMode)
	if err != nil {
		return permission.Default
	}
	return mode
}

// gate enforces plan mode (with a message that says how to get out of it),
// then the artifact guard, the PreToolUse hooks and the permission policy.
// A call that needs permission becomes a permission_request to the lead.
func (m *Member) gate(ctx context.Context, c agent.Call) agent.Decision {
	if m.proto.stopping() {
		return agent.Decision{Reason: "you approved your shutdown earlier in this reply, so your run is over and nothing after it runs"}
	}
	if m.permMode() == permission.Plan && c.Kind.Changes() {
		return agent.Decision{Reason: "plan mode: this tool is refused until the lead approves your plan (send it with SendMessage type plan_approval_request)"}
	}
	return m.chain(ctx, c)
}

// askPermission sends a permission_request to the lead and waits for the
// permission_response with the same request_id.
func (m *Member) askPermission(ctx context.Context, c agent.Call, why string) agent.Decision {
	reqID := m.proto.next(ctx, m.cfg.Team, m.name, "perm")
	ch, done := m.proto.waitPermission(reqID)
	defer done()
	// Watch before asking, so an answer that comes at once is not missed.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inboxCh, err := m.cfg.Team.Mailbox().Watch(wctx, m.name)
	if err != nil {
		return agent.Decision{Reason: "permission request failed: " + err.Error()}
	}
	m.setStatus(ctx, StatusWaiting, "permission for "+c.Name)
	defer m.setStatus(ctx, store.StatusWorking, "")
	m.send(ctx, store.Message{Type: store.TypePermissionRequest, To: store.LeadName, RequestID: reqID, ToolName: c.Name, ToolInput: c.Input,
		Content: fmt.Sprintf("%s asks to run %s %s (%s)", m.name, c.Name, text.OneLine(compactJSON(c.Input), 300), why), Summary: "permission for " + c.Name})
	m.emit(ctx, teamevent.Protocol{Kind: teamevent.ProtocolPermission, RequestID: reqID, Member: m.name, Tool: c.Name})
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
			m.emit(ctx, teamevent.Permission{RequestID: reqID, Member: m.name, Tool: c.Name, Approve: ok})
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
			m.emit(ctx, teamevent.Permission{RequestID: reqID, Member: m.name, Tool: c.Name, Approve: false, Why: "no answer"})
			return agent.Decision{Reason: fmt.Sprintf("no answer to the permission request within %s", wait)}
		}
		if err := m.fetch(ctx); err != nil {
			return agent.Decision{Reason: "permission request failed: " + err.Error()}
		}
	}
}
