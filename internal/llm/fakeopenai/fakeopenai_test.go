package fakeopenai_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/troupe-dev/troupe/internal/llm/fakeopenai"
	"github.com/troupe-dev/troupe/internal/llm/fakeopenai/fakeopenaitest"
	"github.com/troupe-dev/troupe/internal/llm/fakescript"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const leadSystem = "You are 'team-lead', a coding agent run by troupe."

// post sends body to the chat completions endpoint with a fresh client whose
// idle connections are closed when the test ends.
func post(t *testing.T, srv *fakeopenai.Server, body string, hdr map[string]string) (*http.Response, []byte, error) {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	req, err := http.NewRequest(http.MethodPost, srv.URL()+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("content-type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp, data, err
}

func chatBody(stream bool, msgs ...string) string {
	all := append([]string{`{"role":"system","content":"` + leadSystem + `"}`}, msgs...)
	s := `{"model":"local-model","messages":[` + strings.Join(all, ",") + `]`
	if stream {
		s += `,"stream":true,"stream_options":{"include_usage":true}`
	}
	return s + `}`
}

const user = `{"role":"user","content":"list the files"}`

// chunk is what the tests read of a chat.completion.chunk.
type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Choices []struct {
		Delta struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

// parseSSE splits a stream into its chunks and reports whether [DONE] ended it.
func parseSSE(t *testing.T, data []byte) (chunks []chunk, done bool) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		payload, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line %q is not a data line", line)
		}
		if done {
			t.Fatalf("data after [DONE]: %q", line)
		}
		if payload == "[DONE]" {
			done = true
			continue
		}
		var c chunk
		if err := json.Unmarshal([]byte(payload), &c); err != nil {
			t.Fatalf("chunk %q: %v", payload, err)
		}
		chunks = append(chunks, c)
	}
	return chunks, done
}

const toolScript = `
rules:
  - agent: team-lead
    reply:
      - text: "I will list the files now."
      - tool_call: {name: bash, arguments: {command: "ls -la", note: "for ${agent}"}}
      - tool_call: {name: read_file, arguments: {path: "README.md"}}
    usage: {prompt_tokens: 120, completion_tokens: 30, cached_tokens: 100}
`

func TestStreamToolCalls(t *testing.T) {
	srv := fakeopenaitest.StartTest(t, toolScript)
	resp, data, err := post(t, srv, chatBody(true, user), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("content-type"), "text/event-stream") {
		t.Fatalf("status %d, content-type %q: %s", resp.StatusCode, resp.Header.Get("content-type"), data)
	}
	chunks, done := parseSSE(t, data)
	if !done {
		t.Fatal("stream did not end with [DONE]")
	}
	if len(chunks) == 0 || chunks[0].Choices[0].Delta.Role != "assistant" {
		t.Fatalf("first chunk does not give the role: %+v", chunks)
	}
	var text strings.Builder
	type call struct{ ID, Name, Args string }
	var calls []call
	pieces := map[int]int{}
	var finish []string
	usages := 0
	for i, c := range chunks {
		if c.Object != "chat.completion.chunk" || c.ID != "chatcmpl-fake-1" {
			t.Errorf("chunk %d: object %q id %q", i, c.Object, c.ID)
		}
		if c.Usage != nil {
			usages++
			if i != len(chunks)-1 || len(c.Choices) != 0 {
				t.Errorf("usage chunk %d of %d has %d choices", i, len(chunks), len(c.Choices))
			}
			got := [4]int{c.Usage.PromptTokens, c.Usage.CompletionTokens, c.Usage.TotalTokens, c.Usage.PromptTokensDetails.CachedTokens}
			if got != [4]int{120, 30, 150, 100} {
				t.Errorf("usage = %v", got)
			}
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				text.WriteString(*ch.Delta.Content)
			}
			for _, tc := range ch.Delta.ToolCalls {
				if tc.ID != "" {
					if tc.Index != len(calls) || tc.Type != "function" || tc.Function.Name == "" || tc.Function.Arguments != "" {
						t.Errorf("tool call head %+v", tc)
					}
					calls = append(calls, call{ID: tc.ID, Name: tc.Function.Name})
					continue
				}
				if tc.Function.Name != "" {
					t.Errorf("name repeated in an arguments delta: %+v", tc)
				}
				calls[tc.Index].Args += tc.Function.Arguments
				pieces[tc.Index]++
			}
			if ch.FinishReason != nil {
				finish = append(finish, *ch.FinishReason)
			}
		}
	}
	if text.String() != "I will list the files now." {
		t.Errorf("text = %q", text.String())
	}
	want := []call{
		{"call_fake_1_1", "bash", `{"command":"ls -la","note":"for team-lead"}`},
		{"call_fake_1_2", "read_file", `{"path":"README.md"}`},
	}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
	if pieces[0] < 3 || pieces[1] < 3 {
		t.Errorf("arguments came in %v pieces, want at least 3 each", pieces)
	}
	if diff := cmp.Diff([]string{"tool_calls"}, finish); diff != "" {
		t.Errorf("finish reasons (-want +got):\n%s", diff)
	}
	if usages != 1 {
		t.Errorf("%d usage chunks, want 1", usages)
	}
	recs := srv.Requests()
	if len(recs) != 1 || recs[0].Agent != "team-lead" || !recs[0].Stream || recs[0].Rule != 0 || recs[0].Status != 200 || recs[0].HasKey {
		t.Errorf("records = %+v", recs)
	}
}

