package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/fakeopenai"
	"github.com/troupe-dev/troupe/internal/llm/fakeopenai/fakeopenaitest"
	"github.com/troupe-dev/troupe/internal/llm/openai"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sleeps records the backoff waits instead of waiting.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func newProvider(t *testing.T, baseURL string, mod func(*openai.Config)) (*openai.Provider, *sleeps) {
	t.Helper()
	sl := &sleeps{}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cfg := openai.Config{BaseURL: baseURL, Model: "local-model", HTTPClient: &http.Client{Transport: tr}, Sleep: sl.sleep, Jitter: func() float64 { return 0.5 }}
	if mod != nil {
		mod(&cfg)
	}
	p, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, sl
}

var tools = []llm.ToolSpec{
	{Name: "bash", Description: "run a command", InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)},
	{Name: "read_file", Description: "read a file", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
}

func userReq(text string) *llm.Request {
	return &llm.Request{
		System:   "You are 'team-lead', a coding agent run by troupe.",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(text)}}},
		Tools:    tools,
		Agent:    "team-lead",
	}
}

// collect runs a call and sorts its events.
type collected struct {
	text    strings.Builder
	starts  []string
	retries []llm.Event
}

func call(t *testing.T, p llm.Provider, req *llm.Request) (*llm.Response, *collected, error) {
	t.Helper()
	c := &collected{}
	resp, err := llm.Collect(p.Stream(context.Background(), req), func(ev llm.Event) {
		switch ev.Type {
		case llm.EventText:
			c.text.WriteString(ev.Text)
		case llm.EventToolStart:
			c.starts = append(c.starts, ev.Name+" "+ev.ID)
		case llm.EventRetry:
			c.retries = append(c.retries, ev)
		}
	})
	return resp, c, err
}

const conversation = `
rules:
  - agent: team-lead
    contains: "list the files"
    reply:
      - text: "I will look around first."
      - tool_call: {name: bash, arguments: {command: "ls -la", note: "naïve ${agent}"}}
      - tool_call: {name: read_file, arguments: {path: "README.md"}}
    usage: {prompt_tokens: 120, completion_tokens: 30, cached_tokens: 100}
  - agent: team-lead
    regex: 'total (\d+)'
    reply:
      - text: "There are ${1} entries and no README."
    usage: {prompt_tokens: 200, completion_tokens: 12, cached_tokens: 150}
`

// TestToolConversation runs a two-call tool conversation, streamed, and
// checks what the provider reports and what went over the wire.
func TestToolConversation(t *testing.T) {
	srv := fakeopenaitest.StartTest(t, conversation)
	p, _ := newProvider(t, srv.URL(), nil)
	req := userReq("please list the files")
	resp, got, err := call(t, p, req)
	if err != nil {
		t.Fatal(err)
	}
	if s := got.text.String(); s != "I will look around first." {
		t.Errorf("streamed text = %q", s)
	}
	if diff := cmp.Diff([]string{"bash call_fake_1_1", "read_file call_fake_1_2"}, got.starts); diff != "" {
		t.Errorf("tool starts (-want +got):\n%s", diff)
	}
	want := &llm.Response{
		ID:    "chatcmpl-fake-1",
		Model: "local-model",
		Message: llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{
			llm.TextBlock("I will look around first."),
			{Type: llm.BlockToolUse, ID: "call_fake_1_1", Name: "bash", Input: json.RawMessage(`{"command":"ls -la","note":"naïve team-lead"}`)},
			{Type: llm.BlockToolUse, ID: "call_fake_1_2", Name: "read_file", Input: json.RawMessage(`{"path":"README.md"}`)},
		}},
		StopReason: llm.StopToolUse,
		Usage:      llm.Usage{InputTokens: 20, OutputTokens: 30, CacheReadTokens: 100},
	}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}

	// The second call answers both tools (one failed) and adds a note in
	// the same user turn; a thinking block in the history is dropped.
	resp.Message.Content = append([]llm.Block{{Type: llm.BlockThinking, Thinking: "hmm", Signature: "sig"}}, resp.Message.Content...)
	req.Messages = append(req.Messages, resp.Message, llm.Message{Role: llm.RoleUser, Content: []llm.Block{
		llm.TextBlock("(note: be brief)"),
		llm.ToolResultBlock("call_fake_1_1", "total 42\nfoo", false),
		llm.ToolResultBlock("call_fake_1_2", "no such file", true),
	}})
	resp2, got2, err := call(t, p, req)
	if err != nil {
		t.Fatal(err)
	}
	if s := got2.text.String(); s != "There are 42 entries and no README." || resp2.Message.Text() != s {
		t.Errorf("second reply: streamed %q, message %q", s, resp2.Message.Text())
	}
	if resp2.StopReason != llm.StopEndTurn || len(got2.starts) != 0 {
		t.Errorf("second reply: stop %q, tool starts %v", resp2.StopReason, got2.starts)
	}

	recs := srv.Requests()
	if len(recs) != 2 {
		t.Fatalf("%d requests, want 2", len(recs))
	}
	var body map[string]any
	if err := json.Unmarshal(recs[1].Body, &body); err != nil {
		t.Fatal(err)
	}
	wantBody := map[string]any{
		"model":          "local-model",
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true},
		"messages": []any{
			map[string]any{"role": "system", "content": "You are 'team-lead', a coding agent run by troupe."},
			map[string]any{"role": "user", "content": "please list the files"},
			map[string]any{"role": "assistant", "content": "I will look around first.", "tool_calls": []any{
				map[string]any{"id": "call_fake_1_1", "type": "function", "function": map[string]any{"name": "bash", "arguments": `{"command":"ls -la","note":"naïve team-lead"}`}},
				map[string]any{"id": "call_fake_1_2", "type": "function", "function": map[string]any{"name": "read_file", "arguments": `{"path":"README.md"}`}},
			}},
			map[string]any{"role": "tool", "tool_call_id": "call_fake_1_1", "content": "total 42\nfoo"},
			map[string]any{"role": "tool", "tool_call_id": "call_fake_1_2", "content": "Error: no such file"},
			map[string]any{"role": "user", "content": "(note: be brief)"},
		},
		"tools": []any{
			map[string]any{"type": "function", "function": map[string]any{"name": "bash", "description": "run a command", "parameters": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}, "required": []any{"command"}}}},
			map[string]any{"type": "function", "function": map[string]any{"name": "read_file", "description": "read a file", "parameters": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}}},
		},
	}
	if diff := cmp.Diff(wantBody, body); diff != "" {
		t.Errorf("second request body (-want +got):\n%s", diff)
	}
	if recs[0].HasKey || recs[1].HasKey {
		t.Error("a bearer token was sent though no key was configured")
	}
}

