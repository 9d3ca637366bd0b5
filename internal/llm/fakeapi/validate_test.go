package fakeapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
)

// body builds a request around messages (and extra top-level fields).
func body(messages string, extra ...string) string {
	fields := append([]string{`"model":"claude-test"`, `"max_tokens":100`}, extra...)
	if messages != "" {
		fields = append(fields, `"messages":`+messages)
	}
	return "{" + strings.Join(fields, ",") + "}"
}

const (
	userHi      = `{"role":"user","content":"hi"}`
	assistantTU = `{"role":"assistant","content":[{"type":"text","text":"calling"},{"type":"tool_use","id":"t1","name":"bash","input":{"command":"ls"}}]}`
)

func cc(n int) string {
	var blocks []string
	for i := range n {
		blocks = append(blocks, fmt.Sprintf(`{"type":"text","text":"s%d","cache_control":{"type":"ephemeral"}}`, i))
	}
	return `"system":[` + strings.Join(blocks, ",") + `]`
}

func TestValidation(t *testing.T) {
	tests := []struct {
		name, body, want string // want: "" for accepted, else a substring of the 400 message
	}{
		{"valid string content", body(`[` + userHi + `]`), ""},
		{"valid tool round trip", body(`[` + userHi + `,` + assistantTU + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"out"},{"type":"text","text":"more"}]}]`), ""},
		{"valid every block type", body(`[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}},{"type":"document","source":{"type":"text","media_type":"text/plain","data":"d"}}]},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"redacted_thinking","data":"x"},{"type":"text","text":"b"}]},` + userHi + `]`), ""},
		{"valid server tool", body(`[`+userHi+`]`, `"tools":[{"type":"bash_20250124","name":"bash"},{"name":"read_file","input_schema":{"type":"object"}}]`), ""},
		{"valid four cache_control", body(`[`+userHi+`]`, cc(4)), ""},
		{"valid bearer fields ignored", body(`[`+userHi+`]`, `"temperature":0.5`, `"metadata":{"user_id":"u"}`, `"stream":false`), ""},

		{"not JSON", `{"model":`, "not valid JSON"},
		{"trailing data", body(`[`+userHi+`]`) + `{}`, "not valid JSON"},
		{"not an object", `[1,2]`, "must be a JSON object"},
		{"no model", `{"max_tokens":1,"messages":[` + userHi + `]}`, "model: Field required"},
		{"empty model", `{"model":"","max_tokens":1,"messages":[` + userHi + `]}`, "model: must be a non-empty string"},
		{"model not string", `{"model":3,"max_tokens":1,"messages":[` + userHi + `]}`, "model: Input should be a valid string"},
		{"no max_tokens", `{"model":"m","messages":[` + userHi + `]}`, "max_tokens: Field required"},
		{"max_tokens zero", `{"model":"m","max_tokens":0,"messages":[` + userHi + `]}`, "max_tokens: must be greater than or equal to 1"},
		{"max_tokens fraction", `{"model":"m","max_tokens":1.5,"messages":[` + userHi + `]}`, "max_tokens: Input should be a valid integer"},
		{"max_tokens string", `{"model":"m","max_tokens":"9","messages":[` + userHi + `]}`, "max_tokens: Input should be a valid integer"},
		{"stream not bool", body(`[`+userHi+`]`, `"stream":"yes"`), "stream: Input should be a valid boolean"},
		{"no messages", body(""), "messages: Field required"},
		{"empty messages", body(`[]`), "messages: at least one message is required"},
		{"messages not list", body(`{}`), "messages: Input should be a valid list"},
		{"bad role", body(`[{"role":"system","content":"x"}]`), "messages.0.role: Input should be 'user' or 'assistant'"},
		{"first is assistant", body(`[{"role":"assistant","content":"x"},` + userHi + `]`), `first message must use the "user" role`},
		{"roles do not alternate", body(`[` + userHi + `,` + userHi + `]`), `roles must alternate between "user" and "assistant", but found multiple "user" roles in a row`},
		{"ends with assistant", body(`[` + userHi + `,{"role":"assistant","content":"pre"}]`), `must end with a "user" message`},
		{"empty string content", body(`[{"role":"user","content":""}]`), "messages.0: all messages must have non-empty content"},
		{"empty block list", body(`[{"role":"user","content":[]}]`), "messages.0: all messages must have non-empty content"},
		{"content missing", body(`[{"role":"user"}]`), "messages.0.content: Field required"},
		{"content number", body(`[{"role":"user","content":7}]`), "messages.0.content: Input should be a valid string or list"},
		{"unknown block type", body(`[{"role":"user","content":[{"type":"video"}]}]`), `messages.0.content.0.type: unknown content block type "video"`},
		{"empty text block", body(`[{"role":"user","content":[{"type":"text","text":""}]}]`), "messages.0.content.0.text: text content blocks must contain non-whitespace text"},
		{"blank text block", body(`[{"role":"user","content":[{"type":"text","text":" \n"}]}]`), "non-whitespace text"},
		{"image without source", body(`[{"role":"user","content":[{"type":"image"}]}]`), "messages.0.content.0.source: Field required"},
		{"tool_use in user message", body(`[{"role":"user","content":[{"type":"tool_use","id":"t","name":"x","input":{}}]}]`), "tool_use blocks are only allowed in assistant messages"},
		{"thinking in user message", body(`[{"role":"user","content":[{"type":"thinking","thinking":"t","signature":"s"}]}]`), "thinking blocks are only allowed in assistant messages"},
		{"tool_use without id", body(`[` + userHi + `,{"role":"assistant","content":[{"type":"tool_use","name":"x","input":{}}]},` + userHi + `]`), "messages.1.content.0.id: Field required"},
		{"tool_use bad name", body(`[` + userHi + `,{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"a b","input":{}}]},` + userHi + `]`), "messages.1.content.0.name: String should match pattern"},
		{"tool_use input not object", body(`[` + userHi + `,{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"x","input":[]}]},` + userHi + `]`), "messages.1.content.0.input: Input should be a valid dictionary"},
		{"tool_result in assistant", body(`[` + userHi + `,{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"t1"}]},` + userHi + `]`), "tool_result blocks are only allowed in user messages"},
		{"tool_result after text", body(`[` + userHi + `,` + assistantTU + `,{"role":"user","content":[{"type":"text","text":"x"},{"type":"tool_result","tool_use_id":"t1"}]}]`), "messages.2.content.1: tool_result blocks must come before any other content"},
		{"tool_result unknown id", body(`[` + userHi + `,` + assistantTU + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1"},{"type":"tool_result","tool_use_id":"t9"}]}]`), "messages.2.content.1: unexpected tool_use_id found in tool_result blocks: t9"},
		{"tool_result with no tool_use", body(`[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x"}]}]`), "unexpected tool_use_id found in tool_result blocks: t1"},
		{"tool_result answers older turn", body(`[` + userHi + `,` + assistantTU + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1"}]},{"role":"assistant","content":"ok"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1"}]}]`), "messages.4.content.0: unexpected tool_use_id"},
		{"tool_use unanswered", body(`[` + userHi + `,` + assistantTU + `,{"role":"user","content":"no result"}]`), "messages.1: tool_use ids were found without tool_result blocks immediately after: t1"},
		{"duplicate tool_result", body(`[` + userHi + `,` + assistantTU + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1"},{"type":"tool_result","tool_use_id":"t1"}]}]`), "duplicate tool_result"},
		{"tool_result without id", body(`[` + userHi + `,` + assistantTU + `,{"role":"user","content":[{"type":"tool_result"}]}]`), "tool_use_id: Field required"},
		{"tool_result bad inner block", body(`[` + userHi + `,` + assistantTU + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"tool_use"}]}]}]`), "tool_result content blocks must be text, image or document"},
		{"tool_result image of a refused type", body(`[` + userHi + `,` + assistantTU + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"image","source":{"type":"base64","media_type":"image/bmp","data":"Qk0="}}]}]}]`), "source.media_type: Input should be"},
		{"tool_result image not base64", body(`[` + userHi + `,` + assistantTU + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"%%%"}}]}]}]`), "source.data: invalid base64"},
		{"tool_result empty inner text", body(`[` + userHi + `,` + assistantTU + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":""}]}]}]`), "non-whitespace text"},
		{"tool name bad", body(`[`+userHi+`]`, `"tools":[{"name":"has space","input_schema":{"type":"object"}}]`), "tools.0.name: String should match pattern"},
		{"tool name too long", body(`[`+userHi+`]`, `"tools":[{"name":"`+strings.Repeat("a", 65)+`","input_schema":{"type":"object"}}]`), "tools.0.name: String should match pattern"},
		{"tool names repeat", body(`[`+userHi+`]`, `"tools":[{"name":"x","input_schema":{"type":"object"}},{"name":"x","input_schema":{"type":"object"}}]`), "tools: Tool names must be unique"},
		{"tool without schema", body(`[`+userHi+`]`, `"tools":[{"name":"x"}]`), "tools.0.input_schema: Field required"},
		{"tool schema not object type", body(`[`+userHi+`]`, `"tools":[{"name":"x","input_schema":{"type":"array"}}]`), "tools.0.input_schema.type: Input should be 'object'"},
		{"tools not list", body(`[`+userHi+`]`, `"tools":{}`), "tools: Input should be a valid list"},
		{"system number", body(`[`+userHi+`]`, `"system":5`), "system: Input should be a valid string or a list of text blocks"},
		{"system non-text block", body(`[`+userHi+`]`, `"system":[{"type":"image"}]`), "system.0.type: Input should be 'text'"},
		{"system empty text", body(`[`+userHi+`]`, `"system":[{"type":"text","text":""}]`), "system.0.text: text content blocks must contain non-whitespace text"},
		{"five cache_control", body(`[`+userHi+`]`, cc(5)), "A maximum of 4 blocks with cache_control may be provided. Found 5."},
		{"cache_control across request", body(`[{"role":"user","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]}]`, cc(2), `"tools":[{"name":"a","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}},{"name":"b","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}]`), "Found 5."},
	}
	srv := start(t, `rules: [{times: 0, reply: [{text: fine}]}]`, fakeapi.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, hdr, data := post(t, srv, "/v1/messages", apiHeaders, tt.body)
			if tt.want == "" {
				if status != 200 {
					t.Fatalf("status %d: %s", status, data)
				}
				return
			}
			if status != 400 {
				t.Fatalf("status %d, want 400: %s", status, data)
			}
			e := decodeError(t, data)
			if e.Type != "error" || e.Error.Type != "invalid_request_error" || !strings.HasPrefix(e.RequestID, "req_fake_") || hdr.Get("request-id") != e.RequestID {
				t.Errorf("error shape: %s (request-id header %q)", data, hdr.Get("request-id"))
			}
			if !strings.Contains(e.Error.Message, tt.want) {
				t.Errorf("message %q does not contain %q", e.Error.Message, tt.want)
			}
		})
	}
}

