package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/anthropic"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi/fakeapitest"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fnTool is a tool made of a function, for tests.
type fnTool struct {
	name     string
	readOnly bool
	kind     kind.Kind
	run      func(ctx context.Context, input json.RawMessage) tool.Result
}

func (f *fnTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: f.name, Description: f.name, InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)}
}
func (f *fnTool) ReadOnly() bool  { return f.readOnly }
func (f *fnTool) Kind() kind.Kind { return f.kind }
func (f *fnTool) Run(ctx context.Context, _ *tool.Env, input json.RawMessage) tool.Result {
	return f.run(ctx, input)
}

func newAgent(t *testing.T, srv *fakeapi.Server, mod func(*agent.Config), tools ...tool.Tool) *agent.Agent {
	t.Helper()
	p, err := anthropic.New(anthropic.Config{APIKey: "test", BaseURL: srv.URL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	cfg := agent.Config{
		Name:     "team-lead",
		Provider: p,
		System:   agent.Prompt{Identity: agent.Identity{Name: "team-lead"}}.String(),
		Tools:    tool.NewRegistry(tools...),
	}
	if mod != nil {
		mod(&cfg)
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// requestBodies decodes what the fake API received, and fails the test if
// any request was refused or fell through the script.
func requestBodies(t *testing.T, srv *fakeapi.Server) []wireRequest {
	t.Helper()
	var out []wireRequest
	for _, r := range srv.Requests() {
		if r.Status != 200 {
			t.Errorf("request %d got status %d: %s", r.N, r.Status, r.Body)
		}
		var w wireRequest
		if err := json.Unmarshal(r.Body, &w); err != nil {
			t.Fatal(err)
		}
		out = append(out, w)
	}
	if n := srv.Unmatched(); n != 0 {
		t.Errorf("%d requests matched no rule", n)
	}
	return out
}

type wireRequest struct {
	Messages []struct {
		Role    string      `json:"role"`
		Content []wireBlock `json:"content"`
	} `json:"messages"`
}

// wireBlock is a content block as sent: a tool_result's content is an array
// of text blocks on the wire.
type wireBlock struct {
	Type      llm.BlockType `json:"type"`
	Text      string        `json:"text"`
	ToolUseID string        `json:"tool_use_id"`
	IsError   bool          `json:"is_error"`
	Content   string        `json:"-"`
	Raw       []struct {
		Text string `json:"text"`
	} `json:"content"`
}

func (w wireRequest) last() []wireBlock {
	blocks := w.Messages[len(w.Messages)-1].Content
	for i := range blocks {
		for _, r := range blocks[i].Raw {
			blocks[i].Content += r.Text
		}
	}
	return blocks
}

func TestUnknownToolAndBadArguments(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - reply:
      - tool_use: {name: teleport, input: {to: mars}}
  - contains: "unknown tool"
    reply:
      - text: "ok"
      - tool_use: {name: echo, input: {}}
  - reply: [{text: done}]
`)
	echo := &fnTool{name: "echo", run: func(ctx context.Context, in json.RawMessage) tool.Result { return tool.OK("echoed") }}
	a := newAgent(t, srv, nil, echo)
	res, err := a.Run(context.Background(), llm.TextBlock("go"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "done" || res.Turns != 3 {
		t.Errorf("result = %+v", res)
	}
	reqs := requestBodies(t, srv)
	got := reqs[1].last()[0]
	if !got.IsError || !strings.Contains(got.Content, `unknown tool "teleport"`) || !strings.Contains(got.Content, "echo") {
		t.Errorf("unknown tool result = %+v", got)
	}
	if got := reqs[2].last()[0]; got.IsError || got.Content != "echoed" {
		t.Errorf("echo result = %+v", got)
	}
}

// TestToolPanicIsAResult checks that a crashing tool becomes an error result
// and the run goes on.
func TestToolPanicIsAResult(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - reply: [{tool_use: {name: boom, input: {}}}]
  - reply: [{text: survived}]
`)
	boom := &fnTool{name: "boom", run: func(context.Context, json.RawMessage) tool.Result { panic("kaboom") }}
	a := newAgent(t, srv, nil, boom)
	res, err := a.Run(context.Background(), llm.TextBlock("go"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "survived" {
		t.Errorf("text = %q", res.Text)
	}
	got := requestBodies(t, srv)[1].last()[0]
	if !got.IsError || !strings.Contains(got.Content, "kaboom") {
		t.Errorf("result = %+v", got)
	}
}

// TestReadOnlyInParallelOthersInOrder: two read-only calls can only finish
// if they run at the same time (each waits for the other to start); the
// writing calls around them run alone, in order.
func TestReadOnlyInParallelOthersInOrder(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - reply:
      - tool_use: {name: write, input: {n: 1}}
      - tool_use: {name: look, input: {n: 2}}
      - tool_use: {name: look, input: {n: 3}}
      - tool_use: {name: write, input: {n: 4}}
  - reply: [{text: done}]
`)
	var (
		mu    sync.Mutex
		order []string
		wg    sync.WaitGroup
	)
	wg.Add(2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	look := &fnTool{name: "look", readOnly: true, run: func(_ context.Context, in json.RawMessage) tool.Result {
		wg.Done()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			return tool.Errorf("the other read-only call never started: not parallel")
		}
		note("look")
		return tool.OK("seen")
	}}
	write := &fnTool{name: "write", run: func(_ context.Context, in json.RawMessage) tool.Result {
		note("write " + string(in))
		return tool.OK("written")
	}}
	a := newAgent(t, srv, nil, look, write)
	if _, err := a.Run(ctx, llm.TextBlock("go")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{`write {"n":1}`, "look", "look", `write {"n":4}`}, order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	results := requestBodies(t, srv)[1].last()
	var ids []string
	for _, b := range results {
		if b.IsError {
			t.Errorf("error result: %s", b.Content)
		}
		ids = append(ids, b.ToolUseID)
	}
	if diff := cmp.Diff([]string{"toolu_fake_1_0", "toolu_fake_1_1", "toolu_fake_1_2", "toolu_fake_1_3"}, ids); diff != "" {
		t.Errorf("results out of call order (-want +got):\n%s", diff)
	}
}

func TestMaxTokensContinued(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - reply: [{text: "The first half of a long"}]
    stop_reason: max_tokens
  - contains: "cut off"
    reply: [{text: " answer, finished."}]
`)
	a := newAgent(t, srv, nil)
	res, err := a.Run(context.Background(), llm.TextBlock("explain"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Turns != 2 || res.Text != " answer, finished." || res.StopReason != llm.StopEndTurn {
		t.Errorf("result = %+v", res)
	}
	requestBodies(t, srv)
}

func TestMaxTurns(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - times: 0
    reply: [{tool_use: {name: echo, input: {}}}]
`)
	echo := &fnTool{name: "echo", run: func(context.Context, json.RawMessage) tool.Result { return tool.OK("again") }}
	a := newAgent(t, srv, func(c *agent.Config) { c.MaxTurns = 3 }, echo)
	res, err := a.Run(context.Background(), llm.TextBlock("loop"))
	if !errors.Is(err, agent.ErrMaxTurns) {
		t.Fatalf("err = %v", err)
	}
	if res.Turns != 3 || len(srv.Requests()) != 3 {
		t.Errorf("turns = %d, requests = %d", res.Turns, len(srv.Requests()))
	}
	// The conversation stays sendable: it ends on the tool results.
	msgs := a.Messages()
	if last := msgs[len(msgs)-1]; last.Role != llm.RoleUser {
		t.Errorf("conversation ends on %s", last.Role)
	}
}

func TestGateRefuses(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - reply: [{tool_use: {name: write, input: {}}}, {tool_use: {name: look, input: {}}}]
  - reply: [{text: done}]
`)
	ran := map[string]bool{}
	var mu sync.Mutex
	mk := func(name string, ro bool, k kind.Kind) *fnTool {
		return &fnTool{name: name, readOnly: ro, kind: k, run: func(context.Context, json.RawMessage) tool.Result {
			mu.Lock()
			ran[name] = true
			mu.Unlock()
			return tool.OK("ran")
		}}
	}
	var asked []agent.Call
	gate := func(_ context.Context, c agent.Call) agent.Decision {
		asked = append(asked, c)
		if c.ReadOnly {
			return agent.Decision{Allow: true}
		}
		return agent.Decision{Reason: "plan mode: writing tools wait for plan approval"}
	}
	a := newAgent(t, srv, func(c *agent.Config) { c.Gate = gate }, mk("write", false, kind.Edit), mk("look", true, kind.Read))
	if _, err := a.Run(context.Background(), llm.TextBlock("go")); err != nil {
		t.Fatal(err)
	}
	if ran["write"] || !ran["look"] {
		t.Errorf("ran = %v", ran)
	}
	// The gate sees what each tool declares it does.
	var kinds []kind.Kind
	for _, c := range asked {
		kinds = append(kinds, c.Kind)
	}
	if diff := cmp.Diff([]kind.Kind{kind.Edit, kind.Read}, kinds); diff != "" {
		t.Errorf("kinds the gate saw (-want +got):\n%s", diff)
	}
	res := requestBodies(t, srv)[1].last()
	if !res[0].IsError || !strings.Contains(res[0].Content, "plan mode") || res[1].IsError {
		t.Errorf("results = %+v", res)
	}
}

// TestBoundaryDelivery checks blocks from boundaries ride with the tool
// results, after them, in the same user turn.
func TestBoundaryDelivery(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - reply: [{tool_use: {name: echo, input: {}}}]
  - contains: "from alice"
    reply: [{text: "got it"}]
`)
	echo := &fnTool{name: "echo", run: func(context.Context, json.RawMessage) tool.Result { return tool.OK("echoed") }}
	var rounds [][]string
	inbox := func(_ context.Context, names []string) []llm.Block {
		rounds = append(rounds, names)
		return []llm.Block{llm.TextBlock(`<teammate-message from="alice">hello from alice</teammate-message>`)}
	}
	var events []agent.EventType
	a := newAgent(t, srv, func(c *agent.Config) {
		c.Boundaries = []agent.Boundary{inbox}
		c.Observe = func(ev agent.Event) {
			if ev.Type != agent.EventText {
				events = append(events, ev.Type)
			}
		}
	}, echo)
	res, err := a.Run(context.Background(), llm.TextBlock("go"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "got it" {
		t.Errorf("text = %q", res.Text)
	}
	if diff := cmp.Diff([][]string{{"echo"}}, rounds); diff != "" {
		t.Errorf("rounds (-want +got):\n%s", diff)
	}
	last := requestBodies(t, srv)[1].last()
	if len(last) != 2 || last[0].Type != llm.BlockToolResult || last[1].Type != llm.BlockText {
		t.Errorf("turn = %+v", last)
	}
	want := []agent.EventType{agent.EventUsage, agent.EventMessage, agent.EventToolCall, agent.EventToolResult,
		agent.EventDelivered, agent.EventUsage, agent.EventMessage}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestRecordSeesEveryMessage checks the transcript seam gets every message
// in conversation order.
func TestRecordSeesEveryMessage(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - reply: [{text: "calling"}, {tool_use: {name: echo, input: {}}}]
  - reply: [{text: done}]
`)
	echo := &fnTool{name: "echo", run: func(context.Context, json.RawMessage) tool.Result { return tool.OK("echoed") }}
	var recorded []llm.Message
	a := newAgent(t, srv, func(c *agent.Config) { c.Record = func(m llm.Message) { recorded = append(recorded, m) } }, echo)
	if _, err := a.Run(context.Background(), llm.TextBlock("go")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a.Messages(), recorded); diff != "" {
		t.Errorf("recorded differs from the conversation (-want +got):\n%s", diff)
	}
	if len(recorded) != 4 {
		t.Errorf("recorded %d messages, want 4", len(recorded))
	}
}

// TestAPIErrorEndsRunCleanly checks a refused call ends the run with an
// error and a conversation that can be resumed.
func TestAPIErrorEndsRunCleanly(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
faults:
  - {call: 2, kind: overloaded}
rules:
  - reply: [{tool_use: {name: echo, input: {}}}]
  - reply: [{text: done}]
`)
	echo := &fnTool{name: "echo", run: func(context.Context, json.RawMessage) tool.Result { return tool.OK("echoed") }}
	a := newAgent(t, srv, nil, echo)
	_, err := a.Run(context.Background(), llm.TextBlock("go"))
	if !errors.Is(err, llm.ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
	// Resume: a new user turn merges with the pending tool results.
	res, err := a.Run(context.Background(), llm.TextBlock("try again"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "done" {
		t.Errorf("text = %q", res.Text)
	}
}

// batchTool is an fnTool whose consecutive calls run together.
type batchTool struct {
	fnTool
	batch func(inputs []json.RawMessage) []tool.Result
}

func (b *batchTool) RunBatch(_ context.Context, envs []*tool.Env, inputs []json.RawMessage) []tool.Result {
	for i, env := range envs {
		if env == nil || env.ToolUseID == "" {
			return []tool.Result{tool.Errorf("call %d has no environment", i)}
		}
	}
	return b.batch(inputs)
}

// TestBatchRunsConsecutiveCallsTogether: a tool.Batcher gets the calls of
// a message that follow each other, in order, minus those its gate
// refused; each is announced before the batch and answered after it, in
// order, and AfterTool sees every call that ran. A call of another tool
// ends the batch.
func TestBatchRunsConsecutiveCallsTogether(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - contains: "go"
    reply:
      - tool_use: {name: spawn, input: {n: 1}}
      - tool_use: {name: spawn, input: {n: 2}}
      - tool_use: {name: spawn, input: {n: 3}}
      - tool_use: {name: other, input: {}}
      - tool_use: {name: spawn, input: {n: 4}}
  - reply: [{text: done}]
`)
	var batches [][]string
	spawn := &batchTool{fnTool: fnTool{name: "spawn", run: func(_ context.Context, in json.RawMessage) tool.Result {
		batches = append(batches, []string{string(in)})
		return tool.OK("alone " + string(in))
	}}}
	spawn.batch = func(inputs []json.RawMessage) []tool.Result {
		var got []string
		var out []tool.Result
		for _, in := range inputs {
			got = append(got, string(in))
			out = append(out, tool.OK("together "+string(in)))
		}
		batches = append(batches, got)
		return out
	}
	other := &fnTool{name: "other", run: func(context.Context, json.RawMessage) tool.Result { return tool.OK("other") }}
	var events, after []string
	a := newAgent(t, srv, func(c *agent.Config) {
		c.Gate = func(_ context.Context, call agent.Call) agent.Decision {
			if string(call.Input) == `{"n":2}` {
				return agent.Decision{Reason: "not two"}
			}
			return agent.Decision{Allow: true}
		}
		c.AfterTool = func(_ context.Context, call agent.Call, _ *tool.Result) { after = append(after, string(call.Input)) }
		c.Observe = func(ev agent.Event) {
			switch ev.Type {
			case agent.EventToolCall:
				events = append(events, "call "+string(ev.Call.Input))
			case agent.EventToolResult:
				events = append(events, "result "+ev.Result.Content)
			}
		}
	}, spawn, other)
	if _, err := a.Run(context.Background(), llm.TextBlock("go")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]string{{`{"n":1}`, `{"n":3}`}, {`{"n":4}`}}, batches); diff != "" {
		t.Errorf("batches (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{`{"n":1}`, `{"n":3}`, `{}`, `{"n":4}`}, after); diff != "" {
		t.Errorf("AfterTool saw (-want +got):\n%s", diff)
	}
	wantEvents := []string{
		`call {"n":1}`, `call {"n":2}`, `call {"n":3}`,
		`result together {"n":1}`, "result spawn was not run: not two", `result together {"n":3}`,
		"call {}", "result other",
		`call {"n":4}`, `result alone {"n":4}`,
	}
	if diff := cmp.Diff(wantEvents, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	var ids []string
	for _, b := range requestBodies(t, srv)[1].last() {
		ids = append(ids, b.ToolUseID)
	}
	if diff := cmp.Diff([]string{"toolu_fake_1_0", "toolu_fake_1_1", "toolu_fake_1_2", "toolu_fake_1_3", "toolu_fake_1_4"}, ids); diff != "" {
		t.Errorf("results out of call order (-want +got):\n%s", diff)
	}
}

// TestBatchThatFailsFailsEachCall: a batch that panics, or answers the
// wrong number of calls, gives every call of it an error, and the agent
// goes on.
func TestBatchThatFailsFailsEachCall(t *testing.T) {
	for name, batch := range map[string]func([]json.RawMessage) []tool.Result{
		"panic": func([]json.RawMessage) []tool.Result { panic("kaboom") },
		"short": func([]json.RawMessage) []tool.Result { return []tool.Result{tool.OK("one")} },
	} {
		t.Run(name, func(t *testing.T) {
			srv := fakeapitest.StartTest(t, `
rules:
  - contains: "go"
    reply:
      - tool_use: {name: spawn, input: {n: 1}}
      - tool_use: {name: spawn, input: {n: 2}}
  - reply: [{text: survived}]
`)
			spawn := &batchTool{fnTool: fnTool{name: "spawn"}, batch: batch}
			a := newAgent(t, srv, nil, spawn)
			res, err := a.Run(context.Background(), llm.TextBlock("go"))
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != "survived" {
				t.Errorf("text = %q", res.Text)
			}
			results := requestBodies(t, srv)[1].last()
			if len(results) != 2 {
				t.Fatalf("%d results, want 2", len(results))
			}
			for _, b := range results {
				if !b.IsError || !strings.Contains(b.Content, "internal error") {
					t.Errorf("result = %+v, want an internal error", b)
				}
			}
		})
	}
}