// TestUsageTotals sums the usage of a run and compares it with what the
// fake reported on the wire, where prompt_tokens includes the cached ones.
func TestUsageTotals(t *testing.T) {
	srv := fakeopenaitest.StartTest(t, `
rules:
  - reply: [{text: "one"}]
    usage: {prompt_tokens: 1000, completion_tokens: 7, cached_tokens: 800}
  - reply: [{tool_call: {name: bash, arguments: {command: ls}}}]
    usage: {prompt_tokens: 1200, completion_tokens: 15}
  - reply: [{text: "three"}]
    usage: {prompt_tokens: 1300, completion_tokens: 3, cached_tokens: 1300}
`)
	p, _ := newProvider(t, srv.URL(), nil)
	var total llm.Usage
	for i := range 3 {
		resp, _, err := call(t, p, userReq(fmt.Sprintf("question %d", i)))
		if err != nil {
			t.Fatal(err)
		}
		total.Add(resp.Usage)
	}
	want := llm.Usage{InputTokens: 200 + 1200 + 0, OutputTokens: 7 + 15 + 3, CacheReadTokens: 800 + 1300}
	if diff := cmp.Diff(want, total); diff != "" {
		t.Errorf("totals (-want +got):\n%s", diff)
	}
	if got, prompt := total.ContextTokens(), int64(1000+1200+1300); got != prompt {
		t.Errorf("ContextTokens = %d, want the fake's prompt_tokens %d", got, prompt)
	}
}

// TestFaultsRetried injects each fault kind on the first call and checks the
// call is retried and completes, with the right wait.
func TestFaultsRetried(t *testing.T) {
	for _, tc := range []struct {
		fault string
		wait  time.Duration
	}{
		{"{call: 1, kind: rate_limit, retry_after: 7}", 7 * time.Second},
		{"{call: 1, kind: server_error}", 375 * time.Millisecond}, // base 500ms, jitter 0.5 → 3/4
		{"{call: 1, kind: drop}", 375 * time.Millisecond},
		{"{call: 1, kind: cut}", 375 * time.Millisecond},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			srv := fakeopenaitest.StartTest(t, "faults:\n  - "+tc.fault+"\nrules:\n  - reply: [{text: recovered here}]\n")
			p, sl := newProvider(t, srv.URL(), nil)
			resp, got, err := call(t, p, userReq("hi"))
			if err != nil {
				t.Fatal(err)
			}
			if s := resp.Message.Text(); s != "recovered here" {
				t.Errorf("text = %q", s)
			}
			if len(got.retries) != 1 || got.retries[0].Attempt != 1 || got.retries[0].Delay != tc.wait.Milliseconds() {
				t.Fatalf("retry events = %+v", got.retries)
			}
			if diff := cmp.Diff([]time.Duration{tc.wait}, sl.d); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
			if n := len(srv.Requests()); n != 2 {
				t.Errorf("requests = %d, want 2", n)
			}
		})
	}
}