type apiError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

func decodeError(t *testing.T, data []byte) apiError {
	t.Helper()
	var e apiError
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("error body %s: %v", data, err)
	}
	return e
}

func TestHeadersAndRoutes(t *testing.T) {
	srv := start(t, ``, fakeapi.Options{})
	ok := body(`[` + userHi + `]`)
	tests := []struct {
		name, path string
		hdr        map[string]string
		status     int
		errType    string
		msg        string
	}{
		{"no key", "/v1/messages", map[string]string{"anthropic-version": "2023-06-01"}, 401, "authentication_error", "x-api-key"},
		{"empty bearer", "/v1/messages", map[string]string{"authorization": "Bearer ", "anthropic-version": "2023-06-01"}, 401, "authentication_error", "x-api-key"},
		{"bearer", "/v1/messages", map[string]string{"authorization": "Bearer t", "anthropic-version": "2023-06-01"}, 200, "", ""},
		{"no version", "/v1/messages", map[string]string{"x-api-key": "k"}, 400, "invalid_request_error", "anthropic-version"},
		{"other path", "/v1/complete", apiHeaders, 404, "not_found_error", "/v1/complete"},
		{"models", "/v1/models", apiHeaders, 404, "not_found_error", "Not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, hdr, data := post(t, srv, tt.path, tt.hdr, ok)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, data)
			}
			if tt.errType == "" {
				return
			}
			e := decodeError(t, data)
			if e.Error.Type != tt.errType || !strings.Contains(e.Error.Message, tt.msg) || hdr.Get("request-id") == "" {
				t.Errorf("got %s", data)
			}
		})
	}
	// Only POSTs to /v1/messages are calls.
	if n := len(srv.Requests()); n != 4 {
		t.Errorf("%d calls recorded, want 4", n)
	}
}

// FuzzValidate feeds raw bodies to the validator, which must never panic.
func FuzzValidate(f *testing.F) {
	for _, s := range []string{
		body(`[` + userHi + `]`),
		body(`[` + userHi + `,` + assistantTU + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"x"}]}]}]`),
		body(`[{"role":"user","content":[{"type":"tool_result"}]}]`, `"tools":[{"name":"x"}]`, `"system":[{"type":"text"}]`),
		body(`[{"role":"user","content":[{"type":"text","text":null},{"type":"image","source":1}]}]`, cc(5)),
		`{"model":1,"max_tokens":1e400}`, `null`, `[]`, ``, `{"messages":[null,1,"x"]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = fakeapi.Validate(data)
	})
}