func TestStreamWithoutUsage(t *testing.T) {
	srv := fakeopenaitest.StartTest(t, "rules:\n  - reply: [{text: hi}]\n")
	_, data, err := post(t, srv, `{"model":"m","stream":true,"messages":[`+user+`]}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	chunks, done := parseSSE(t, data)
	for _, c := range chunks {
		if c.Usage != nil {
			t.Errorf("usage sent without include_usage: %+v", c)
		}
	}
	if !done {
		t.Error("no [DONE]")
	}
}

func TestNonStreaming(t *testing.T) {
	srv := fakeopenaitest.StartTest(t, toolScript)
	resp, data, err := post(t, srv, chatBody(false, user), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"id": "chatcmpl-fake-1", "object": "chat.completion", "created": float64(1700000001), "model": "local-model",
		"choices": []any{map[string]any{
			"index": float64(0), "logprobs": nil, "finish_reason": "tool_calls",
			"message": map[string]any{
				"role": "assistant", "content": "I will list the files now.",
				"tool_calls": []any{
					map[string]any{"id": "call_fake_1_1", "type": "function", "function": map[string]any{"name": "bash", "arguments": `{"command":"ls -la","note":"for team-lead"}`}},
					map[string]any{"id": "call_fake_1_2", "type": "function", "function": map[string]any{"name": "read_file", "arguments": `{"path":"README.md"}`}},
				},
			},
		}},
		"usage": map[string]any{"prompt_tokens": float64(120), "completion_tokens": float64(30), "total_tokens": float64(150), "prompt_tokens_details": map[string]any{"cached_tokens": float64(100)}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("completion (-want +got):\n%s", diff)
	}
}

func TestRules(t *testing.T) {
	srv := fakeopenaitest.StartTest(t, `
model: scripted-model
rules:
  - agent: alice
    reply: [{text: "alice only"}]
  - regex: 'file (\w+)'
    reply: [{text: "saw ${1} on call ${call}"}]
  - contains: "exit code 0"
    times: 0
    reply: [{text: "tool went fine"}]
fallback:
  reply: [{text: "no idea, ${agent}"}]
`)
	ask := func(msgs ...string) string {
		t.Helper()
		_, data, err := post(t, srv, chatBody(false, msgs...), nil)
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Model   string `json:"model"`
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(data, &c); err != nil || len(c.Choices) != 1 {
			t.Fatalf("reply %s: %v", data, err)
		}
		if c.Model != "scripted-model" {
			t.Errorf("model = %q", c.Model)
		}
		return c.Choices[0].Message.Content
	}
	toolTurn := `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{}"}}]}`
	got := []string{
		ask(`{"role":"user","content":"open file main"}`),
		ask(`{"role":"user","content":"open file other"}`),
		ask(`{"role":"user","content":"go"}`, toolTurn, `{"role":"tool","tool_call_id":"c1","content":"exit code 0"}`),
		ask(`{"role":"user","content":[{"type":"text","text":"exit code 0"}]}`),
	}
	want := []string{"saw main on call 1", "no idea, team-lead", "tool went fine", "tool went fine"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replies (-want +got):\n%s", diff)
	}
	if n := srv.Unmatched(); n != 1 {
		t.Errorf("Unmatched = %d, want 1", n)
	}
}

func TestValidation(t *testing.T) {
	srv := fakeopenaitest.StartTest(t, "rules:\n  - times: 0\n    reply: [{text: ok}]\n")
	call := `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"a\":1}"}}]}`
	for _, tc := range []struct {
		name, body, want string
	}{
		{"ok", chatBody(false, user), ""},
		{"ok with tools", `{"model":"m","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"bash","parameters":{"type":"object"}}}]}`, ""},
		{"ok tool round", chatBody(false, user, call, `{"role":"tool","tool_call_id":"c1","content":"done"}`, `{"role":"user","content":"more"}`), ""},
		{"no model", `{"messages":[` + user + `]}`, "you must provide a model parameter"},
		{"no messages", `{"model":"m","messages":[]}`, "empty array"},
		{"bad role", chatBody(false, `{"role":"robot","content":"x"}`), "Invalid value: 'robot'"},
		{"unanswered call", chatBody(false, user, call, `{"role":"user","content":"next"}`), "did not have response messages: c1"},
		{"call answered at the end only", chatBody(false, user, call), "did not have response messages: c1"},
		{"stray tool message", chatBody(false, user, `{"role":"tool","tool_call_id":"c9","content":"x"}`), "must be a response to a preceeding message with 'tool_calls'"},
		{"answered twice", chatBody(false, user, call, `{"role":"tool","tool_call_id":"c1","content":"x"}`, `{"role":"tool","tool_call_id":"c1","content":"y"}`), "must be a response to a preceeding"},
		{"bad arguments", chatBody(false, user, `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{"}}]}`, `{"role":"tool","tool_call_id":"c1","content":"x"}`), "not valid JSON"},
		{"stream options without stream", `{"model":"m","messages":[` + user + `],"stream_options":{"include_usage":true}}`, "only allowed when 'stream' is enabled"},
		{"bad tool", `{"model":"m","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"bad name"}}]}`, "tools[0].function.name"},
		{"not json", `{"model":`, "could not parse the JSON body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, data, err := post(t, srv, tc.body, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if resp.StatusCode != 200 {
					t.Fatalf("status %d: %s", resp.StatusCode, data)
				}
				return
			}
			var e struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Code    *string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(data, &e); err != nil {
				t.Fatalf("error body %s: %v", data, err)
			}
			if resp.StatusCode != 400 || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, tc.want) {
				t.Errorf("status %d, error %+v; want 400 invalid_request_error containing %q", resp.StatusCode, e.Error, tc.want)
			}
		})
	}
}