func TestRetriesExhausted(t *testing.T) {
	srv := fakeopenaitest.StartTest(t, `
faults:
  - {call: 1, kind: server_error}
  - {call: 2, kind: server_error}
  - {call: 3, kind: server_error}
rules:
  - reply: [{text: never}]
`)
	p, sl := newProvider(t, srv.URL(), func(c *openai.Config) { c.MaxRetries = 2 })
	_, _, err := call(t, p, userReq("hi"))
	if !errors.Is(err, llm.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), "server_error") || !strings.Contains(err.Error(), "3 attempts") {
		t.Errorf("err = %v", err)
	}
	if diff := cmp.Diff([]time.Duration{375 * time.Millisecond, 750 * time.Millisecond}, sl.d); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
}

// TestStreamWithoutDone serves a stream that has its finish_reason and usage
// but breaks off before [DONE]: the provider retries it.
func TestStreamWithoutDone(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		w.Header().Set("content-type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"id\":\"c%d\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"call %d\"},\"finish_reason\":null}]}\n\n", n, n)
		fmt.Fprintf(w, "data: {\"id\":\"c%d\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n", n)
		fmt.Fprintf(w, "data: {\"id\":\"c%d\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7}}\n\n", n)
		if n > 1 {
			fmt.Fprint(w, "data: [DONE]\n\n")
		}
	}))
	defer srv.Close()
	p, sl := newProvider(t, srv.URL+"/v1", nil)
	resp, got, err := call(t, p, userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.ID != "c2" || resp.Message.Text() != "call 2" || len(sl.d) != 1 {
		t.Errorf("resp %+v after waits %v", resp, sl.d)
	}
	if len(got.retries) != 1 || !strings.Contains(got.retries[0].Err.Error(), "[DONE]") {
		t.Errorf("retries = %+v", got.retries)
	}
	if resp.Usage != (llm.Usage{InputTokens: 5, OutputTokens: 2}) {
		t.Errorf("usage = %+v", resp.Usage)
	}
}

func TestInvalidRequestNotRetried(t *testing.T) {
	srv := fakeopenaitest.StartTest(t, "rules:\n  - reply: [{text: never}]\n")
	p, sl := newProvider(t, srv.URL(), nil)
	req := userReq("hi")
	req.Tools = append(req.Tools, llm.ToolSpec{Name: "bad name!", InputSchema: json.RawMessage(`{"type":"object"}`)})
	_, _, err := call(t, p, req)
	if !errors.Is(err, llm.ErrInvalidRequest) {
		t.Fatalf("err = %v, want ErrInvalidRequest", err)
	}
	var ae *openai.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Type != "invalid_request_error" || !strings.Contains(ae.Message, "tools[2].function.name") {
		t.Errorf("err = %v", err)
	}
	if len(sl.d) != 0 || len(srv.Requests()) != 1 {
		t.Errorf("retried: waits %v, requests %d", sl.d, len(srv.Requests()))
	}
}

func TestAPIKey(t *testing.T) {
	srv := fakeopenaitest.StartTestWith(t, "rules:\n  - times: 0\n    reply: [{text: ok}]\n", fakeopenai.Options{APIKey: "sk-right"})
	p, sl := newProvider(t, srv.URL(), func(c *openai.Config) { c.APIKey = "sk-wrong" })
	_, _, err := call(t, p, userReq("hi"))
	if !errors.Is(err, llm.ErrAuth) || len(sl.d) != 0 {
		t.Fatalf("wrong key: err = %v, waits %v", err, sl.d)
	}
	if strings.Contains(err.Error(), "sk-wrong") {
		t.Errorf("the key leaked into the error: %v", err)
	}
	p, _ = newProvider(t, srv.URL(), func(c *openai.Config) { c.APIKey = "sk-right" })
	if _, _, err := call(t, p, userReq("hi")); err != nil {
		t.Fatalf("right key: %v", err)
	}
	for _, r := range srv.Requests() {
		if strings.Contains(string(r.Body), "sk-") {
			t.Error("the key leaked into a request body")
		}
	}
}

