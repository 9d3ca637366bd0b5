package fakeapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
)

const helloScript = `
rules:
  - agent: team-lead
    contains: hello
    reply:
      - text: "Hello there, I am the lead of this team and I will write the file now."
    usage: {input_tokens: 10, output_tokens: 5, cache_read_input_tokens: 3, cache_creation_input_tokens: 2}
`

func TestTextNonStreaming(t *testing.T) {
	srv := start(t, helloScript, fakeapi.Options{})
	msg, err := sdk(t, srv).Messages.New(t.Context(), params("team-lead", "say hello"))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if diff := cmp.Diff([]string{"Hello there, I am the lead of this team and I will write the file now."}, texts(*msg)); diff != "" {
		t.Errorf("content (-want +got):\n%s", diff)
	}
	got := struct {
		ID, Model, Stop, Role, Type string
		In, Out, CacheRead, Create  int64
	}{msg.ID, string(msg.Model), string(msg.StopReason), string(msg.Role), string(msg.Type),
		msg.Usage.InputTokens, msg.Usage.OutputTokens, msg.Usage.CacheReadInputTokens, msg.Usage.CacheCreationInputTokens}
	want := struct {
		ID, Model, Stop, Role, Type string
		In, Out, CacheRead, Create  int64
	}{"msg_fake_1", "claude-test", "end_turn", "assistant", "message", 10, 5, 3, 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
	if !strings.Contains(msg.RawJSON(), `"stop_sequence":null`) {
		t.Errorf("stop_sequence missing from the wire: %s", msg.RawJSON())
	}
}

func TestTextStreaming(t *testing.T) {
	srv := start(t, helloScript, fakeapi.Options{})
	msg, types, err := stream(t, sdk(t, srv), params("team-lead", "say hello"))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if diff := cmp.Diff([]string{"Hello there, I am the lead of this team and I will write the file now."}, texts(msg)); diff != "" {
		t.Errorf("content (-want +got):\n%s", diff)
	}
	deltas := 0
	for _, ty := range types {
		if ty == "content_block_delta" {
			deltas++
		}
	}
	if deltas < 3 {
		t.Errorf("text came in %d deltas, want several: %v", deltas, types)
	}
	if types[0] != "message_start" || types[1] != "content_block_start" || types[len(types)-1] != "message_stop" || types[len(types)-2] != "message_delta" {
		t.Errorf("event order: %v", types)
	}
	if msg.StopReason != "end_turn" || msg.Usage.OutputTokens != 5 || msg.Usage.InputTokens != 10 || msg.ID != "msg_fake_1" {
		t.Errorf("stop %q usage %+v id %s", msg.StopReason, msg.Usage, msg.ID)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || !reqs[0].Stream || reqs[0].Status != 200 || reqs[0].Rule != 0 || reqs[0].Agent != "team-lead" {
		t.Errorf("recorded %+v", reqs)
	}
}

const toolScript = `
rules:
  - agent: team-lead
    contains: write
    reply:
      - text: "I'll write the file."
      - tool_use: {name: write_file, input: {path: hello.txt, content: "hello from troupe", mode: 420, tags: [a, b], nested: {deep: true}}}
  - contains: "wrote 17 bytes"
    reply:
      - text: "Done: the file is written."
`

func TestToolUseRoundTrip(t *testing.T) {
	srv := start(t, toolScript, fakeapi.Options{})
	c := sdk(t, srv)
	p := params("team-lead", "please write hello.txt")
	p.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
		Name:        "write_file",
		Description: anthropic.String("Write a file"),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"path": map[string]any{"type": "string"}}},
	}}}

	msg, _, err := stream(t, c, p)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 2 {
		t.Fatalf("stop %q content %v", msg.StopReason, msg.Content)
	}
	tu := msg.Content[1]
	if tu.Type != "tool_use" || tu.ID != "toolu_fake_1_1" || tu.Name != "write_file" {
		t.Errorf("tool_use block %+v", tu)
	}
	want := `{"content":"hello from troupe","mode":420,"nested":{"deep":true},"path":"hello.txt","tags":["a","b"]}`
	if got := compactJSON(t, tu.Input); got != want {
		t.Errorf("input = %s, want %s", got, want)
	}

	// The same call unstreamed gives the same content.
	p2 := params("team-lead", "please write hello.txt")
	p2.Tools = p.Tools
	srv2 := start(t, toolScript, fakeapi.Options{})
	plain, err := sdk(t, srv2).Messages.New(t.Context(), p2)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if got := compactJSON(t, plain.Content[1].Input); got != want {
		t.Errorf("unstreamed input = %s, want %s", got, want)
	}

	// Answer the tool call; the history goes back exactly as accumulated.
	p.Messages = append(p.Messages, msg.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(tu.ID, "wrote 17 bytes", false)))
	next, _, err := stream(t, c, p)
	if err != nil {
		t.Fatalf("second stream: %v", err)
	}
	if diff := cmp.Diff([]string{"Done: the file is written."}, texts(next)); diff != "" {
		t.Errorf("second reply (-want +got):\n%s", diff)
	}
	if next.StopReason != "end_turn" {
		t.Errorf("stop = %q", next.StopReason)
	}
	if srv.Unmatched() != 0 {
		t.Errorf("unmatched = %d", srv.Unmatched())
	}
}