func TestFaults(t *testing.T) {
	srv := fakeopenaitest.StartTest(t, `
faults:
  - {call: 1, kind: rate_limit, retry_after: 2.5}
  - {call: 2, kind: server_error}
  - {call: 3, kind: drop}
  - {call: 4, kind: cut}
rules:
  - times: 0
    reply: [{text: "one two three four five six"}]
`)
	resp, data, err := post(t, srv, chatBody(true, user), nil)
	if err != nil || resp.StatusCode != 429 || resp.Header.Get("retry-after") != "2.5" || !strings.Contains(string(data), `"code":"rate_limit_exceeded"`) {
		t.Errorf("rate_limit: %v %v %s", err, resp, data)
	}
	resp, data, err = post(t, srv, chatBody(true, user), nil)
	if err != nil || resp.StatusCode != 500 || !strings.Contains(string(data), `"type":"server_error"`) {
		t.Errorf("server_error: %v %v %s", err, resp, data)
	}
	if _, _, err = post(t, srv, chatBody(true, user), nil); err == nil {
		t.Error("drop: the call succeeded")
	}
	resp, data, _ = post(t, srv, chatBody(true, user), nil)
	if resp == nil || resp.StatusCode != 200 {
		t.Fatalf("cut: %v", resp)
	}
	if _, done := parseSSE(t, data); done || strings.Contains(string(data), "finish_reason\":\"stop") {
		t.Errorf("cut stream was complete: %s", data)
	}
	resp, data, err = post(t, srv, chatBody(true, user), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("after faults: %v %v", err, resp)
	}
	if _, done := parseSSE(t, data); !done {
		t.Error("call 5 was not complete")
	}
	var kinds []string
	for _, r := range srv.Requests() {
		kinds = append(kinds, r.Fault)
	}
	if diff := cmp.Diff([]string{"rate_limit", "server_error", "drop", "cut", ""}, kinds); diff != "" {
		t.Errorf("recorded faults (-want +got):\n%s", diff)
	}
}