func TestRefusedLocally(t *testing.T) {
	srv := fakeopenaitest.StartTest(t, "rules:\n  - reply: [{text: never}]\n")
	for name, mod := range map[string]func(*llm.Request, *openai.Config){
		"no model": func(r *llm.Request, c *openai.Config) { c.Model = "" },
		"trailing assistant": func(r *llm.Request, c *openai.Config) {
			r.Messages = append(r.Messages, llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock("x")}})
		},
		"bad schema": func(r *llm.Request, c *openai.Config) { r.Tools[0].InputSchema = json.RawMessage(`{`) },
	} {
		t.Run(name, func(t *testing.T) {
			req := userReq("hi")
			req.Tools = append([]llm.ToolSpec(nil), tools...)
			var cfgMod func(*openai.Config)
			cfgMod = func(c *openai.Config) { mod(req, c) }
			p, _ := newProvider(t, srv.URL(), cfgMod)
			if _, _, err := call(t, p, req); err == nil {
				t.Fatal("call succeeded")
			} else if name != "bad schema" && !errors.Is(err, llm.ErrInvalidRequest) {
				t.Fatalf("err = %v, want ErrInvalidRequest", err)
			}
		})
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d malformed requests were sent", n)
	}
}

// cancelOnSend cancels a context as soon as a request is on its way.
type cancelOnSend struct {
	cancel context.CancelFunc
	next   http.RoundTripper
}

func (c *cancelOnSend) RoundTrip(r *http.Request) (*http.Response, error) {
	c.cancel()
	return c.next.RoundTrip(r)
}

func TestCancellation(t *testing.T) {
	srv := fakeopenaitest.StartTest(t, "rules:\n  - latency: 1h\n    reply: [{text: late}]\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	p, sl := newProvider(t, srv.URL(), func(c *openai.Config) {
		c.HTTPClient = &http.Client{Transport: &cancelOnSend{cancel: cancel, next: tr}}
	})
	_, err := llm.Collect(p.Stream(ctx, userReq("hi")), nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if len(sl.d) != 0 {
		t.Errorf("a cancelled call was retried: %v", sl.d)
	}
}

func TestRequestTimeout(t *testing.T) {
	srv := fakeopenaitest.StartTest(t, "rules:\n  - latency: 1h\n    reply: [{text: late}]\n")
	p, _ := newProvider(t, srv.URL(), func(c *openai.Config) {
		c.RequestTimeout = 50 * time.Millisecond
		c.MaxRetries = -1
	})
	_, _, err := call(t, p, userReq("hi"))
	if !errors.Is(err, llm.ErrUnavailable) || !strings.Contains(err.Error(), "no complete reply within 50ms") {
		t.Fatalf("err = %v, want ErrUnavailable after the timeout", err)
	}
}

// TestConsumerStops checks a consumer may quit mid-stream.
func TestConsumerStops(t *testing.T) {
	srv := fakeopenaitest.StartTest(t, "rules:\n  - reply: [{text: one two three four five six seven}]\n")
	p, _ := newProvider(t, srv.URL(), nil)
	n := 0
	for ev, err := range p.Stream(context.Background(), userReq("hi")) {
		if err != nil || ev.Type != llm.EventText {
			t.Fatalf("first event %+v, %v", ev, err)
		}
		n++
		break
	}
	if n != 1 {
		t.Fatal("no event")
	}
}

// A reply past the cap (text and tool arguments counted together) ends the
// call with ErrReplyTooLarge and is not retried.
func TestReplyCap(t *testing.T) {
	long := strings.Repeat("word ", 2000)
	srv := fakeopenaitest.StartTest(t, "rules:\n  - times: 0\n    reply:\n      - text: \""+long+"\"\n      - tool_call: {name: bash, arguments: {command: \""+long+"\"}}\n")
	for _, tc := range []struct {
		max     int64
		wantErr bool
	}{{4096, true}, {15_000, true}, {1 << 20, false}, {0, false}} {
		p, sl := newProvider(t, srv.URL(), func(c *openai.Config) { c.MaxReplyBytes = tc.max })
		before := len(srv.Requests())
		resp, _, err := call(t, p, userReq("hi"))
		if !tc.wantErr {
			if err != nil || resp.Message.Text() != long || len(resp.Message.ToolUses()) != 1 {
				t.Errorf("cap %d: err %v, resp %+v", tc.max, err, resp)
			}
			continue
		}
		if !errors.Is(err, llm.ErrReplyTooLarge) {
			t.Errorf("cap %d: err = %v, want ErrReplyTooLarge", tc.max, err)
		}
		if len(sl.d) != 0 || len(srv.Requests())-before != 1 {
			t.Errorf("cap %d: retried: waits %v, requests %d", tc.max, sl.d, len(srv.Requests())-before)
		}
	}
}
