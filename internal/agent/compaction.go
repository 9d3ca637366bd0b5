package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/troupe-dev/troupe/internal/llm"
)

// Compactor keeps a conversation inside the model's context window. The
// agent consults it before every model call; internal/compact's *Compactor
// implements it (this package does not import that one, so that the loop
// stays a loop and any policy can be plugged in).
type Compactor interface {
	// Micro returns msgs with old, bulky tool results shortened, and
	// whether it changed anything. It must change msgs rarely (the prompt
	// cache misses from the first changed byte on) and never modify msgs
	// itself.
	Micro(msgs []llm.Message) ([]llm.Message, bool)
	// Due reports whether the history must be summarised before the next
	// call to model: reported is the context the last call used as the
	// provider reported it, since the messages added after that call's
	// prompt.
	Due(model string, reported int64, since []llm.Message) bool
	// Compact summarises req's conversation with a call to p and returns
	// the conversation to carry on with (starting with identity, if not
	// empty) and the summary call's response, whose text is the summary.
	// focus is what the summary should dwell on ("" for nothing special).
	Compact(ctx context.Context, p llm.Provider, req llm.Request, identity, focus string) ([]llm.Message, *llm.Response, error)
}

// CompactReason says what started a compaction.
type CompactReason string

const (
	// CompactAuto: the context neared the model's window.
	CompactAuto CompactReason = "auto"
	// CompactTool: the model called the compact tool.
	CompactTool CompactReason = "tool"
	// CompactManual: the owner called Agent.Compact (/compact).
	CompactManual CompactReason = "manual"
)

// Compaction is one replacement of the history by a summary.
type Compaction struct {
	Reason CompactReason
	Focus  string
	// Summary is the text the model wrote.
	Summary string
	// Replaced is the whole history as it was before (a copy).
	Replaced []llm.Message
	// Messages is the conversation that replaces it.
	Messages []llm.Message
	// ContextTokens is the context the history was reckoned to use.
	ContextTokens int64
	// Usage is what the summary call cost.
	Usage llm.Usage
}

// Compact replaces the conversation with a summary of it now, whatever its
// size: /compact in an interactive session. focus, if not empty, says what
// the summary should dwell on. OnCompact is called first; Record then
// receives the new conversation's messages.
func (a *Agent) Compact(ctx context.Context, focus string) error {
	if a.cfg.Compactor == nil {
		return ErrNoCompactor
	}
	return a.compact(ctx, CompactManual, focus)
}

// requestCompact is Env.RequestCompact: the compact tool asks, and the
// request is honoured before the next model call.
func (a *Agent) requestCompact(focus string) {
	a.reqMu.Lock()
	defer a.reqMu.Unlock()
	focus = strings.TrimSpace(focus)
	if a.compactReq != nil && *a.compactReq != "" && focus != "" {
		focus = *a.compactReq + "; " + focus
	} else if a.compactReq != nil && focus == "" {
		focus = *a.compactReq
	}
	a.compactReq = &focus
}

func (a *Agent) takeCompactRequest() (string, bool) {
	a.reqMu.Lock()
	defer a.reqMu.Unlock()
	if a.compactReq == nil {
		return "", false
	}
	focus := *a.compactReq
	a.compactReq = nil
	return focus, true
}

// beforeCall runs the Compactor before a model call: a requested or due
// compaction first, else micro-compaction.
func (a *Agent) beforeCall(ctx context.Context) error {
	c := a.cfg.Compactor
	if c == nil {
		return nil
	}
	if focus, ok := a.takeCompactRequest(); ok {
		return a.compact(ctx, CompactTool, focus)
	}
	if msgs, changed := c.Micro(a.messages); changed {
		// What the last call reported included what was just reclaimed.
		reclaimed := (chars(a.messages) - chars(msgs)) / 4
		a.messages = msgs
		a.reported = max(0, a.reported-int64(reclaimed))
	}
	if c.Due(a.cfg.Model, a.reported, a.messages[a.measured:]) {
		return a.compact(ctx, CompactAuto, "")
	}
	return nil
}

// compact summarises the conversation and replaces it.
func (a *Agent) compact(ctx context.Context, reason CompactReason, focus string) error {
	c := a.cfg.Compactor
	if a.cfg.PreCompact != nil {
		a.cfg.PreCompact(ctx, reason, focus)
	}
	before := a.Messages()
	used := a.reported + int64(chars(a.messages[a.measured:])/4)
	msgs, resp, err := c.Compact(ctx, a.cfg.Provider, a.request(), a.cfg.Identity, focus)
	if resp != nil {
		a.turns++
		a.usage.Add(resp.Usage)
		u := resp.Usage
		a.emit(Event{Type: EventUsage, Usage: &u})
	}
	if err != nil {
		return fmt.Errorf("compact the conversation of %s: %w", a.cfg.Name, err)
	}
	if len(msgs) == 0 {
		return fmt.Errorf("compact the conversation of %s: %w", a.cfg.Name, errors.New("the compactor returned an empty conversation"))
	}
	rec := Compaction{
		Reason:        reason,
		Focus:         focus,
		Summary:       strings.TrimSpace(resp.Message.Text()),
		Replaced:      before,
		Messages:      append([]llm.Message(nil), msgs...),
		ContextTokens: used,
		Usage:         resp.Usage,
	}
	if a.cfg.OnCompact != nil {
		if err := a.cfg.OnCompact(rec); err != nil {
			return fmt.Errorf("compact the conversation of %s: %w", a.cfg.Name, err)
		}
	}
	if a.cfg.PostCompact != nil {
		if extra := a.cfg.PostCompact(ctx, rec); len(extra) > 0 {
			msgs = append([]llm.Message(nil), msgs...)
			if last := len(msgs) - 1; msgs[last].Role == llm.RoleUser {
				msgs[last].Content = append(append([]llm.Block(nil), msgs[last].Content...), extra...)
			} else {
				msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: extra})
			}
		}
	}
	a.messages = nil
	a.reported, a.measured = 0, 0
	for _, m := range msgs {
		a.appendMessage(m)
	}
	a.emit(Event{Type: EventCompact, Compaction: &rec})
	return nil
}

// chars is the size of msgs' content, for estimates.
func chars(msgs []llm.Message) int {
	n := 0
	for _, m := range msgs {
		for _, b := range m.Content {
			n += len(b.Text) + len(b.Content) + len(b.Input) + len(b.Thinking) + len(b.Name)
		}
	}
	return n
}
