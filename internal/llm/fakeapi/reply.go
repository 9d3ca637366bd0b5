package fakeapi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/fakescript"
)

// The wire shapes of a reply, as the Messages API sends them.
type (
	wireMessage struct {
		ID           string      `json:"id"`
		Type         string      `json:"type"`
		Role         string      `json:"role"`
		Model        string      `json:"model"`
		Content      []wireBlock `json:"content"`
		StopReason   *string     `json:"stop_reason"`
		StopSequence *string     `json:"stop_sequence"`
		Usage        wireUsage   `json:"usage"`
	}
	wireUsage struct {
		InputTokens              int                `json:"input_tokens"`
		OutputTokens             int                `json:"output_tokens"`
		CacheCreationInputTokens int                `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int                `json:"cache_read_input_tokens"`
		CacheCreation            *wireCacheCreation `json:"cache_creation,omitempty"`
	}
	// wireCacheCreation splits cache_creation_input_tokens by lifetime.
	wireCacheCreation struct {
		Ephemeral5m int `json:"ephemeral_5m_input_tokens"`
		Ephemeral1h int `json:"ephemeral_1h_input_tokens"`
	}
	// wireBlock is a content block; MarshalJSON writes only its kind's fields.
	wireBlock struct {
		Type      string
		Text      string
		Thinking  string
		Signature string
		ID        string
		Name      string
		Input     json.RawMessage
	}
	wireError struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
		RequestID string `json:"request_id"`
	}
)

// MarshalJSON writes the block as the API does; in a stream's
// content_block_start the text, thinking and input are empty.
func (b wireBlock) MarshalJSON() ([]byte, error) {
	switch b.Type {
	case "text":
		return llm.Marshal(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{b.Type, b.Text})
	case "thinking":
		return llm.Marshal(struct {
			Type      string `json:"type"`
			Thinking  string `json:"thinking"`
			Signature string `json:"signature"`
		}{b.Type, b.Thinking, b.Signature})
	case "tool_use":
		input := b.Input
		if len(input) == 0 {
			input = json.RawMessage(`{}`)
		}
		return llm.Marshal(struct {
			Type  string          `json:"type"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		}{b.Type, b.ID, b.Name, input})
	}
	return nil, fmt.Errorf("fakeapi: unknown block type %q", b.Type)
}

// vars are the values of ${...} substitutions for one call.
// vars are the substitutions of one call's reply.
type vars = fakescript.Vars

// buildMessage makes the reply of rule r to call n.
func buildMessage(r *rule, vs vars, model, idPrefix string, n, requestBytes int) (wireMessage, error) {
	msg := wireMessage{
		ID:         fmt.Sprintf("msg_fake_%s%d", idPrefix, n),
		Type:       "message",
		Role:       "assistant",
		Model:      model,
		Content:    []wireBlock{},
		StopReason: &r.stopReason,
	}
	outBytes := 0
	for i, b := range r.reply {
		var wb wireBlock
		switch {
		case b.text != nil:
			wb = wireBlock{Type: "text", Text: vs.Expand(*b.text)}
			outBytes += len(wb.Text)
		case b.thinking != nil:
			wb = wireBlock{Type: "thinking", Thinking: vs.Expand(*b.thinking), Signature: signature(n, i)}
			outBytes += len(wb.Thinking)
		case b.toolUse != nil:
			input, err := llm.Marshal(vs.ExpandAny(b.toolUse.Input))
			if err != nil {
				return msg, fmt.Errorf("tool_use input: %w", err)
			}
			wb = wireBlock{Type: "tool_use", ID: fmt.Sprintf("toolu_fake_%s%d_%d", idPrefix, n, i), Name: b.toolUse.Name, Input: input}
			outBytes += len(input) + len(wb.Name)
		}
		msg.Content = append(msg.Content, wb)
	}
	u := r.usage
	msg.Usage = wireUsage{
		InputTokens:              pick(u.InputTokens, max(1, requestBytes/4)),
		OutputTokens:             pick(u.OutputTokens, max(1, outBytes/4)),
		CacheCreationInputTokens: pick(u.CacheCreationInputTokens, 0),
		CacheReadInputTokens:     pick(u.CacheReadInputTokens, 0),
	}
	return msg, nil
}

// recorded is u as Recorded.Usage shows it.
func (u wireUsage) recorded() Usage {
	r := Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadInputTokens: u.CacheReadInputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens, Ephemeral5mInputTokens: u.CacheCreationInputTokens}
	if cc := u.CacheCreation; cc != nil {
		r.Ephemeral5mInputTokens, r.Ephemeral1hInputTokens = cc.Ephemeral5m, cc.Ephemeral1h
	}
	return r
}

func pick(p *int, def int) int {
	if p != nil {
		return *p
	}
	return def
}

// signature is the fake signature of a thinking block: base64, as real
// ones are, and deterministic.
func signature(call, index int) string {
	return base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "fakeapi-signature:%d:%d", call, index))
}

