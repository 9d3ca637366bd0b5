package fakeopenai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// request is what the server needs from a valid request body.
type request struct {
	model        string
	stream       bool
	includeUsage bool
	system       string // content of the first system (or developer) message
	latest       string // user and tool contents after the last assistant message
}

// validate checks body the way OpenAI-compatible servers do and returns the
// first problem as the message of a 400 invalid_request_error.
func validate(body []byte) (*request, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("We could not parse the JSON body of your request: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("We could not parse the JSON body of your request: data after the top-level value")
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		return nil, errors.New("The request body must be a JSON object")
	}
	req := &request{}
	switch m := obj["model"].(type) {
	case nil:
		return nil, errors.New("you must provide a model parameter")
	case string:
		if m == "" {
			return nil, errors.New("model: must be a non-empty string")
		}
		req.model = m
	default:
		return nil, fmt.Errorf("model: expected a string, got %s", jsonText(m))
	}
	for _, k := range []string{"max_tokens", "max_completion_tokens"} {
		v, present := obj[k]
		if !present || v == nil {
			continue
		}
		n, ok := v.(json.Number)
		i, err := n.Int64()
		if !ok || err != nil || i < 1 {
			return nil, fmt.Errorf("Invalid '%s': expected an integer of 1 or more, got %s", k, jsonText(v))
		}
	}
	if st, present := obj["stream"]; present && st != nil {
		b, ok := st.(bool)
		if !ok {
			return nil, fmt.Errorf("Invalid 'stream': expected a boolean, got %s", jsonText(st))
		}
		req.stream = b
	}
	if so, present := obj["stream_options"]; present && so != nil {
		if !req.stream {
			return nil, errors.New("The 'stream_options' parameter is only allowed when 'stream' is enabled.")
		}
		m, ok := so.(map[string]any)
		if !ok {
			return nil, errors.New("Invalid 'stream_options': expected an object")
		}
		if iu, present := m["include_usage"]; present {
			b, ok := iu.(bool)
			if !ok {
				return nil, errors.New("Invalid 'stream_options.include_usage': expected a boolean")
			}
			req.includeUsage = b
		}
	}
	if err := checkTools(obj["tools"]); err != nil {
		return nil, err
	}
	if err := checkMessages(obj["messages"], req); err != nil {
		return nil, err
	}
	return req, nil
}

func checkTools(v any) error {
	if v == nil {
		return nil
	}
	tools, ok := v.([]any)
	if !ok {
		return errors.New("Invalid 'tools': expected an array")
	}
	seen := map[string]bool{}
	for i, t := range tools {
		obj, ok := t.(map[string]any)
		if !ok {
			return fmt.Errorf("Invalid 'tools[%d]': expected an object", i)
		}
		if obj["type"] != "function" {
			return fmt.Errorf("Invalid 'tools[%d].type': expected 'function', got %s", i, jsonText(obj["type"]))
		}
		fn, ok := obj["function"].(map[string]any)
		if !ok {
			return fmt.Errorf("Missing required parameter: 'tools[%d].function'.", i)
		}
		name, _ := fn["name"].(string)
		if !toolNameRE().MatchString(name) {
			return fmt.Errorf("Invalid 'tools[%d].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", i)
		}
		if seen[name] {
			return fmt.Errorf("Invalid 'tools': duplicate function name %q", name)
		}
		seen[name] = true
		if d, present := fn["description"]; present {
			if _, ok := d.(string); !ok {
				return fmt.Errorf("Invalid 'tools[%d].function.description': expected a string", i)
			}
		}
		if p, present := fn["parameters"]; present {
			ps, ok := p.(map[string]any)
			if !ok {
				return fmt.Errorf("Invalid 'tools[%d].function.parameters': expected a JSON Schema object", i)
			}
			if ty, present := ps["type"]; present && ty != "object" {
				return fmt.Errorf("Invalid schema for function '%s': schema must be a JSON Schema of 'type: \"object\"', got 'type: %s'.", name, jsonText(ty))
			}
		}
	}
	return nil
}

