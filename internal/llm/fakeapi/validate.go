package fakeapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// request is what the server needs from a valid request body.
type request struct {
	model    string
	stream   bool
	system   string // text of the system prompt, blocks joined by "\n"
	lastUser string // text of the latest user message (see userText)
	// blocks are the request's blocks in the prompt cache's order.
	blocks []cacheBlock
}

// maxCacheControl is how many blocks may carry cache_control in a request.
const maxCacheControl = 4

var blockTypes = []string{"text", "image", "tool_use", "tool_result", "thinking", "redacted_thinking", "document"}

// validate checks body the way the Messages API does and returns the first
// problem as the message of a 400 invalid_request_error.
func validate(body []byte) (*request, error) {
	raw, err := decode(body)
	return validateDecoded(raw, err, nil)
}

// decode parses a request body once, numbers kept as written; the server
// peeks at the result before validating it.
func decode(body []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("request body is not valid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("request body is not valid JSON: data after the top-level value")
	}
	return raw, nil
}

// validateDecoded is validate on what decode returned, or, with p, on
// the body as the server's memo read it (raw is then p.obj).
func validateDecoded(raw any, decodeErr error, p *parsed) (*request, error) {
	if decodeErr != nil {
		return nil, decodeErr
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		return nil, errors.New("request body must be a JSON object")
	}
	if p == nil {
		p = &parsed{obj: obj}
	}
	req := &request{}
	v := validator{parts: p.msgs}

	switch m := obj["model"].(type) {
	case nil:
		return nil, errors.New("model: Field required")
	case string:
		if m == "" {
			return nil, errors.New("model: must be a non-empty string")
		}
		req.model = m
	default:
		return nil, errors.New("model: Input should be a valid string")
	}

	switch mt := obj["max_tokens"].(type) {
	case nil:
		return nil, errors.New("max_tokens: Field required")
	case json.Number:
		n, err := mt.Int64()
		if err != nil {
			return nil, fmt.Errorf("max_tokens: Input should be a valid integer, got %s", mt)
		}
		if n < 1 {
			return nil, fmt.Errorf("max_tokens: must be greater than or equal to 1, got %d", n)
		}
	default:
		return nil, errors.New("max_tokens: Input should be a valid integer")
	}

	if st, present := obj["stream"]; present && st != nil {
		b, ok := st.(bool)
		if !ok {
			return nil, errors.New("stream: Input should be a valid boolean")
		}
		req.stream = b
	}

	system, err := v.system(obj["system"])
	if err != nil {
		return nil, err
	}
	req.system = system

	if err := v.toolsOf(p, obj["tools"]); err != nil {
		return nil, err
	}

	last, err := v.messages(obj["messages"])
	if err != nil {
		return nil, err
	}
	if n := len(p.msgs); n > 0 && p.msgs[n-1].alone != nil {
		req.lastUser = p.msgs[n-1].alone.text
	} else {
		req.lastUser = userText(last)
	}

	if v.cacheControls > maxCacheControl {
		return nil, fmt.Errorf("A maximum of %d blocks with cache_control may be provided. Found %d.", maxCacheControl, v.cacheControls)
	}
	if v.cacheErr != nil {
		return nil, v.cacheErr
	}
	req.blocks = p.blocks()
	if err := checkTTLOrder(req.blocks); err != nil {
		return nil, err
	}
	return req, nil
}

// validator carries what is counted across the whole request.
type validator struct {
	cacheControls int
	cacheErr      error // the first malformed cache_control
	toolUseIDs    map[string]bool
	// parts are the memo's parts of the messages, when the body was read
	// through it: a message that passed its checks alone is not checked
	// again, only against the others.
	parts []*msgPart
}

func (v *validator) countCache(m map[string]any) {
	cc, ok := m["cache_control"]
	if !ok || cc == nil {
		return
	}
	v.cacheControls++
	if v.cacheErr != nil {
		return
	}
	if _, err := cacheTTL(cc); err != nil {
		v.cacheErr = err
	}
}

