package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

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
			b.em.emit(ctx, t, teamevent.Sent(m))
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
		msg.RequestID = b.proto.next(ctx, t, b.self, "shutdown")
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
		if !b.proto.hasShutdown(a.RequestID) {
			return "", fmt.Errorf("no shutdown request %q was sent to you", a.RequestID)
		}
		if !*a.Approve && strings.TrimSpace(a.Reason) == "" && strings.TrimSpace(a.Content) == "" {
			return "", errors.New("refusing a shutdown needs a reason")
		}
		from, _ := b.proto.answerShutdown(a.RequestID)
		if from == "" || from == store.HumanName {
			from = store.LeadName
		}
		a.Recipient = from
		if *a.Approve {
			// The roster says shutdown before the requester hears it, and
			// the tasks it leaves go back to the board.
			msg.Content += b.member.leaving(ctx)
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
		msg.RequestID = b.proto.next(ctx, t, b.self, "plan")
		msg.Plan = a.Content
		a.Recipient = store.LeadName
	case store.TypePlanApprovalResponse, store.TypePermissionResponse:
		if err := needApprove(); err != nil {
			return "", err
		}
		if !b.lead {
			return "", fmt.Errorf("only the lead answers a %s", strings.TrimSuffix(typ, "_response")+"_request")
		}
		req, ok := b.proto.request(a.RequestID)
		if !ok {
			return "", fmt.Errorf("no pending request %q was sent to you", a.RequestID)
		}
		if want := strings.TrimSuffix(typ, "_response") + "_request"; req.Type != want {
			return "", fmt.Errorf("request %q is a %s; answer it with a %s", a.RequestID, req.Type, strings.TrimSuffix(req.Type, "_request")+"_response")
		}
		if typ == store.TypePermissionResponse && *a.Approve {
			// The lead may only grant what its own rules would let it do.
			call := agent.Call{Name: req.ToolName, Input: req.ToolInput, Kind: teammateRegistry(b, nil, b.sess.cfg.Tools...).Kind(req.ToolName)}
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
	if !b.lead && typ == store.TypeMessage && sent.To == store.LeadName {
		b.announced.note(sent.Content)
	}
	switch typ {
	case store.TypeShutdownRequest:
		b.proto.sentShutdown(sent.RequestID, sent.To)
		return fmt.Sprintf("Shutdown request %s sent to %s; its answer will reach you as a shutdown_response.", sent.RequestID, sent.To), nil
	case store.TypePlanApprovalRequest:
		b.proto.setPlan(sent.RequestID, false)
		b.em.emit(ctx, t, teamevent.Protocol{Kind: teamevent.ProtocolPlanRequest, RequestID: sent.RequestID, Member: b.self})
		return fmt.Sprintf("Plan sent to %s for approval (request %s). End your turn; the answer will wake you.", sent.To, sent.RequestID), nil
	case store.TypeShutdownResponse:
		b.em.emit(ctx, t, teamevent.Protocol{Kind: teamevent.ProtocolShutdown, RequestID: a.RequestID, Member: b.self, Approve: a.Approve, Reason: a.Reason})
		if *a.Approve {
			b.proto.stop()
			return "Shutdown approved; you stop now. Any other tool call in this reply is not run.", nil
		}
		return "Shutdown refused; keep working.", nil
	case store.TypePlanApprovalResponse, store.TypePermissionResponse:
		b.proto.answered(a.RequestID)
		b.em.emit(ctx, t, teamevent.Protocol{Kind: typ, RequestID: a.RequestID, Member: sent.To, Approve: a.Approve})
	}
	return fmt.Sprintf("Sent to %s.", sent.To), nil
}

// sendAsIn sends msg (From set) and journals it.
func (b *binding) sendAsIn(ctx context.Context, t store.Team, msg store.Message) (store.Message, error) {
	sent, err := t.Mailbox().Send(ctx, msg)
	if err != nil {
		return sent, err
	}
	b.em.emit(ctx, t, teamevent.Sent(sent))
	return sent, nil
}

func (s *Session) sendAs(ctx context.Context, t store.Team, msg store.Message) (store.Message, error) {
	sent, err := t.Mailbox().Send(ctx, msg)
	if err != nil {
		return sent, err
	}
	s.emit(ctx, t, teamevent.Sent(sent))
	return sent, nil
}