func TestAPIKey(t *testing.T) {
	srv := fakeopenaitest.StartTestWith(t, "rules:\n  - times: 0\n    reply: [{text: ok}]\n", fakeopenai.Options{APIKey: "sk-right"})
	resp, data, err := post(t, srv, chatBody(false, user), nil)
	if err != nil || resp.StatusCode != 401 || !strings.Contains(string(data), "invalid_api_key") {
		t.Errorf("no key: %v %v %s", err, resp, data)
	}
	resp, _, err = post(t, srv, chatBody(false, user), map[string]string{"authorization": "Bearer sk-right"})
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("right key: %v %v", err, resp)
	}
	if recs := srv.Requests(); len(recs) != 2 || recs[0].HasKey || !recs[1].HasKey {
		t.Errorf("records = %+v", recs)
	}
}

func TestNotFound(t *testing.T) {
	srv := fakeopenaitest.StartTest(t, "rules: []\n")
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL() + "/models")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(data), `"code":"unknown_url"`) {
		t.Errorf("status %d: %s", resp.StatusCode, data)
	}
}

func TestParseScriptErrors(t *testing.T) {
	for _, tc := range []struct{ script, want string }{
		{"rules:\n  - reply: [{txt: hi}]\n", "field txt not found"},
		{"rules:\n  - reply: [{}]\n", "rule 0: reply part 0: has no kind"},
		{"rules:\n  - reply: [{text: a, tool_call: {name: x}}]\n", "has text and tool_call"},
		{"rules:\n  - reply: [{tool_call: {name: 'bad name'}}]\n", "tool_call name"},
		{"rules:\n  - finish_reason: done\n", "unknown finish_reason"},
		{"rules:\n  - usage: {prompt_tokens: 5, cached_tokens: 6}\n", "must not exceed prompt_tokens"},
		{"rules:\n  - times: -1\n", "times must be 0"},
		{"rules:\n  - regex: '('\n", "rule 0: regex"},
		{"faults:\n  - {call: 0, kind: drop}\n", "fault 0: call must be 1"},
		{"faults:\n  - {call: 1, kind: overloaded}\n", "unknown kind"},
		{"faults:\n  - {call: 1, kind: drop}\n  - {call: 1, kind: cut}\n", "fault 1: call 1 already"},
		{"agent_pattern: 'no group'\n", "needs a capture group"},
		{"fallback: {agent: x}\n", "fallback: takes only"},
	} {
		_, err := fakeopenai.ParseScript([]byte(tc.script))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseScript(%q) = %v, want an error containing %q", tc.script, err, tc.want)
		}
	}
	if _, err := fakeopenai.ParseScript([]byte("{\n\t\"rules\": [{\"reply\": [{\"text\": \"json works\"}]}]\n}")); err != nil {
		t.Errorf("JSON script: %v", err)
	}
}

// With an IDPrefix, completion and tool call ids carry it, so that two
// servers answering one conversation never repeat an id.
func TestIDPrefix(t *testing.T) {
	ids := func(prefix string) []string {
		srv := fakeopenaitest.StartTestWith(t, toolScript, fakeopenai.Options{IDPrefix: prefix})
		_, data, err := post(t, srv, chatBody(false, user), nil)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			ID      string
			Choices []struct {
				Message struct {
					ToolCalls []struct{ ID string } `json:"tool_calls"`
				}
			}
		}
		if err := json.Unmarshal(data, &got); err != nil || len(got.Choices) != 1 {
			t.Fatalf("completion %s: %v", data, err)
		}
		out := []string{got.ID}
		for _, c := range got.Choices[0].Message.ToolCalls {
			out = append(out, c.ID)
		}
		return out
	}
	a, b := fakescript.UniquePrefix(), fakescript.UniquePrefix()
	if a == b {
		t.Fatalf("UniquePrefix gave %s twice", a)
	}
	want := []string{"chatcmpl-fake-" + a + "1", "call_fake_" + a + "1_1", "call_fake_" + a + "1_2"}
	if diff := cmp.Diff(want, ids(a)); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
	if first, second := ids(a), ids(b); cmp.Equal(first, second) {
		t.Errorf("two prefixes gave the same ids %v", first)
	}
}
