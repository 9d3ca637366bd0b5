package team

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
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
		id, _ := e.Fields["request_id"].(string)
		switch e.Fields["kind"] {
		case store.TypePlanApprovalRequest:
			if e.Fields["member"] == member && !answered[id] {
				pending = id
			}
		case store.TypePlanApprovalResponse:
			if e.Fields["member"] == member {
				answered[id] = true
				if id == pending {
					pending = ""
				}
				if e.Fields["approve"] == true {
					approved = true
				}
			}
		}
	}
	return pending, approved
}

// pendingRequests returns the plan and permission requests sent to the lead
// that the journal shows no answer to.
func pendingRequests(evs []store.Event) []store.Message {
	asked := map[string]store.Message{}
	var order []string
	for _, e := range evs {
		id, _ := e.Fields["request_id"].(string)
		if id == "" {
			continue
		}
		switch {
		case e.Type == "send" && e.Fields["to"] == store.LeadName &&
			(e.Fields["msg_type"] == store.TypePlanApprovalRequest || e.Fields["msg_type"] == store.TypePermissionRequest):
			from, _ := e.Fields["from"].(string)
			typ, _ := e.Fields["msg_type"].(string)
			content, _ := e.Fields["content"].(string)
			asked[id] = store.Message{Type: typ, From: from, To: store.LeadName, RequestID: id, Content: content}
			order = append(order, id)
		case e.Type == "protocol" && (e.Fields["kind"] == store.TypePlanApprovalResponse || e.Fields["kind"] == store.TypePermissionResponse):
			delete(asked, id)
		case e.Type == "permission" && e.Fields["approve"] != nil:
			delete(asked, id)
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
