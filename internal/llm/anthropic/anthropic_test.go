package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/anthropic"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi/fakeapitest"
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

func newProvider(t *testing.T, srv *fakeapi.Server, mod func(*anthropic.Config)) (*anthropic.Provider, *sleeps) {
	t.Helper()
	sl := &sleeps{}
	cfg := anthropic.Config{APIKey: "sk-test-secret", BaseURL: srv.URL(), Sleep: sl.sleep, Jitter: func() float64 { return 0.5 }}
	if mod != nil {
		mod(&cfg)
	}
	p, err := anthropic.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeIdle(cfg.HTTPClient) })
	return p, sl
}

func closeIdle(c *http.Client) {
	if c != nil {
		c.CloseIdleConnections()
	}
	http.DefaultClient.CloseIdleConnections()
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
}

func userReq(text string) *llm.Request {
	return &llm.Request{
		System:   "You are 'team-lead', a coding agent run by troupe.",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(text)}}},
		Tools: []llm.ToolSpec{
			{Name: "bash", Description: "run", InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)},
			{Name: "read_file", Description: "read", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
		},
	}
}

const toolScript = `
rules:
  - agent: team-lead
    reply:
      - thinking: "let me think"
      - text: "I will list the files now."
      - tool_use: {name: bash, input: {command: "ls -la", note: "nested ${agent}"}}
    usage: {input_tokens: 120, output_tokens: 30, cache_read_input_tokens: 100, cache_creation_input_tokens: 20}
`

func TestStreamToolUse(t *testing.T) {
	srv := fakeapitest.StartTest(t, toolScript)
	p, _ := newProvider(t, srv, nil)
	var events []llm.Event
	resp, err := llm.Collect(p.Stream(context.Background(), userReq("list files")), func(ev llm.Event) { events = append(events, ev) })
	if err != nil {
		t.Fatal(err)
	}
	var text, thinking strings.Builder
	var starts []string
	for _, ev := range events {
		switch ev.Type {
		case llm.EventText:
			text.WriteString(ev.Text)
		case llm.EventThinking:
			thinking.WriteString(ev.Text)
		case llm.EventToolStart:
			starts = append(starts, ev.Name+" "+ev.ID)
		}
	}
	if got := text.String(); got != "I will list the files now." {
		t.Errorf("streamed text = %q", got)
	}
	if got := thinking.String(); got != "let me think" {
		t.Errorf("streamed thinking = %q", got)
	}
	if diff := cmp.Diff([]string{"bash toolu_fake_1_2"}, starts); diff != "" {
		t.Errorf("tool starts (-want +got):\n%s", diff)
	}
	if resp.StopReason != llm.StopToolUse {
		t.Errorf("stop reason = %q", resp.StopReason)
	}
	want := llm.Usage{InputTokens: 120, OutputTokens: 30, CacheReadTokens: 100, CacheWriteTokens: 20}
	if diff := cmp.Diff(want, resp.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	uses := resp.Message.ToolUses()
	if len(uses) != 1 || uses[0].Name != "bash" || uses[0].ID != "toolu_fake_1_2" {
		t.Fatalf("tool uses = %+v", uses)
	}
	var input map[string]string
	if err := json.Unmarshal(uses[0].Input, &input); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"command": "ls -la", "note": "nested team-lead"}, input); diff != "" {
		t.Errorf("tool input (-want +got):\n%s", diff)
	}
	if len(resp.Message.Content) != 3 || resp.Message.Content[0].Type != llm.BlockThinking || resp.Message.Content[0].Signature == "" {
		t.Errorf("content = %+v", resp.Message.Content)
	}
}

