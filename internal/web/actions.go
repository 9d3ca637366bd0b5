package web

import (
	"context"
	"fmt"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// Request is a permission or plan approval request the dashboard answers.
type Request struct {
	ID   string
	Kind string // teamevent.ProtocolPermission or ProtocolPlanRequest
	From string // the member that asked
}

// Actor does what the human asks from the dashboard. StoreActor writes to
// the team's mailbox as the human, which any process can do; a server
// running beside a session may route the answers through the session, so
// the lead knows they were given.
type Actor interface {
	Answer(ctx context.Context, t store.Team, req Request, approve bool, feedback string) error
	Send(ctx context.Context, t store.Team, to, text string) error
	Stop(ctx context.Context, t store.Team, member string) error
}

// StoreActor acts through the store: messages from "human", journaled like
// the team's own.
type StoreActor struct{}

// Answer sends the human's answer to the member that asked. A teammate
// takes answers from the lead or the human alike.
func (StoreActor) Answer(ctx context.Context, t store.Team, req Request, approve bool, feedback string) error {
	msg := store.HumanAnswer(req.Kind, req.From, req.ID, approve, feedback)
	if _, err := t.Mailbox().Send(ctx, msg); err != nil {
		return fmt.Errorf("answer %s of %s: %w", req.ID, req.From, err)
	}
	journal(ctx, t, teamevent.Protocol{Kind: msg.Type, RequestID: req.ID, Member: req.From, Approve: &approve, Reason: feedback})
	return nil
}

// Send sends text from the human to a member.
func (StoreActor) Send(ctx context.Context, t store.Team, to, text string) error {
	m, err := t.Mailbox().Send(ctx, store.Message{Type: store.TypeMessage, From: store.HumanName, To: to, Content: text})
	if err != nil {
		return fmt.Errorf("send to %s: %w", to, err)
	}
	journal(ctx, t, teamevent.Sent(m))
	return nil
}

// Stop asks a member to shut down, as the lead would.
func (StoreActor) Stop(ctx context.Context, t store.Team, member string) error {
	id := fmt.Sprintf("shutdown-human-%d-%s", time.Now().UnixMilli(), randomHex(3))
	m, err := t.Mailbox().Send(ctx, store.Message{Type: store.TypeShutdownRequest, From: store.HumanName, To: member,
		RequestID: id, Content: "The human asks you to stop and shut down."})
	if err != nil {
		return fmt.Errorf("stop %s: %w", member, err)
	}
	journal(ctx, t, teamevent.Sent(m))
	return nil
}

// journal records what the human did; a failure to journal does not undo
// the message, which is what counts.
func journal(ctx context.Context, t store.Team, ev teamevent.Event) {
	e, err := teamevent.Encode(store.HumanName, ev)
	if err != nil {
		return
	}
	e.TS, e.Team = time.Now().UTC(), t.Name()
	_ = t.Journal().Append(context.WithoutCancel(ctx), e)
}