func TestThinking(t *testing.T) {
	script := `
rules:
  - times: 0
    reply:
      - thinking: "Let me think about what the user wants from me here."
      - text: "Answer."
`
	srv := start(t, script, fakeapi.Options{})
	c := sdk(t, srv)
	for _, streaming := range []bool{false, true} {
		var msg anthropic.Message
		if streaming {
			m, _, err := stream(t, c, params("", "q"))
			if err != nil {
				t.Fatal(err)
			}
			msg = m
		} else {
			m, err := c.Messages.New(t.Context(), params("", "q"))
			if err != nil {
				t.Fatal(err)
			}
			msg = *m
		}
		if len(msg.Content) != 2 {
			t.Fatalf("stream=%t content %v", streaming, msg.Content)
		}
		th := msg.Content[0]
		if th.Type != "thinking" || th.Thinking != "Let me think about what the user wants from me here." || th.Signature == "" {
			t.Errorf("stream=%t thinking block %+v", streaming, th)
		}
		// A thinking block goes back in the history and is accepted.
		p := params("", "q")
		p.Messages = append(p.Messages, msg.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("go on")))
		if _, err := c.Messages.New(t.Context(), p); err != nil {
			t.Errorf("stream=%t history with thinking refused: %v", streaming, err)
		}
	}
}

func TestMaxTokensStop(t *testing.T) {
	srv := start(t, `rules: [{reply: [{text: "cut off mid"}], stop_reason: max_tokens}]`, fakeapi.Options{})
	msg, _, err := stream(t, sdk(t, srv), params("", "q"))
	if err != nil || msg.StopReason != anthropic.StopReasonMaxTokens {
		t.Fatalf("stop %q err %v", msg.StopReason, err)
	}
}

func TestSubstitutions(t *testing.T) {
	script := `
model: claude-fake
rules:
  - regex: "request_id=(\\S+) task=(\\d+)"
    reply:
      - thinking: "thinking for ${agent}"
      - text: "${agent} got ${1} for task ${2} on call ${call}; ${HOME} and ${9} and $1 stay"
      - tool_use: {name: bash, input: {command: "echo ${1} $HOME ${PATH}", args: ["${2}", 7, {who: "${agent}"}]}}
`
	srv := start(t, script, fakeapi.Options{})
	c := sdk(t, srv)
	_, err := c.Messages.New(t.Context(), params("bob", "nothing to see")) // call 1: fallback
	if err != nil {
		t.Fatal(err)
	}
	msg, err := c.Messages.New(t.Context(), params("alice", "the request_id=r-42 task=7 now"))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Model != "claude-fake" {
		t.Errorf("model = %q", msg.Model)
	}
	if got, want := msg.Content[0].Thinking, "thinking for alice"; got != want {
		t.Errorf("thinking = %q, want %q", got, want)
	}
	if got, want := msg.Content[1].Text, "alice got r-42 for task 7 on call 2; ${HOME} and  and $1 stay"; got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
	want := `{"args":["7",7,{"who":"alice"}],"command":"echo r-42 $HOME ${PATH}"}`
	if got := compactJSON(t, msg.Content[2].Input); got != want {
		t.Errorf("input = %s, want %s", got, want)
	}
	if msg.Content[2].ID != "toolu_fake_2_2" {
		t.Errorf("tool id = %s", msg.Content[2].ID)
	}
}