func (v *validator) system(sys any) (string, error) {
	switch sys := sys.(type) {
	case nil:
		return "", nil
	case string:
		return sys, nil
	case []any:
		var parts []string
		for i, e := range sys {
			b, ok := e.(map[string]any)
			if !ok {
				return "", fmt.Errorf("system.%d: Input should be a valid dictionary", i)
			}
			if b["type"] != "text" {
				return "", fmt.Errorf("system.%d.type: Input should be 'text'", i)
			}
			text, ok := b["text"].(string)
			if !ok {
				return "", fmt.Errorf("system.%d.text: Field required", i)
			}
			if strings.TrimSpace(text) == "" {
				return "", fmt.Errorf("system.%d.text: text content blocks must contain non-whitespace text", i)
			}
			v.countCache(b)
			parts = append(parts, text)
		}
		return strings.Join(parts, "\n"), nil
	default:
		return "", errors.New("system: Input should be a valid string or a list of text blocks")
	}
}

// toolsOf checks the tools list, or takes what the memo found when it
// checked the same list.
func (v *validator) toolsOf(p *parsed, tools any) error {
	if p.tools == nil {
		return v.tools(tools)
	}
	if p.tools.err != nil {
		return p.tools.err
	}
	v.cacheControls += p.tools.checked.cacheControls
	if v.cacheErr == nil {
		v.cacheErr = p.tools.checked.cacheErr
	}
	return nil
}

func (v *validator) tools(tools any) error {
	if tools == nil {
		return nil
	}
	list, ok := tools.([]any)
	if !ok {
		return errors.New("tools: Input should be a valid list")
	}
	seen := map[string]bool{}
	for i, e := range list {
		t, ok := e.(map[string]any)
		if !ok {
			return fmt.Errorf("tools.%d: Input should be a valid dictionary", i)
		}
		name, ok := t["name"].(string)
		if !ok {
			return fmt.Errorf("tools.%d.name: Field required", i)
		}
		if !toolNameRE().MatchString(name) {
			return fmt.Errorf("tools.%d.name: String should match pattern '%s', got %q", i, toolNameRE(), name)
		}
		if seen[name] {
			return fmt.Errorf("tools: Tool names must be unique; %q appears more than once", name)
		}
		seen[name] = true
		typ, _ := t["type"].(string)
		if typ == "" || typ == "custom" {
			schema, ok := t["input_schema"].(map[string]any)
			if !ok {
				return fmt.Errorf("tools.%d.input_schema: Field required (a JSON object)", i)
			}
			if schema["type"] != "object" {
				return fmt.Errorf("tools.%d.input_schema.type: Input should be 'object'", i)
			}
		}
		v.countCache(t)
	}
	return nil
}

// messages checks the conversation and returns its last (user) message.
func (v *validator) messages(msgs any) (map[string]any, error) {
	if msgs == nil {
		return nil, errors.New("messages: Field required")
	}
	list, ok := msgs.([]any)
	if !ok {
		return nil, errors.New("messages: Input should be a valid list")
	}
	if len(list) == 0 {
		return nil, errors.New("messages: at least one message is required")
	}
	v.toolUseIDs = map[string]bool{}
	var prevRole string
	var pending []toolUse // tool_use blocks of the previous assistant message
	var last map[string]any
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("messages.%d: Input should be a valid dictionary", i)
		}
		role, _ := m["role"].(string)
		if role != "user" && role != "assistant" {
			return nil, fmt.Errorf("messages.%d.role: Input should be 'user' or 'assistant', got %v", i, jsonText(m["role"]))
		}
		if i == 0 && role != "user" {
			return nil, errors.New(`messages.0.role: the first message must use the "user" role`)
		}
		if role == prevRole {
			return nil, fmt.Errorf(`messages.%d: roles must alternate between "user" and "assistant", but found multiple %q roles in a row`, i, role)
		}
		uses, results, err := v.contentAt(i, role, m)
		if err != nil {
			return nil, err
		}
		if role == "user" {
			for _, r := range results {
				if !slices.ContainsFunc(pending, func(u toolUse) bool { return u.id == r.id }) {
					return nil, fmt.Errorf("messages.%d.content.%d: unexpected tool_use_id found in tool_result blocks: %s. Each tool_result block must have a corresponding tool_use block in the previous message.", i, r.index, r.id)
				}
			}
			var missing []string
			for _, u := range pending {
				if !slices.ContainsFunc(results, func(r toolResult) bool { return r.id == u.id }) {
					missing = append(missing, u.id)
				}
			}
			if len(missing) > 0 {
				return nil, fmt.Errorf("messages.%d: tool_use ids were found without tool_result blocks immediately after: %s. Each tool_use block must have a corresponding tool_result block in the next message.", i-1, strings.Join(missing, ", "))
			}
			pending = nil
		} else {
			pending = uses
		}
		prevRole = role
		last = m
	}
	if prevRole != "user" {
		return nil, fmt.Errorf(`messages.%d: the conversation must end with a "user" message; assistant prefill is not supported`, len(list)-1)
	}
	return last, nil
}

