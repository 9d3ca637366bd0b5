package team

import (
	"context"
	"fmt"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// AnswerAsHuman answers a permission or plan approval request addressed to
// the lead, as the human at the keyboard.
func (s *Session) AnswerAsHuman(ctx context.Context, requestID string, approve bool, feedback string) error {
	req, ok := s.proto.request(requestID)
	if !ok {
		return fmt.Errorf("no pending request %q", requestID)
	}
	t, err := s.Team()
	if err != nil {
		return err
	}
	msg := store.HumanAnswer(req.Type, req.From, requestID, approve, feedback)
	if _, err := t.Mailbox().Send(ctx, msg); err != nil {
		return err
	}
	s.proto.answered(requestID)
	emit(ctx, t, store.HumanName, teamevent.Protocol{Kind: msg.Type, RequestID: requestID, Member: req.From, Approve: &approve}, s.cfg.OnEvent, s.cfg.Logger)
	return nil
}

// SendAsHuman sends text from the human to a member of the team (the lead
// is "team-lead").
func (s *Session) SendAsHuman(ctx context.Context, to, text string) error {
	t, err := s.Team()
	if err != nil {
		return err
	}
	sent, err := t.Mailbox().Send(ctx, store.Message{Type: store.TypeMessage, From: store.HumanName, To: to, Content: text})
	if err != nil {
		return err
	}
	emit(ctx, t, store.HumanName, teamevent.Sent(sent), s.cfg.OnEvent, s.cfg.Logger)
	return nil
}