func TestDefaultFallback(t *testing.T) {
	srv := start(t, ``, fakeapi.Options{})
	msg, err := sdk(t, srv).Messages.New(t.Context(), params("alice", "hi"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"fakeapi: no rule matched for agent alice"}, texts(*msg)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if msg.StopReason != "end_turn" || srv.Unmatched() != 1 || srv.Requests()[0].Rule != -1 {
		t.Errorf("stop %q unmatched %d rule %d", msg.StopReason, srv.Unmatched(), srv.Requests()[0].Rule)
	}
}

func TestRuleOrderAndTimes(t *testing.T) {
	script := `
fallback:
  reply: [{text: "fallback"}]
rules:
  - {contains: go, times: 2, reply: [{text: "first"}]}
  - {contains: go, reply: [{text: "second"}]}
  - {contains: go, times: 0, reply: [{text: "forever"}]}
  - {contains: never-reached, times: 0, reply: [{text: "x"}]}
  - {agent: bob, reply: [{text: "bob only"}]}
`
	srv := start(t, script, fakeapi.Options{})
	c := sdk(t, srv)
	var got []string
	for _, in := range []struct{ agent, text string }{
		{"alice", "go"}, {"alice", "go"}, {"alice", "go"}, {"alice", "go"}, {"alice", "go"},
		{"alice", "stop"}, {"bob", "stop"}, {"bob", "stop"},
	} {
		msg, err := c.Messages.New(t.Context(), params(in.agent, in.text))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, msg.Content[0].Text)
	}
	want := []string{"first", "first", "second", "forever", "forever", "fallback", "bob only", "fallback"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replies (-want +got):\n%s", diff)
	}
	var rules []int
	for _, r := range srv.Requests() {
		rules = append(rules, r.Rule)
	}
	if diff := cmp.Diff([]int{0, 0, 1, 2, 2, -1, 4, -1}, rules); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if srv.Unmatched() != 2 {
		t.Errorf("unmatched = %d", srv.Unmatched())
	}
}

func TestMatchTextOfLatestUserMessage(t *testing.T) {
	// contains sees text blocks and tool_result contents, not older turns.
	script := `
rules:
  - {contains: "old question", times: 0, reply: [{text: "wrong: older turn"}]}
  - {contains: "result line\nfollow-up", reply: [{text: "joined"}]}
`
	srv := start(t, script, fakeapi.Options{})
	body := `{"model":"m","max_tokens":10,"messages":[
	  {"role":"user","content":"old question"},
	  {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"x","input":{}}]},
	  {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"result line"}]},{"type":"text","text":"follow-up"}]}]}`
	status, _, data := post(t, srv, "/v1/messages", apiHeaders, body)
	if status != 200 || !strings.Contains(string(data), `"joined"`) {
		t.Errorf("status %d body %s", status, data)
	}
}

func TestAgentPattern(t *testing.T) {
	tests := []struct {
		name, pattern, system, want string
	}{
		{"lead", "", "You are 'team-lead', the lead of team 'x'.", "team-lead"},
		{"teammate", "", "Intro.\nYou are teammate 'alice' (backend) in team 'x'. Work well.", "alice"},
		{"none", "", "You are a helpful assistant.", ""},
		{"custom", `agent_pattern: "name=(\\w+)"`, "x name=carol y", "carol"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := start(t, tt.pattern, fakeapi.Options{})
			p := params("", "hi")
			p.System = []anthropic.TextBlockParam{{Text: "preamble"}, {Text: tt.system}}
			msg, err := sdk(t, srv).Messages.New(t.Context(), p)
			if err != nil {
				t.Fatal(err)
			}
			if got := srv.Requests()[0].Agent; got != tt.want {
				t.Errorf("agent = %q, want %q", got, tt.want)
			}
			if want := "fakeapi: no rule matched for agent " + tt.want; msg.Content[0].Text != want {
				t.Errorf("text = %q, want %q", msg.Content[0].Text, want)
			}
		})
	}
	t.Run("string system", func(t *testing.T) {
		srv := start(t, `rules: [{agent: dave, reply: [{text: ok}]}]`, fakeapi.Options{})
		body := `{"model":"m","max_tokens":10,"system":"You are teammate 'dave' (qa) in team 't'","messages":[{"role":"user","content":"x"}]}`
		if status, _, data := post(t, srv, "/v1/messages", apiHeaders, body); status != 200 || !strings.Contains(string(data), `"ok"`) {
			t.Errorf("status %d body %s", status, data)
		}
	})
}