// contentAt checks the content of message i, m, and returns the ids of its
// tool_use blocks and its tool_result blocks. A message the memo has
// checked alone is only checked against the others: its tool_use ids must
// be new to the conversation.
func (v *validator) contentAt(i int, role string, m map[string]any) ([]toolUse, []toolResult, error) {
	if i >= len(v.parts) || v.parts[i].alone == nil || v.parts[i].alone.role != role {
		return v.content(i, role, m["content"])
	}
	f := v.parts[i].alone
	for _, u := range f.uses {
		if v.toolUseIDs[u.id] {
			return nil, nil, fmt.Errorf("messages.%d.content.%d.id: tool_use ids must be unique; %s appears more than once", i, u.index, u.id)
		}
		v.toolUseIDs[u.id] = true
	}
	v.cacheControls += f.cacheControls
	if v.cacheErr == nil {
		v.cacheErr = f.cacheErr
	}
	return f.uses, f.results, nil
}

type toolResult struct {
	index int
	id    string
}

// content checks one message's content and returns the ids of its
// tool_use blocks and its tool_result blocks.
func (v *validator) content(i int, role string, content any) (uses []toolUse, results []toolResult, err error) {
	switch c := content.(type) {
	case nil:
		return nil, nil, fmt.Errorf("messages.%d.content: Field required", i)
	case string:
		if c == "" {
			return nil, nil, fmt.Errorf("messages.%d: all messages must have non-empty content", i)
		}
		return nil, nil, nil
	case []any:
		if len(c) == 0 {
			return nil, nil, fmt.Errorf("messages.%d: all messages must have non-empty content", i)
		}
		sawOther := false
		for j, e := range c {
			b, ok := e.(map[string]any)
			if !ok {
				return nil, nil, fmt.Errorf("messages.%d.content.%d: Input should be a valid dictionary", i, j)
			}
			path := fmt.Sprintf("messages.%d.content.%d", i, j)
			typ, _ := b["type"].(string)
			if !slices.Contains(blockTypes, typ) {
				return nil, nil, fmt.Errorf("%s.type: unknown content block type %s (want one of %s)", path, jsonText(b["type"]), strings.Join(blockTypes, ", "))
			}
			v.countCache(b)
			switch typ {
			case "tool_result":
				if role != "user" {
					return nil, nil, fmt.Errorf("%s: tool_result blocks are only allowed in user messages", path)
				}
				if sawOther {
					return nil, nil, fmt.Errorf("%s: tool_result blocks must come before any other content in a user message", path)
				}
				id, err := v.toolResult(path, b)
				if err != nil {
					return nil, nil, err
				}
				if slices.ContainsFunc(results, func(r toolResult) bool { return r.id == id }) {
					return nil, nil, fmt.Errorf("%s: duplicate tool_result for tool_use_id %s", path, id)
				}
				results = append(results, toolResult{index: j, id: id})
				continue
			case "tool_use", "thinking", "redacted_thinking":
				if role != "assistant" {
					return nil, nil, fmt.Errorf("%s: %s blocks are only allowed in assistant messages", path, typ)
				}
			}
			sawOther = true
			if err := v.block(path, typ, b); err != nil {
				return nil, nil, err
			}
			if typ == "tool_use" {
				uses = append(uses, toolUse{index: j, id: b["id"].(string)})
			}
		}
		return uses, results, nil
	default:
		return nil, nil, fmt.Errorf("messages.%d.content: Input should be a valid string or list of content blocks", i)
	}
}

// imageMediaTypes are the media types a base64 image may have.
var imageMediaTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}

