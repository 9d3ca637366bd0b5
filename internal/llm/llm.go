// Package llm holds the provider-neutral vocabulary of a model conversation:
// messages made of content blocks, tool specifications, streaming events and
// token usage. Providers (internal/llm/anthropic, later openai) translate it
// to and from their wire formats.
//
// It must never depend on agents, tools, teams or the store.
package llm

import (
	"context"
	"encoding/json"
	"iter"
	"strings"
)

// Role is the speaker of a message. Only user and assistant exist on the
// wire; the system prompt travels separately in a Request.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// BlockType names the kind of a content block.
type BlockType string

const (
	BlockText       BlockType = "text"
	BlockToolUse    BlockType = "tool_use"
	BlockToolResult BlockType = "tool_result"
	BlockThinking   BlockType = "thinking"
)

// Block is one piece of a message. Which fields are set depends on Type:
//   - text: Text
//   - tool_use: ID, Name, Input
//   - tool_result: ToolUseID, Content, IsError, Images
//   - thinking: Thinking, Signature
//
// The JSON form is the one transcripts store on disk.
type Block struct {
	Type      BlockType       `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
	// Images go with a tool_result's Content, for a provider that can show
	// them to the model; one that cannot sends only Content, which should
	// therefore say what the images were.
	Images []Image `json:"images,omitempty"`
}

// Image is a picture a tool returned.
type Image struct {
	// MediaType is its MIME type: image/jpeg, image/png, image/gif or
	// image/webp are the ones the model APIs take.
	MediaType string `json:"media_type"`
	// Data is the image, base64-encoded.
	Data string `json:"data"`
}

// TextBlock returns a text block.
func TextBlock(s string) Block { return Block{Type: BlockText, Text: s} }

// ToolResultBlock returns the answer to the tool_use with the given id.
func ToolResultBlock(toolUseID, content string, isError bool) Block {
	return Block{Type: BlockToolResult, ToolUseID: toolUseID, Content: content, IsError: isError}
}

// Message is one turn of the conversation.
type Message struct {
	Role    Role    `json:"role"`
	Content []Block `json:"content"`
}

// Text concatenates the text blocks of m.
func (m Message) Text() string {
	var b strings.Builder
	for _, c := range m.Content {
		if c.Type == BlockText {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// ToolUses returns the tool_use blocks of m in order.
func (m Message) ToolUses() []Block {
	var out []Block
	for _, c := range m.Content {
		if c.Type == BlockToolUse {
			out = append(out, c)
		}
	}
	return out
}

// ToolSpec describes a tool offered to the model. InputSchema is a JSON
// Schema object.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Request is one model call.
type Request struct {
	Model string
	// System is the system prompt, or its part shared by every agent of
	// one kind when SystemTail is set.
	System string
	// SystemTail, if set, ends the system prompt: providers send it after
	// System and outside the cached prefix, so that agents whose Tools and
	// System are equal byte for byte (teammates of one role) share one
	// prompt cache entry. What tells such agents apart (the identity line)
	// goes here.
	SystemTail string
	Messages   []Message
	Tools      []ToolSpec
	MaxTokens  int
	// CacheTTL is the lifetime asked for the prompt cache's breakpoints
	// (CacheTTLDefault: the provider's, 5 minutes for Anthropic). An agent
	// about to idle longer than the default can ask for CacheTTL1h, which
	// costs more to write and keeps the prefix for its return.
	CacheTTL CacheTTL
	// Agent names the calling agent; providers use it only for logs and
	// errors, never on the wire.
	Agent string
}

// CacheTTL is a prompt cache lifetime.
type CacheTTL string

// The lifetimes the Anthropic API offers.
const (
	CacheTTLDefault CacheTTL = ""
	CacheTTL5m      CacheTTL = "5m"
	CacheTTL1h      CacheTTL = "1h"
)

// SystemText is the whole system prompt as one text: System, then
// SystemTail, for providers that have no cache breakpoints to place.
func (r *Request) SystemText() string {
	switch {
	case r.SystemTail == "":
		return r.System
	case r.System == "":
		return r.SystemTail
	}
	return r.System + "\n\n" + r.SystemTail
}

// StopReason says why the model stopped producing output.
type StopReason string

const (
	StopEndTurn   StopReason = "end_turn"
	StopToolUse   StopReason = "tool_use"
	StopMaxTokens StopReason = "max_tokens"
	StopSequence  StopReason = "stop_sequence"
	StopPauseTurn StopReason = "pause_turn"
	StopRefusal   StopReason = "refusal"
)

// Usage counts the tokens of one call, as the provider reported them.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_input_tokens"`
	CacheWriteTokens int64 `json:"cache_creation_input_tokens"`
	// CacheWrite1hTokens is the part of CacheWriteTokens written with the
	// 1-hour lifetime (priced higher than the 5-minute one).
	CacheWrite1hTokens int64 `json:"cache_creation_1h_input_tokens,omitempty"`
}

// Add accumulates o into u.
func (u *Usage) Add(o Usage) {
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.CacheReadTokens += o.CacheReadTokens
	u.CacheWriteTokens += o.CacheWriteTokens
	u.CacheWrite1hTokens += o.CacheWrite1hTokens
}

// ContextTokens is how much of the context window the call's prompt used.
func (u Usage) ContextTokens() int64 {
	return u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens
}

// Response is the complete result of a call.
type Response struct {
	ID         string
	Model      string
	Message    Message // always RoleAssistant
	StopReason StopReason
	Usage      Usage
}

// EventType names a streaming event.
type EventType string

const (
	// EventText carries a piece of assistant text in Text.
	EventText EventType = "text"
	// EventThinking carries a piece of thinking in Text.
	EventThinking EventType = "thinking"
	// EventToolStart says the model began a tool call (Name, ID).
	EventToolStart EventType = "tool_start"
	// EventRetry says the attempt failed and will be retried after
	// Delay; anything streamed since the last EventRetry is void.
	EventRetry EventType = "retry"
	// EventDone is the last event of a successful call and carries
	// the Response.
	EventDone EventType = "done"
)

// Event is one item of a streamed call.
type Event struct {
	Type     EventType
	Text     string
	Name     string
	ID       string
	Attempt  int
	Delay    int64 // milliseconds, for EventRetry
	Err      error // the cause, for EventRetry
	Response *Response
}

// Provider is a model endpoint.
type Provider interface {
	// Name identifies the provider ("anthropic", "openai").
	Name() string
	// Stream makes one call. The sequence ends with an EventDone, or
	// with a non-nil error (after the provider's own retries).
	Stream(ctx context.Context, req *Request) iter.Seq2[Event, error]
}

// Collect drains a stream and returns its Response, calling onEvent (if not
// nil) for every event.
func Collect(seq iter.Seq2[Event, error], onEvent func(Event)) (*Response, error) {
	var resp *Response
	for ev, err := range seq {
		if err != nil {
			return nil, err
		}
		if onEvent != nil {
			onEvent(ev)
		}
		if ev.Type == EventDone {
			resp = ev.Response
		}
	}
	if resp == nil {
		return nil, ErrNoResponse
	}
	return resp, nil
}