func TestEstimatedUsage(t *testing.T) {
	srv := start(t, `rules: [{reply: [{text: "0123456789abcdef0123456789abcdef"}]}]`, fakeapi.Options{})
	msg, err := sdk(t, srv).Messages.New(t.Context(), params("", "hi"))
	if err != nil {
		t.Fatal(err)
	}
	body := srv.Requests()[0].Body
	if msg.Usage.InputTokens != int64(len(body)/4) || msg.Usage.OutputTokens != 8 || msg.Usage.CacheReadInputTokens != 0 {
		t.Errorf("usage %+v for a %d-byte request", msg.Usage, len(body))
	}
}

func TestConcurrentRequests(t *testing.T) {
	script := `
rules:
  - {contains: claim, times: 10, reply: [{text: "won ${call}"}]}
  - {contains: claim, times: 0, latency: 1ms, reply: [{text: "lost"}]}
`
	srv := start(t, script, fakeapi.Options{})
	c := sdk(t, srv)
	const n = 40
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		won     int
		seenIDs = map[string]bool{}
	)
	for i := range n {
		wg.Go(func() {
			p := params(fmt.Sprintf("agent%d", i), "claim it")
			var msg anthropic.Message
			var err error
			if i%2 == 0 {
				msg, _, err = stream(t, c, p)
			} else {
				var m *anthropic.Message
				if m, err = c.Messages.New(context.Background(), p); err == nil {
					msg = *m
				}
			}
			if err != nil {
				t.Errorf("call %d: %v", i, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if strings.HasPrefix(msg.Content[0].Text, "won") {
				won++
			}
			if seenIDs[msg.ID] {
				t.Errorf("duplicate id %s", msg.ID)
			}
			seenIDs[msg.ID] = true
		})
	}
	wg.Wait()
	if won != 10 {
		t.Errorf("won = %d, want exactly 10", won)
	}
	reqs := srv.Requests()
	if len(reqs) != n {
		t.Fatalf("%d recorded, want %d", len(reqs), n)
	}
	for i, r := range reqs {
		if r.N != i+1 || r.Status != 200 {
			t.Errorf("record %d: %+v", i, r)
		}
	}
}

func TestLatency(t *testing.T) {
	srv := start(t, `rules: [{times: 0, latency: 30ms, reply: [{text: ok}]}]`, fakeapi.Options{Latency: 20 * time.Millisecond})
	begin := time.Now()
	if _, err := sdk(t, srv).Messages.New(t.Context(), params("", "hi")); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took < 50*time.Millisecond {
		t.Errorf("answered in %v, before the 50ms of latency", took)
	}
}

func TestLatencyCancelled(t *testing.T) {
	srv := start(t, `rules: [{times: 0, reply: [{text: ok}]}]`, fakeapi.Options{Latency: time.Hour})
	done := recorded(srv)
	ctx, cancel := context.WithCancel(t.Context())
	srv.OnArrive(func(int) { cancel() }) // the client gives up while the server waits
	if _, err := sdk(t, srv).Messages.New(ctx, params("", "hi")); !errors.Is(err, context.Canceled) {
		t.Errorf("client error = %v, want context.Canceled", err)
	}
	if r := await(t, done); r.Status != 499 {
		t.Errorf("recorded status %d, want 499", r.Status)
	}
}

func TestCloseStopsLatencyWait(t *testing.T) {
	srv := start(t, ``, fakeapi.Options{Latency: time.Hour})
	done := recorded(srv)
	arrived := make(chan struct{})
	srv.OnArrive(func(int) { close(arrived) })
	errc := make(chan error, 1)
	go func() {
		_, err := sdk(t, srv).Messages.New(context.Background(), params("", "hi"))
		errc <- err
	}()
	<-arrived
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if r := await(t, done); r.Status != 499 {
		t.Errorf("status = %d", r.Status)
	}
	if err := <-errc; err == nil {
		t.Error("client got an answer from a closed server")
	}
}

func TestStartAndCloseLifecycle(t *testing.T) {
	s, err := fakeapi.ParseScript(nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := fakeapi.New(s, fakeapi.Options{})
	if srv.URL() != "" {
		t.Errorf("URL before Start = %q", srv.URL())
	}
	url, err := srv.Start("127.0.0.1:0")
	if err != nil || !strings.HasPrefix(url, "http://127.0.0.1:") || srv.URL() != url {
		t.Fatalf("Start = %q, %v; URL %q", url, err, srv.URL())
	}
	if _, err := srv.Start("127.0.0.1:0"); err == nil {
		t.Error("second Start succeeded")
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := srv.Start("127.0.0.1:0"); err == nil {
		t.Error("Start after Close succeeded")
	}
}

func TestRecordsRefusedRequests(t *testing.T) {
	srv := start(t, ``, fakeapi.Options{})
	_, _, _ = post(t, srv, "/v1/messages", apiHeaders, `{"model":"m","max_tokens":1,"stream":true,"system":"You are 'zed'","messages":[]}`)
	got := srv.Requests()
	want := []fakeapi.Recorded{{N: 1, Agent: "zed", Model: "m", Stream: true, Status: 400, Rule: -1,
		Body: []byte(`{"model":"m","max_tokens":1,"stream":true,"system":"You are 'zed'","messages":[]}`)}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestNoRecords: a server that keeps no records answers as any other,
// refusals included, and Requests stays empty.
func TestNoRecords(t *testing.T) {
	srv := start(t, "rules:\n  - times: 0\n    reply: [{text: hello}]\n", fakeapi.Options{NoRecords: true})
	for range 3 {
		code, _, body := post(t, srv, "/v1/messages", apiHeaders, `{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
		if code != 200 || !strings.Contains(string(body), "hello") {
			t.Fatalf("status %d, body %s", code, body)
		}
	}
	if code, _, _ := post(t, srv, "/v1/messages", apiHeaders, `{"model":"m"}`); code != 400 {
		t.Errorf("a bad request got %d", code)
	}
	if got := srv.Requests(); len(got) != 0 {
		t.Errorf("Requests() = %d records, want none", len(got))
	}
}

func TestSDKSeesInvalidRequest(t *testing.T) {
	srv := start(t, ``, fakeapi.Options{})
	p := params("", "hi")
	p.Messages = append(p.Messages, anthropic.NewAssistantMessage(anthropic.NewTextBlock("prefill")))
	_, err := sdk(t, srv).Messages.New(t.Context(), p)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.RequestID != "req_fake_1" {
		t.Fatalf("err = %v", err)
	}
	var body struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal([]byte(apiErr.RawJSON()), &body); err != nil || body.Type != "error" ||
		body.Error.Type != "invalid_request_error" || !strings.Contains(body.Error.Message, "end with a \"user\" message") {
		t.Errorf("body %s (%v)", apiErr.RawJSON(), err)
	}
}

func TestAuthorizationBearer(t *testing.T) {
	srv := start(t, ``, fakeapi.Options{})
	c := sdk(t, srv, option.WithAPIKey(""), option.WithAuthToken("tok"))
	if _, err := c.Messages.New(t.Context(), params("", "hi")); err != nil {
		t.Fatalf("bearer token refused: %v", err)
	}
}

func TestStreamLongUnicode(t *testing.T) {
	text := strings.Repeat("héllo wörld — 日本語のテキスト <b>&amp;</b>\n", 200)
	script := fmt.Sprintf("rules:\n  - reply:\n      - text: %q\n      - tool_use: {name: write_file, input: {content: %q}}\n", text, text)
	srv := start(t, script, fakeapi.Options{})
	msg, types, err := stream(t, sdk(t, srv), params("", "hi"))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Content[0].Text != text {
		t.Error("streamed text differs from the script")
	}
	var input struct{ Content string }
	if err := json.Unmarshal(msg.Content[1].Input, &input); err != nil || input.Content != text {
		t.Errorf("streamed input differs from the script (%v)", err)
	}
	if len(types) > 200 {
		t.Errorf("%d events for one long reply, want the chunks to grow", len(types))
	}
}
