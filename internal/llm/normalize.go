package llm

import "fmt"

// Normalize returns messages fit to send: empty messages dropped, consecutive
// messages of one role merged (tool_result blocks first, as the Messages API
// requires), starting with a user turn. It refuses a conversation that would
// end on an assistant turn, which current models reject: the caller must add
// the user turn (tool results, a continuation) first.
func Normalize(msgs []Message) ([]Message, error) {
	out := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		if len(m.Content) == 0 {
			continue
		}
		if m.Role != RoleUser && m.Role != RoleAssistant {
			return nil, fmt.Errorf("%w: message role %q", ErrInvalidRequest, m.Role)
		}
		if n := len(out); n > 0 && out[n-1].Role == m.Role {
			merged := append(append([]Block(nil), out[n-1].Content...), m.Content...)
			if m.Role == RoleUser {
				merged = resultsFirst(merged)
			}
			out[n-1] = Message{Role: m.Role, Content: merged}
			continue
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no messages", ErrInvalidRequest)
	}
	if out[0].Role != RoleUser {
		return nil, fmt.Errorf("%w: the conversation starts with an assistant turn", ErrInvalidRequest)
	}
	if out[len(out)-1].Role != RoleUser {
		return nil, fmt.Errorf("%w: the conversation ends on an assistant turn", ErrInvalidRequest)
	}
	return out, nil
}

// resultsFirst moves tool_result blocks before every other block, keeping
// the order within each group.
func resultsFirst(blocks []Block) []Block {
	out := make([]Block, 0, len(blocks))
	for _, b := range blocks {
		if b.Type == BlockToolResult {
			out = append(out, b)
		}
	}
	for _, b := range blocks {
		if b.Type != BlockToolResult {
			out = append(out, b)
		}
	}
	return out
}