// sse writes server-sent events. It does not flush each one: nothing
// comes between the events of a reply (Latency is waited before its first
// byte), so a flush per event only cut a reply that is ready at once into
// a write, a segment and a wake of the client per event. The response's
// buffer goes out as it fills, and whole when the caller flushes at the
// reply's end or before it hangs up on a cut one.
type sse struct {
	w          io.Writer
	err        error
	deltaBytes int // Options.DeltaBytes
}

func (s *sse) event(typ string, data any) {
	if s.err != nil {
		return
	}
	b, err := llm.Marshal(data)
	if err != nil {
		s.err = err
		return
	}
	_, s.err = fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", typ, b)
}

type (
	eventMessageStart struct {
		Type    string      `json:"type"`
		Message wireMessage `json:"message"`
	}
	eventBlockStart struct {
		Type         string    `json:"type"`
		Index        int       `json:"index"`
		ContentBlock wireBlock `json:"content_block"`
	}
	eventBlockDelta struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
		Delta any    `json:"delta"`
	}
	eventBlockStop struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	eventMessageDelta struct {
		Type  string `json:"type"`
		Delta struct {
			StopReason   string  `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	eventType struct {
		Type string `json:"type"`
	}
	textDelta struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	jsonDelta struct {
		Type        string `json:"type"`
		PartialJSON string `json:"partial_json"`
	}
	thinkingDelta struct {
		Type     string `json:"type"`
		Thinking string `json:"thinking"`
	}
	signatureDelta struct {
		Type      string `json:"type"`
		Signature string `json:"signature"`
	}
)

// stream writes msg as the event stream of the Messages API. With cut it
// stops after message_start, the first block's start and its first delta,
// and reports false so that the caller breaks the connection.
func (s *sse) stream(msg wireMessage, cut bool) (complete bool) {
	start := msg
	start.Content = []wireBlock{}
	start.StopReason = nil
	start.Usage.OutputTokens = 1
	s.event("message_start", eventMessageStart{Type: "message_start", Message: start})
	for i, b := range msg.Content {
		empty := b
		empty.Text, empty.Thinking, empty.Signature, empty.Input = "", "", "", nil
		s.event("content_block_start", eventBlockStart{Type: "content_block_start", Index: i, ContentBlock: empty})
		if i == 0 {
			s.event("ping", eventType{Type: "ping"})
		}
		var deltas []any
		switch b.Type {
		case "text":
			for _, c := range s.split(b.Text) {
				deltas = append(deltas, textDelta{Type: "text_delta", Text: c})
			}
		case "thinking":
			for _, c := range s.split(b.Thinking) {
				deltas = append(deltas, thinkingDelta{Type: "thinking_delta", Thinking: c})
			}
			deltas = append(deltas, signatureDelta{Type: "signature_delta", Signature: b.Signature})
		case "tool_use":
			for _, c := range splitRunes(string(b.Input)) {
				deltas = append(deltas, jsonDelta{Type: "input_json_delta", PartialJSON: c})
			}
		}
		for _, d := range deltas {
			s.event("content_block_delta", eventBlockDelta{Type: "content_block_delta", Index: i, Delta: d})
			if cut {
				return false
			}
		}
		s.event("content_block_stop", eventBlockStop{Type: "content_block_stop", Index: i})
	}
	if cut {
		return false
	}
	var md eventMessageDelta
	md.Type = "message_delta"
	md.Delta.StopReason = *msg.StopReason
	md.Usage.OutputTokens = msg.Usage.OutputTokens
	s.event("message_delta", md)
	s.event("message_stop", eventType{Type: "message_stop"})
	return true
}

// split cuts text into the pieces of its deltas.
func (s *sse) split(text string) []string {
	if s.deltaBytes <= 0 || text == "" {
		return splitWords(text)
	}
	var chunks []string
	for len(text) > s.deltaBytes {
		cut := s.deltaBytes
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		if cut == 0 { // a rune longer than a delta: keep it whole
			for cut = s.deltaBytes; cut < len(text) && !utf8.RuneStart(text[cut]); cut++ {
			}
		}
		chunks = append(chunks, text[:cut])
		text = text[cut:]
	}
	if text == "" {
		return chunks
	}
	return append(chunks, text)
}

// splitWords cuts text into chunks of a few words, each keeping the
// whitespace that follows it; a long text gets longer chunks so a stream
// stays around fifty events.
func splitWords(text string) []string {
	if text == "" {
		return []string{""}
	}
	words := strings.FieldsFunc(text, unicode.IsSpace)
	per := max(3, len(words)/48)
	var chunks []string
	n, start := 0, 0
	inWord := false
	for i, r := range text {
		space := unicode.IsSpace(r)
		if !space && !inWord {
			if n == per {
				chunks = append(chunks, text[start:i])
				start, n = i, 0
			}
			n++
		}
		inWord = !space
	}
	return append(chunks, text[start:])
}

// splitRunes cuts s into several pieces on rune boundaries (input JSON
// arrives in fragments that are not valid JSON on their own).
func splitRunes(s string) []string {
	size := min(max(len(s)/4, 8), 512)
	var chunks []string
	for len(s) > size {
		cut := size
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		if cut == 0 {
			cut = size
		}
		chunks = append(chunks, s[:cut])
		s = s[cut:]
	}
	return append(chunks, s)
}
