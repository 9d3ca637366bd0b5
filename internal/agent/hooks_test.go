package agent_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi/fakeapitest"
	"github.com/troupe-dev/troupe/internal/tool"
)

// TestGateRewritesInput: a gate's Decision.Input is what the tool runs
// with, and what AfterTool and observers see of the call.
func TestGateRewritesInput(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - contains: "go"
    reply: [{tool_use: {name: echo, input: {v: "old"}}}]
  - reply: [{text: done}]
`)
	var ran, after, observed string
	echo := &fnTool{name: "echo", run: func(_ context.Context, in json.RawMessage) tool.Result {
		ran = string(in)
		return tool.OK(string(in))
	}}
	a := newAgent(t, srv, func(c *agent.Config) {
		c.Gate = func(context.Context, agent.Call) agent.Decision {
			return agent.Decision{Allow: true, Input: json.RawMessage(`{"v":"new"}`)}
		}
		c.AfterTool = func(_ context.Context, call agent.Call, _ *tool.Result) { after = string(call.Input) }
		c.Observe = func(ev agent.Event) {
			if ev.Type == agent.EventToolResult {
				observed = string(ev.Call.Input)
			}
		}
	}, echo)
	if _, err := a.Run(context.Background(), llm.TextBlock("go")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{`{"v":"new"}`, `{"v":"new"}`, `{"v":"new"}`}, []string{ran, after, observed}); diff != "" {
		t.Errorf("tool, AfterTool, observer saw (-want +got):\n%s", diff)
	}
}

// TestHaltStopsTheRun: Halt from a gate lets the round's calls be answered
// and then ends the run without another model call; the reason is the
// result's, not the model's.
func TestHaltStopsTheRun(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - contains: "go"
    reply: [{tool_use: {name: a, input: {}}}, {tool_use: {name: b, input: {}}}]
  - reply: [{text: "must not be asked"}]
`)
	var mu sync.Mutex
	ran := map[string]bool{}
	mk := func(name string) *fnTool {
		return &fnTool{name: name, run: func(context.Context, json.RawMessage) tool.Result {
			mu.Lock()
			ran[name] = true
			mu.Unlock()
			return tool.OK("ok")
		}}
	}
	a := newAgent(t, srv, func(c *agent.Config) {
		c.Gate = func(ctx context.Context, call agent.Call) agent.Decision {
			if call.Name == "a" {
				if !agent.Halt(ctx, "a hook said stop") {
					t.Error("Halt found no run in the gate's context")
				}
			}
			return agent.Decision{Allow: true}
		}
	}, mk("a"), mk("b"))
	res, err := a.Run(context.Background(), llm.TextBlock("go"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.WasHalted || res.Halted != "a hook said stop" || res.Turns != 1 || len(srv.Requests()) != 1 {
		t.Errorf("result %+v after %d requests", res, len(srv.Requests()))
	}
	if !ran["a"] || !ran["b"] {
		t.Errorf("ran = %v; the round's calls are answered", ran)
	}
	msgs := a.Messages()
	if last := msgs[len(msgs)-1]; last.Role != llm.RoleUser || len(last.Content) != 2 {
		t.Errorf("last message %+v, want the round's results", last)
	}
	if agent.Halt(context.Background(), "x") {
		t.Error("Halt outside a run reported success")
	}
}

// TestCompactHooks: PreCompact hears of a compaction before its summary
// is asked for; PostCompact's blocks go into the new conversation.
func TestCompactHooks(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - contains: "hello"
    reply: [{text: "hi there"}]
  - contains: "Write that summary now"
    reply: [{text: "SUMMARY: greeted"}]
  - contains: "what next"
    reply: [{text: "answer"}]
`)
	var pre []string
	a := newAgent(t, srv, func(c *agent.Config) {
		asAlice(c)
		c.PreCompact = func(_ context.Context, reason agent.CompactReason, focus string) {
			pre = append(pre, string(reason)+":"+focus+":"+strconv.Itoa(len(srv.Requests())))
		}
		c.PostCompact = func(_ context.Context, rec agent.Compaction) []llm.Block {
			return []llm.Block{llm.TextBlock("CONTEXT AFTER COMPACTION (" + rec.Summary + ")")}
		}
	})
	ctx := context.Background()
	if _, err := a.Run(ctx, llm.TextBlock("hello")); err != nil {
		t.Fatal(err)
	}
	if err := a.Compact(ctx, "the greeting"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, llm.TextBlock("what next")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"manual:the greeting:1"}, pre); diff != "" {
		t.Errorf("PreCompact (-want +got):\n%s", diff)
	}
	var texts []string
	for _, b := range requestBodies(t, srv)[2].last() {
		texts = append(texts, b.Text)
	}
	if !strings.Contains(strings.Join(texts, "|"), "CONTEXT AFTER COMPACTION (SUMMARY: greeted)") {
		t.Errorf("the turn after compaction: %q", texts)
	}
}
