package team

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// transcriptLine is one line of a transcript: a message of the
// conversation (with the inbox message ids it delivered), or a marker.
type transcriptLine struct {
	TS   time.Time `json:"ts"`
	Type string    `json:"type,omitempty"` // "": a message; "compaction"; "spawn"
	llm.Message
	Delivered []string `json:"delivered,omitempty"`
}

// markSpawn starts a new life in member's transcript: a later restore
// ignores what came before (a member spawned again starts afresh).
func markSpawn(t store.Team, member string) {
	line, _ := json.Marshal(map[string]any{"ts": time.Now().UTC(), "type": "spawn"})
	_ = t.Transcripts().Append(context.Background(), member, line)
}

// restoreConversation rebuilds an agent's conversation from its transcript:
// the messages since its last spawn or compaction (a compaction's summary
// is recorded after its marker), with the ids of inbox messages it already
// has, so they are not delivered twice. A conversation cut off after a tool
// call gets error results for the calls that never answered, so it can be
// sent again.
func restoreConversation(ctx context.Context, t store.Team, member string) ([]llm.Message, map[string]bool, error) {
	lines, err := t.Transcripts().Read(ctx, member)
	if err != nil {
		return nil, nil, err
	}
	var msgs []llm.Message
	seen := map[string]bool{}
	for _, raw := range lines {
		var l transcriptLine
		if err := json.Unmarshal(raw, &l); err != nil {
			continue // a torn or foreign line: the rest still restores
		}
		switch l.Type {
		case "spawn":
			msgs, seen = nil, map[string]bool{}
			continue
		case "compaction":
			msgs = nil // the summary that replaced the history follows
			continue
		case "":
		default:
			continue
		}
		for _, id := range l.Delivered {
			seen[id] = true
		}
		if l.Role != "" && len(l.Content) > 0 {
			msgs = append(msgs, l.Message)
		}
	}
	return closeToolUses(msgs), seen, nil
}

// closeToolUses answers the tool calls of a trailing assistant turn that
// never got results (the process died while they ran).
func closeToolUses(msgs []llm.Message) []llm.Message {
	if len(msgs) == 0 {
		return msgs
	}
	last := msgs[len(msgs)-1]
	if last.Role != llm.RoleAssistant {
		return msgs
	}
	var results []llm.Block
	for _, u := range last.ToolUses() {
		results = append(results, llm.ToolResultBlock(u.ID,
			fmt.Sprintf("interrupted: %s was running when the agent's process stopped; check what it did before running it again", u.Name), true))
	}
	if len(results) == 0 {
		return msgs
	}
	return append(msgs, llm.Message{Role: llm.RoleUser, Content: results})
}

// pendingPlan returns, from the journal, the plan request of member still
// waiting for an answer and whether a plan of member was ever approved.
func pendingPlan(evs []store.Event, member string) (pending string, approved bool) {
	answered := map[string]bool{}
	for _, e := range evs {
		if e.Type != "protocol" {
			continue
		}
		env, err := teamevent.Decode(e)
		p, ok := env.Event.(teamevent.Protocol)
		if err != nil || !ok || p.Member != member {
			continue
		}
		switch p.Kind {
		case store.TypePlanApprovalRequest:
			if !answered[p.RequestID] {
				pending = p.RequestID
			}
		case store.TypePlanApprovalResponse:
			answered[p.RequestID] = true
			if p.RequestID == pending {
				pending = ""
			}
			if p.Approve != nil && *p.Approve {
				approved = true
			}
		}
	}
	return pending, approved
}

// restorePlan is the plan state of a plan-mode member coming back: the
// journal's (pendingPlan), then a request of its own still unread in the
// lead's inbox (leadUnread: a request is committed there before the journal
// says so), then an answer its restored conversation already has (seen):
// the inbox never hands that one out again, so the protocol would never
// hear of it, and the member would wait for an answer it has. The answer is
// found in ownUnread (its own inbox, acked after the transcript line, so a
// kill in between leaves it there) or in the journal's line of its send.
func restorePlan(evs []store.Event, member string, leadUnread, ownUnread []store.Message, seen map[string]bool) (pending string, approved bool) {
	pending, approved = pendingPlan(evs, member)
	for _, u := range leadUnread {
		if u.Type == store.TypePlanApprovalRequest && u.From == member {
			pending = u.RequestID
		}
	}
	answer := func(id, typ, from, requestID string, approve *bool) {
		if pending == "" || !seen[id] || typ != store.TypePlanApprovalResponse || requestID != pending || !fromLeadOrHuman(from) {
			return
		}
		pending, approved = "", approve != nil && *approve
	}
	for _, e := range evs {
		if e.Type != "send" {
			continue
		}
		if env, err := teamevent.Decode(e); err == nil {
			if s, ok := env.Event.(teamevent.Send); ok && s.To == member {
				answer(s.ID, s.MsgType, s.From, s.RequestID, s.Approve)
			}
		}
	}
	for _, u := range ownUnread {
		answer(u.ID, u.Type, u.From, u.RequestID, u.Approve)
	}
	return pending, approved
}

// reopenedRequests are the plan and permission requests to the lead to
// put to it anew after a resume: those the journal shows unanswered
// (pendingRequests) but not those still unread in its inbox (unread), which
// come again with it. A request in the inbox that its restored conversation
// already has (seen: killed between the transcript line and the ack) is
// not handed out again, so it is put anew too, or nobody could answer it
// and its teammate would wait for ever.
func reopenedRequests(evs []store.Event, unread []store.Message, seen map[string]bool) []store.Message {
	pending := pendingRequests(evs)
	inInbox := map[string]bool{}
	for _, u := range unread {
		if !seen[u.ID] {
			inInbox[u.RequestID] = true
		}
	}
	kept := pending[:0]
	for _, p := range pending {
		if !inInbox[p.RequestID] {
			kept = append(kept, p)
		}
	}
	return kept
}

// pendingRequests returns the plan and permission requests sent to the lead
// that the journal shows no answer to.
func pendingRequests(evs []store.Event) []store.Message {
	asked := map[string]store.Message{}
	var order []string
	for _, e := range evs {
		switch e.Type {
		case "send", "protocol", "permission":
		default:
			continue
		}
		env, err := teamevent.Decode(e)
		if err != nil {
			continue
		}
		switch ev := env.Event.(type) {
		case teamevent.Send:
			if ev.RequestID != "" && ev.To == store.LeadName && (ev.MsgType == store.TypePlanApprovalRequest || ev.MsgType == store.TypePermissionRequest) {
				asked[ev.RequestID] = store.Message{Type: ev.MsgType, From: ev.From, To: store.LeadName, RequestID: ev.RequestID, Content: ev.Content}
				order = append(order, ev.RequestID)
			}
		case teamevent.Protocol:
			if ev.Kind == store.TypePlanApprovalResponse || ev.Kind == store.TypePermissionResponse {
				delete(asked, ev.RequestID)
			}
		case teamevent.Permission:
			// Every permission line carries its answer.
			delete(asked, ev.RequestID)
		}
	}
	var out []store.Message
	for _, id := range order {
		if m, ok := asked[id]; ok {
			out = append(out, m)
			delete(asked, id)
		}
	}
	return out
}