// block checks the fields of a block other than tool_result.
func (v *validator) block(path, typ string, b map[string]any) error {
	switch typ {
	case "text":
		text, ok := b["text"].(string)
		if !ok {
			return fmt.Errorf("%s.text: Field required (a string)", path)
		}
		if strings.TrimSpace(text) == "" {
			return fmt.Errorf("%s.text: text content blocks must contain non-whitespace text", path)
		}
	case "image", "document":
		src, ok := b["source"].(map[string]any)
		if !ok {
			return fmt.Errorf("%s.source: Field required (an object)", path)
		}
		if typ == "image" && src["type"] == "base64" {
			if mt, _ := src["media_type"].(string); !imageMediaTypes[mt] {
				return fmt.Errorf("%s.source.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp', got %s", path, jsonText(src["media_type"]))
			}
			if d, _ := src["data"].(string); d == "" {
				return fmt.Errorf("%s.source.data: Field required (a base64 string)", path)
			} else if _, err := base64.StdEncoding.DecodeString(d); err != nil {
				return fmt.Errorf("%s.source.data: invalid base64 data", path)
			}
		}
	case "tool_use":
		id, _ := b["id"].(string)
		if id == "" {
			return fmt.Errorf("%s.id: Field required (a non-empty string)", path)
		}
		if v.toolUseIDs[id] {
			return fmt.Errorf("%s.id: tool_use ids must be unique; %s appears more than once", path, id)
		}
		v.toolUseIDs[id] = true
		name, _ := b["name"].(string)
		if !toolNameRE().MatchString(name) {
			return fmt.Errorf("%s.name: String should match pattern '%s', got %s", path, toolNameRE(), jsonText(b["name"]))
		}
		if _, ok := b["input"].(map[string]any); !ok {
			return fmt.Errorf("%s.input: Input should be a valid dictionary", path)
		}
	case "thinking":
		if _, ok := b["thinking"].(string); !ok {
			return fmt.Errorf("%s.thinking: Field required (a string)", path)
		}
		if _, ok := b["signature"].(string); !ok {
			return fmt.Errorf("%s.signature: Field required (a string)", path)
		}
	case "redacted_thinking":
		if _, ok := b["data"].(string); !ok {
			return fmt.Errorf("%s.data: Field required (a string)", path)
		}
	}
	return nil
}

// toolResult checks a tool_result block and returns the id it answers.
func (v *validator) toolResult(path string, b map[string]any) (string, error) {
	id, _ := b["tool_use_id"].(string)
	if id == "" {
		return "", fmt.Errorf("%s.tool_use_id: Field required (a non-empty string)", path)
	}
	if e, ok := b["is_error"]; ok && e != nil {
		if _, ok := e.(bool); !ok {
			return "", fmt.Errorf("%s.is_error: Input should be a valid boolean", path)
		}
	}
	switch c := b["content"].(type) {
	case nil, string:
	case []any:
		for k, e := range c {
			inner, ok := e.(map[string]any)
			sub := fmt.Sprintf("%s.content.%d", path, k)
			if !ok {
				return "", fmt.Errorf("%s: Input should be a valid dictionary", sub)
			}
			typ, _ := inner["type"].(string)
			if typ != "text" && typ != "image" && typ != "document" {
				return "", fmt.Errorf("%s.type: tool_result content blocks must be text, image or document, got %s", sub, jsonText(inner["type"]))
			}
			v.countCache(inner)
			if err := v.block(sub, typ, inner); err != nil {
				return "", err
			}
		}
	default:
		return "", fmt.Errorf("%s.content: Input should be a valid string or list of content blocks", path)
	}
	return id, nil
}

// userText is the text rules match against: a string content, or the text
// blocks and tool_result contents of a message, joined by "\n".
func userText(m map[string]any) string {
	switch c := m["content"].(type) {
	case string:
		return c
	case []any:
		var parts []string
		for _, e := range c {
			b, _ := e.(map[string]any)
			switch b["type"] {
			case "text":
				parts = append(parts, b["text"].(string))
			case "tool_result":
				switch rc := b["content"].(type) {
				case string:
					parts = append(parts, rc)
				case []any:
					for _, ie := range rc {
						if ib, _ := ie.(map[string]any); ib["type"] == "text" {
							parts = append(parts, ib["text"].(string))
						}
					}
				}
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}

// jsonText shows a decoded JSON value in a message.
func jsonText(v any) string {
	if v == nil {
		return "null"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