// TestCacheBreakpoints checks the stable prefix is marked: the last tool,
// the system prompt and the last block of the latest turn, and nothing else.
func TestCacheBreakpoints(t *testing.T) {
	srv := fakeapitest.StartTest(t, "rules:\n  - times: 0\n    reply: [{text: ok}]\n")
	p, _ := newProvider(t, srv, nil)
	req := userReq("first")
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock("answer")}},
		llm.Message{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("second"), llm.TextBlock("third")}})
	if _, err := llm.Collect(p.Stream(context.Background(), req), nil); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Tools    []map[string]any `json:"tools"`
		System   []map[string]any `json:"system"`
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(srv.Requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	var marked []string
	for _, tl := range body.Tools {
		if tl["cache_control"] != nil {
			marked = append(marked, "tool "+tl["name"].(string))
		}
	}
	for _, s := range body.System {
		if s["cache_control"] != nil {
			marked = append(marked, "system")
		}
	}
	for _, m := range body.Messages {
		for _, c := range m.Content {
			if c["cache_control"] != nil {
				marked = append(marked, m.Role+" "+c["text"].(string))
			}
		}
	}
	if diff := cmp.Diff([]string{"tool read_file", "system", "user first", "user third"}, marked); diff != "" {
		t.Errorf("cache breakpoints (-want +got):\n%s", diff)
	}
	if strings.Contains(string(srv.Requests()[0].Body), "sk-test-secret") {
		t.Error("the API key leaked into the request body")
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
		{"{call: 1, kind: overloaded}", 375 * time.Millisecond}, // base 500ms, jitter 0.5 → 3/4
		{"{call: 1, kind: server_error}", 375 * time.Millisecond},
		{"{call: 1, kind: drop}", 375 * time.Millisecond},
		{"{call: 1, kind: cut}", 375 * time.Millisecond},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			srv := fakeapitest.StartTest(t, "faults:\n  - "+tc.fault+"\nrules:\n  - reply: [{text: recovered}]\n")
			p, sl := newProvider(t, srv, nil)
			var retries []llm.Event
			resp, err := llm.Collect(p.Stream(context.Background(), userReq("hi")), func(ev llm.Event) {
				if ev.Type == llm.EventRetry {
					retries = append(retries, ev)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.Message.Text(); got != "recovered" {
				t.Errorf("text = %q", got)
			}
			if len(retries) != 1 || retries[0].Attempt != 1 {
				t.Fatalf("retry events = %+v", retries)
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
	srv := fakeapitest.StartTest(t, `
faults:
  - {call: 1, kind: overloaded}
  - {call: 2, kind: overloaded}
  - {call: 3, kind: overloaded}
rules:
  - reply: [{text: never}]
`)
	p, sl := newProvider(t, srv, func(c *anthropic.Config) { c.MaxRetries = 2 })
	_, err := llm.Collect(p.Stream(context.Background(), userReq("hi")), nil)
	if !errors.Is(err, llm.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), "overloaded_error") || !strings.Contains(err.Error(), "3 attempts") {
		t.Errorf("err = %v", err)
	}
	// Exponential: 500ms then 1s, each at 3/4 with the fixed jitter.
	if diff := cmp.Diff([]time.Duration{375 * time.Millisecond, 750 * time.Millisecond}, sl.d); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
}

func TestInvalidRequestNotRetried(t *testing.T) {
	srv := fakeapitest.StartTest(t, "rules:\n  - reply: [{text: never}]\n")
	p, sl := newProvider(t, srv, nil)
	req := userReq("hi")
	req.Tools = append(req.Tools, llm.ToolSpec{Name: "bad name!", InputSchema: json.RawMessage(`{"type":"object"}`)})
	_, err := llm.Collect(p.Stream(context.Background(), req), nil)
	if !errors.Is(err, llm.ErrInvalidRequest) {
		t.Fatalf("err = %v, want ErrInvalidRequest", err)
	}
	var ae *anthropic.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Type != "invalid_request_error" {
		t.Errorf("err = %#v", err)
	}
	if len(sl.d) != 0 || len(srv.Requests()) != 1 {
		t.Errorf("retried: waits %v, requests %d", sl.d, len(srv.Requests()))
	}
}

func TestTrailingAssistantRefusedLocally(t *testing.T) {
	srv := fakeapitest.StartTest(t, "rules:\n  - reply: [{text: never}]\n")
	p, _ := newProvider(t, srv, nil)
	req := userReq("hi")
	req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock("Noted.")}})
	_, err := llm.Collect(p.Stream(context.Background(), req), nil)
	if !errors.Is(err, llm.ErrInvalidRequest) {
		t.Fatalf("err = %v", err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("a malformed conversation was sent (%d requests)", n)
	}
}

func TestMissingKey(t *testing.T) {
	if _, err := anthropic.New(anthropic.Config{}); !errors.Is(err, llm.ErrMissingKey) {
		t.Fatalf("err = %v", err)
	}
}

// cancelOnSend cancels a context as soon as a request is on its way.
type cancelOnSend struct {
	cancel context.CancelFunc
	once   sync.Once
}

func (c *cancelOnSend) RoundTrip(r *http.Request) (*http.Response, error) {
	c.once.Do(func() {
		go func() {
			// Cancel once the request is in flight; the server holds
			// its reply for an hour, so only cancellation ends it.
			c.cancel()
		}()
	})
	return http.DefaultTransport.RoundTrip(r)
}

func TestCancellation(t *testing.T) {
	srv := fakeapitest.StartTest(t, "rules:\n  - latency: 1h\n    reply: [{text: late}]\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hc := &http.Client{Transport: &cancelOnSend{cancel: cancel}}
	p, sl := newProvider(t, srv, func(c *anthropic.Config) { c.HTTPClient = hc })
	_, err := llm.Collect(p.Stream(ctx, userReq("hi")), nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if len(sl.d) != 0 {
		t.Errorf("a cancelled call was retried: %v", sl.d)
	}
}

func TestRequestTimeout(t *testing.T) {
	srv := fakeapitest.StartTest(t, "rules:\n  - latency: 1h\n    reply: [{text: late}]\n")
	p, _ := newProvider(t, srv, func(c *anthropic.Config) {
		c.RequestTimeout = 50 * time.Millisecond
		c.MaxRetries = -1
	})
	_, err := llm.Collect(p.Stream(context.Background(), userReq("hi")), nil)
	if !errors.Is(err, llm.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
}

// breakpoints lists the system blocks of a recorded request and the ttl of
// every cache_control in it ("5m" when none is given).
func breakpoints(t *testing.T, body []byte) (system []string, ttls []string) {
	t.Helper()
	var b struct {
		Tools    []map[string]any `json:"tools"`
		System   []map[string]any `json:"system"`
		Messages []struct {
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatal(err)
	}
	blocks := append([]map[string]any(nil), b.Tools...)
	for _, s := range b.System {
		system = append(system, s["text"].(string))
		blocks = append(blocks, s)
	}
	for _, m := range b.Messages {
		blocks = append(blocks, m.Content...)
	}
	for _, x := range blocks {
		if cc, ok := x["cache_control"].(map[string]any); ok {
			ttl, _ := cc["ttl"].(string)
			if ttl == "" {
				ttl = "5m"
			}
			ttls = append(ttls, ttl)
		}
	}
	return system, ttls
}

// TestSharedPrefixAndTail: the system prompt's shared part carries the
// breakpoint; the tail (who the agent is) follows outside the cached
// prefix, so two teammates of one role share the cache entry.
func TestSharedPrefixAndTail(t *testing.T) {
	srv := fakeapitest.StartTest(t, "rules:\n  - times: 0\n    reply: [{text: ok}]\n")
	p, _ := newProvider(t, srv, nil)
	shared := strings.Repeat("How the team works. ", 400) // about 2000 tokens
	var got []llm.Usage
	for _, name := range []string{"alice", "bob"} {
		req := userReq("work on " + name + "'s task")
		req.Model = "claude-sonnet-4-5"
		req.System = shared
		req.SystemTail = "You are teammate '" + name + "' (dev) in team 't'."
		resp, err := llm.Collect(p.Stream(context.Background(), req), nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resp.Usage)
	}
	recs := srv.Requests()
	system, ttls := breakpoints(t, recs[1].Body)
	if diff := cmp.Diff([]string{shared, "You are teammate 'bob' (dev) in team 't'."}, system); diff != "" {
		t.Errorf("system blocks (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"5m", "5m", "5m"}, ttls); diff != "" {
		t.Errorf("breakpoints (-want +got):\n%s", diff)
	}
	if recs[0].Agent != "alice" || recs[1].Agent != "bob" {
		t.Errorf("the fake named the agents %q and %q", recs[0].Agent, recs[1].Agent)
	}
	if got[0].CacheReadTokens != 0 || got[0].CacheWriteTokens == 0 {
		t.Errorf("alice's first call %+v: want the shared prefix written", got[0])
	}
	if got[1].CacheReadTokens != int64(recs[0].Cache[1].Tokens) {
		t.Errorf("bob's first call %+v: want alice's tools+system prefix (%d tokens) read", got[1], recs[0].Cache[1].Tokens)
	}
}

func TestCacheTTL(t *testing.T) {
	srv := fakeapitest.StartTest(t, "rules:\n  - times: 0\n    reply: [{text: ok}]\n")
	p, _ := newProvider(t, srv, nil)
	req := userReq("idle a while")
	req.Model = "claude-sonnet-4-5"
	req.System = strings.Repeat("Stable instructions. ", 400)
	req.CacheTTL = llm.CacheTTL1h
	resp, err := llm.Collect(p.Stream(context.Background(), req), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, ttls := breakpoints(t, srv.Requests()[0].Body)
	// Longer lifetimes must come first, so all of them are an hour.
	if diff := cmp.Diff([]string{"1h", "1h", "1h"}, ttls); diff != "" { // one turn: no previous one to mark
		t.Errorf("breakpoints (-want +got):\n%s", diff)
	}
	if u := resp.Usage; u.CacheWrite1hTokens == 0 || u.CacheWrite1hTokens != u.CacheWriteTokens {
		t.Errorf("usage %+v: want every write at the 1-hour lifetime", u)
	}

	req.CacheTTL = "2h"
	if _, err := llm.Collect(p.Stream(context.Background(), req), nil); !errors.Is(err, llm.ErrInvalidRequest) {
		t.Errorf("ttl 2h: got %v, want ErrInvalidRequest", err)
	}
}

// TestLongTurnStillReadsThePreviousCall: a reply with a dozen tool calls
// and their results adds more blocks than the cache looks back over; the
// breakpoint on the previous call's last turn still finds its entry.
func TestLongTurnStillReadsThePreviousCall(t *testing.T) {
	srv := fakeapitest.StartTest(t, "rules:\n  - times: 0\n    reply: [{text: ok}]\n")
	p, _ := newProvider(t, srv, nil)
	req := userReq("do many things")
	req.Model = "claude-sonnet-4-5"
	req.System = strings.Repeat("Stable instructions. ", 400)
	first, err := llm.Collect(p.Stream(context.Background(), req), nil)
	if err != nil {
		t.Fatal(err)
	}
	var uses, results []llm.Block
	for i := range 12 {
		id := fmt.Sprintf("toolu_%d", i)
		uses = append(uses, llm.Block{Type: llm.BlockToolUse, ID: id, Name: "bash", Input: json.RawMessage(`{"command":"ls"}`)})
		results = append(results, llm.ToolResultBlock(id, "file.go", false))
	}
	req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Content: uses}, llm.Message{Role: llm.RoleUser, Content: results})
	second, err := llm.Collect(p.Stream(context.Background(), req), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := first.Usage.CacheWriteTokens; second.Usage.CacheReadTokens != want {
		t.Errorf("second call read %d tokens, want all %d the first cached", second.Usage.CacheReadTokens, want)
	}
}

// TestToolResultImages: a tool result's images go to the model as image
// blocks in the tool_result's content, after its text, as the Messages API
// takes them; a type the API refuses is left out (the text names it).
func TestToolResultImages(t *testing.T) {
	srv := fakeapitest.StartTest(t, "rules:\n  - reply: [{text: seen}]\n")
	p, _ := newProvider(t, srv, nil)
	req := userReq("take a screenshot")
	result := llm.ToolResultBlock("toolu_1", "[image 1: image/png, 4 bytes]\n[image 2: image/bmp, 2 bytes]", false)
	result.Images = []llm.Image{{MediaType: "image/png", Data: "iVBORw=="}, {MediaType: "image/bmp", Data: "Qk0="}}
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockToolUse, ID: "toolu_1", Name: "bash", Input: json.RawMessage(`{"command":"shot"}`)}}},
		llm.Message{Role: llm.RoleUser, Content: []llm.Block{result}})
	resp, err := llm.Collect(p.Stream(context.Background(), req), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Message.Text(); got != "seen" {
		t.Errorf("reply = %q", got)
	}
	rec := srv.Requests()[0]
	if rec.Status != 200 {
		t.Fatalf("the fake API refused the request (%d): %s", rec.Status, rec.Body)
	}
	var body struct {
		Messages []struct {
			Content []struct {
				Type    string           `json:"type"`
				Content []map[string]any `json:"content"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(rec.Body, &body); err != nil {
		t.Fatal(err)
	}
	tr := body.Messages[2].Content[0]
	for _, c := range tr.Content {
		delete(c, "cache_control")
	}
	want := []map[string]any{
		{"type": "text", "text": "[image 1: image/png, 4 bytes]\n[image 2: image/bmp, 2 bytes]"},
		{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": "iVBORw=="}},
	}
	if tr.Type != "tool_result" {
		t.Fatalf("block = %s, want tool_result", tr.Type)
	}
	if diff := cmp.Diff(want, tr.Content); diff != "" {
		t.Errorf("tool_result content (-want +got):\n%s", diff)
	}
}