// checkMessages checks roles, contents and the tool-call protocol: every
// tool call of an assistant message is answered by a tool message with its
// id before the next message of another role, and a tool message answers a
// call that is still open.
func checkMessages(v any, req *request) error {
	msgs, ok := v.([]any)
	if !ok {
		return errors.New("Missing required parameter: 'messages'.")
	}
	if len(msgs) == 0 {
		return errors.New("Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	var open []string // ids of tool calls not yet answered, in order
	sawSystem := false
	var latest []string
	for i, e := range msgs {
		m, ok := e.(map[string]any)
		if !ok {
			return fmt.Errorf("Invalid 'messages[%d]': expected an object", i)
		}
		role, _ := m["role"].(string)
		if role != "tool" && len(open) > 0 {
			return fmt.Errorf("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", strings.Join(open, ", "))
		}
		switch role {
		case "system", "developer":
			text, err := content(m["content"], fmt.Sprintf("messages[%d]", i), true)
			if err != nil {
				return err
			}
			if !sawSystem {
				req.system, sawSystem = text, true
			}
		case "user":
			text, err := content(m["content"], fmt.Sprintf("messages[%d]", i), true)
			if err != nil {
				return err
			}
			latest = append(latest, text)
		case "assistant":
			latest = nil
			calls, err := toolCalls(m["tool_calls"], i)
			if err != nil {
				return err
			}
			c, present := m["content"]
			if (!present || c == nil) && len(calls) == 0 {
				return fmt.Errorf("Invalid 'messages[%d]': an assistant message needs 'content' or 'tool_calls'", i)
			}
			if present && c != nil {
				if _, err := content(c, fmt.Sprintf("messages[%d]", i), false); err != nil {
					return err
				}
			}
			open = calls
		case "tool":
			id, _ := m["tool_call_id"].(string)
			if id == "" {
				return fmt.Errorf("Missing required parameter: 'messages[%d].tool_call_id'.", i)
			}
			k := slices.Index(open, id)
			if k < 0 {
				return fmt.Errorf("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. messages[%d].tool_call_id %q answers no open tool call.", i, id)
			}
			open = slices.Delete(open, k, k+1)
			text, err := content(m["content"], fmt.Sprintf("messages[%d]", i), true)
			if err != nil {
				return err
			}
			latest = append(latest, text)
		case "":
			return fmt.Errorf("Missing required parameter: 'messages[%d].role'.", i)
		default:
			return fmt.Errorf("Invalid value: '%s'. Supported values are: 'system', 'developer', 'user', 'assistant' and 'tool'. (messages[%d].role)", role, i)
		}
	}
	if len(open) > 0 {
		return fmt.Errorf("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", strings.Join(open, ", "))
	}
	req.latest = strings.Join(latest, "\n")
	return nil
}

// content checks a message content (a string or an array of text parts) and
// returns its text.
func content(v any, where string, required bool) (string, error) {
	switch c := v.(type) {
	case nil:
		if required {
			return "", fmt.Errorf("Missing required parameter: '%s.content'.", where)
		}
		return "", nil
	case string:
		return c, nil
	case []any:
		var parts []string
		for j, e := range c {
			p, _ := e.(map[string]any)
			if p["type"] != "text" {
				return "", fmt.Errorf("Invalid '%s.content[%d].type': expected 'text', got %s", where, j, jsonText(p["type"]))
			}
			text, ok := p["text"].(string)
			if !ok {
				return "", fmt.Errorf("Missing required parameter: '%s.content[%d].text'.", where, j)
			}
			parts = append(parts, text)
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", fmt.Errorf("Invalid '%s.content': expected a string or an array of content parts", where)
}

// toolCalls checks the tool_calls of assistant message i and returns their ids.
func toolCalls(v any, i int) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	calls, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("Invalid 'messages[%d].tool_calls': expected an array", i)
	}
	var ids []string
	for j, e := range calls {
		where := fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)
		c, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("Invalid '%s': expected an object", where)
		}
		id, _ := c["id"].(string)
		if id == "" {
			return nil, fmt.Errorf("Missing required parameter: '%s.id'.", where)
		}
		if slices.Contains(ids, id) {
			return nil, fmt.Errorf("Invalid '%s.id': duplicate tool call id %q", where, id)
		}
		if c["type"] != "function" {
			return nil, fmt.Errorf("Invalid '%s.type': expected 'function', got %s", where, jsonText(c["type"]))
		}
		fn, ok := c["function"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("Missing required parameter: '%s.function'.", where)
		}
		if name, _ := fn["name"].(string); !toolNameRE().MatchString(name) {
			return nil, fmt.Errorf("Invalid '%s.function.name': %s", where, jsonText(fn["name"]))
		}
		args, ok := fn["arguments"].(string)
		if !ok {
			return nil, fmt.Errorf("Invalid '%s.function.arguments': expected a string of JSON", where)
		}
		if !json.Valid([]byte(args)) {
			return nil, fmt.Errorf("Invalid '%s.function.arguments': not valid JSON: %q", where, args)
		}
		ids = append(ids, id)
	}
	return ids, nil
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
