package agent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/compact"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi/fakeapitest"
	"github.com/troupe-dev/troupe/internal/todo"
	"github.com/troupe-dev/troupe/internal/tool"
)

var _ agent.Compactor = (*compact.Compactor)(nil)

var aliceID = agent.Identity{Name: "alice", Role: "backend", Team: "T"}

// asAlice makes the test agent the teammate alice, compacting.
func asAlice(c *agent.Config) {
	c.Name, c.Team = "alice", "T"
	c.System = agent.Prompt{Identity: aliceID}.String()
	c.Identity = aliceID.Line()
	c.Compactor = &compact.Compactor{}
}

// saveTranscript appends msgs to a JSON-lines file, as an owner's OnCompact
// would before the history is dropped.
func saveTranscript(path string, msgs []llm.Message) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, m := range msgs {
		if err := enc.Encode(m); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

func loadTranscript(t *testing.T, path string) []llm.Message {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []llm.Message
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m llm.Message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// TestAutoCompactionFromReportedUsage: the first call reports a context
// near the window; before the next call the history is saved, summarised
// and replaced, and the conversation goes on from the summary with alice's
// identity in place.
func TestAutoCompactionFromReportedUsage(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - agent: alice
    contains: "fix the parser"
    reply: [{text: "Reading it."}, {tool_use: {name: echo, input: {}}}]
    usage: {input_tokens: 2000, cache_read_input_tokens: 158000}
  - agent: alice
    contains: "Write that summary now"
    reply: [{text: "SUMMARY: parser bug is in parse.go; next, write the fix."}]
  - agent: alice
    contains: "SUMMARY: parser bug"
    reply: [{text: "done"}]
`)
	echo := &fnTool{name: "echo", run: func(context.Context, json.RawMessage) tool.Result { return tool.OK("echoed") }}
	path := filepath.Join(t.TempDir(), "alice.jsonl")
	var (
		a        *agent.Agent
		records  []agent.Compaction
		atRecord []llm.Message
	)
	a = newAgent(t, srv, func(c *agent.Config) {
		asAlice(c)
		c.OnCompact = func(rec agent.Compaction) error {
			atRecord = a.Messages() // still the full history
			records = append(records, rec)
			return saveTranscript(path, rec.Replaced)
		}
	}, echo)
	res, err := a.Run(context.Background(), llm.TextBlock("fix the parser"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "done" {
		t.Errorf("text = %q", res.Text)
	}
	reqs := requestBodies(t, srv)
	if len(reqs) != 3 || len(records) != 1 {
		t.Fatalf("%d requests, %d compactions", len(reqs), len(records))
	}
	rec := records[0]
	if rec.Reason != agent.CompactAuto || !strings.HasPrefix(rec.Summary, "SUMMARY: parser bug") {
		t.Errorf("compaction = %+v", rec)
	}
	if rec.ContextTokens < 160_000 {
		t.Errorf("context = %d, want the reported 160000 and more", rec.ContextTokens)
	}
	// The full history reached OnCompact and the disk before it was
	// replaced: input, the assistant's call, the tool result.
	if len(rec.Replaced) != 3 || rec.Replaced[0].Text() != "fix the parser" {
		t.Errorf("replaced = %+v", rec.Replaced)
	}
	if diff := cmp.Diff(rec.Replaced, atRecord); diff != "" {
		t.Errorf("history when OnCompact ran (-replaced +seen):\n%s", diff)
	}
	if diff := cmp.Diff(rec.Replaced, loadTranscript(t, path)); diff != "" {
		t.Errorf("transcript on disk (-want +got):\n%s", diff)
	}
	// The request after compaction: one user turn with identity and
	// summary (valid: the fake API answered it with 200).
	after := reqs[2]
	if len(after.Messages) != 1 || after.Messages[0].Role != "user" {
		t.Fatalf("messages after compaction = %+v", after.Messages)
	}
	first := after.last()[0].Text
	for _, want := range []string{"You are teammate 'alice' (backend) in team 'T'.", "<summary>\nSUMMARY: parser bug", "compacted"} {
		if !strings.Contains(first, want) {
			t.Errorf("first message lacks %q:\n%s", want, first)
		}
	}
	if !strings.HasPrefix(first, aliceID.Line()) {
		t.Errorf("identity is not first:\n%s", first)
	}
	msgs := a.Messages()
	if len(msgs) != 2 || msgs[1].Text() != "done" {
		t.Errorf("conversation = %+v", msgs)
	}
}

// TestCompactToolRequest: the model calls compact with a focus; the
// summary call carries it and the loop goes on from the summary.
func TestCompactToolRequest(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - contains: "big job"
    reply: [{tool_use: {name: compact, input: {focus: "the migration plan"}}}]
  - contains: "Pay particular attention to: the migration plan"
    reply: [{text: "SUMMARY-2"}]
  - contains: "SUMMARY-2"
    reply: [{text: "carrying on"}]
`)
	var events []agent.EventType
	a := newAgent(t, srv, func(c *agent.Config) {
		asAlice(c)
		c.Observe = func(ev agent.Event) {
			if ev.Type == agent.EventCompact || ev.Type == agent.EventToolResult {
				events = append(events, ev.Type)
			}
		}
	}, tool.CompactTool())
	res, err := a.Run(context.Background(), llm.TextBlock("big job"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "carrying on" {
		t.Errorf("text = %q", res.Text)
	}
	reqs := requestBodies(t, srv)
	if len(reqs) != 3 || len(reqs[2].Messages) != 1 {
		t.Fatalf("requests = %d", len(reqs))
	}
	if diff := cmp.Diff([]agent.EventType{agent.EventToolResult, agent.EventCompact}, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestCompactToolWithoutCompactor(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - reply: [{tool_use: {name: compact, input: {}}}]
  - contains: "not available"
    reply: [{text: "ok"}]
`)
	a := newAgent(t, srv, nil, tool.CompactTool())
	if _, err := a.Run(context.Background(), llm.TextBlock("go")); err != nil {
		t.Fatal(err)
	}
	if got := requestBodies(t, srv)[1].last()[0]; !got.IsError {
		t.Errorf("result = %+v", got)
	}
	if err := a.Compact(context.Background(), ""); !errors.Is(err, agent.ErrNoCompactor) {
		t.Errorf("Compact err = %v", err)
	}
}

// TestManualCompact is /compact between two runs: the history becomes the
// summary and the next input rides after it.
func TestManualCompact(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - contains: "hello"
    reply: [{text: "hi there"}]
  - contains: "Write that summary now"
    reply: [{text: "SUMMARY-3: greeted"}]
  - contains: "what next"
    reply: [{text: "answer"}]
`)
	var recorded []llm.Message
	var records []agent.Compaction
	a := newAgent(t, srv, func(c *agent.Config) {
		asAlice(c)
		c.Record = func(m llm.Message) { recorded = append(recorded, m) }
		c.OnCompact = func(rec agent.Compaction) error { records = append(records, rec); return nil }
	})
	ctx := context.Background()
	if _, err := a.Run(ctx, llm.TextBlock("hello")); err != nil {
		t.Fatal(err)
	}
	if err := a.Compact(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if len(records) != 1 || records[0].Reason != agent.CompactManual || len(records[0].Replaced) != 2 {
		t.Fatalf("records = %+v", records)
	}
	if _, err := a.Run(ctx, llm.TextBlock("what next")); err != nil {
		t.Fatal(err)
	}
	last := requestBodies(t, srv)[2]
	if len(last.Messages) != 1 {
		t.Fatalf("%d messages after compaction", len(last.Messages))
	}
	blocks := last.last()
	if !strings.Contains(blocks[0].Text, "SUMMARY-3: greeted") || blocks[len(blocks)-1].Text != "what next" {
		t.Errorf("turn = %+v", blocks)
	}
	// Record saw the old history, then the new conversation.
	if len(recorded) != 5 || recorded[2].Role != llm.RoleUser || !strings.Contains(recorded[2].Text(), "SUMMARY-3") {
		t.Errorf("recorded = %+v", recorded)
	}
}

// TestOnCompactErrorKeepsHistory: when the history cannot be saved, it is
// not dropped.
func TestOnCompactErrorKeepsHistory(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - contains: "hello"
    reply: [{text: "hi"}]
  - contains: "Write that summary now"
    reply: [{text: "SUMMARY"}]
`)
	boom := errors.New("disk full")
	a := newAgent(t, srv, func(c *agent.Config) {
		asAlice(c)
		c.OnCompact = func(agent.Compaction) error { return boom }
	})
	if _, err := a.Run(context.Background(), llm.TextBlock("hello")); err != nil {
		t.Fatal(err)
	}
	before := a.Messages()
	if err := a.Compact(context.Background(), ""); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if diff := cmp.Diff(before, a.Messages()); diff != "" {
		t.Errorf("history changed (-before +after):\n%s", diff)
	}
}

// TestMicroCompactionInTheLoop: bulky results older than the last three
// reach the model as markers once enough can be reclaimed.
func TestMicroCompactionInTheLoop(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - times: 5
    reply: [{tool_use: {name: dump, input: {}}}]
  - reply: [{text: done}]
`)
	dump := &fnTool{name: "dump", readOnly: true, run: func(context.Context, json.RawMessage) tool.Result {
		return tool.OK(strings.Repeat("y", 25_000))
	}}
	a := newAgent(t, srv, asAlice, dump)
	if _, err := a.Run(context.Background(), llm.TextBlock("go")); err != nil {
		t.Fatal(err)
	}
	reqs := requestBodies(t, srv)
	var got []string
	for _, m := range reqs[5].Messages {
		for _, b := range m.Content {
			if b.Type == llm.BlockToolResult {
				s := ""
				for _, r := range b.Raw {
					s += r.Text
				}
				if len(s) > 200 {
					s = "whole"
				}
				got = append(got, s)
			}
		}
	}
	marker := "[old tool result of dump compacted: 25,000 chars; call the tool again if you need it]"
	if diff := cmp.Diff([]string{marker, marker, "whole", "whole", "whole"}, got); diff != "" {
		t.Errorf("results in the last request (-want +got):\n%s", diff)
	}
	// Four results, one eligible: nothing was rewritten yet.
	if n := strings.Count(string(srv.Requests()[4].Body), "compacted"); n != 0 {
		t.Errorf("request 5 holds %d markers", n)
	}
}

func TestTodoReminder(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - times: 3
    reply: [{tool_use: {name: echo, input: {}}}]
  - contains: "<reminder>Your todo list"
    reply: [{text: "noted"}]
`)
	list := new(todo.List)
	if err := list.Replace([]todo.Item{{Content: "Fix it", Status: todo.InProgress}}); err != nil {
		t.Fatal(err)
	}
	echo := &fnTool{name: "echo", run: func(context.Context, json.RawMessage) tool.Result { return tool.OK("echoed") }}
	a := newAgent(t, srv, func(c *agent.Config) { c.Boundaries = []agent.Boundary{agent.TodoReminder(list)} }, echo)
	res, err := a.Run(context.Background(), llm.TextBlock("go"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "noted" {
		t.Errorf("text = %q", res.Text)
	}
	reqs := requestBodies(t, srv)
	for i, want := range []int{1, 1, 2} { // blocks in the last turn of requests 2..4
		if n := len(reqs[i+1].last()); n != want {
			t.Errorf("request %d: %d blocks in the last turn, want %d", i+2, n, want)
		}
	}
}

// TestCompactionKeepsThePrefixStable runs 50 rounds with compaction on and
// compares each request with the previous one as a prefix cache does
// (tools, system, messages; cache_control markers aside). With small results,
// as in `troupe bench turn`, compaction must never touch history and the
// stable share stays at or above 0.9. With bulky results, where a careless
// micro-compaction would rewrite history on every call, history may only be
// rewritten once per threshold's worth of reclaimable output.
func TestCompactionKeepsThePrefixStable(t *testing.T) {
	tests := []struct {
		name         string
		size         int
		minRatio     float64
		maxRewrites  int
		wantCompacts bool
	}{
		{name: "small results", size: 20, minRatio: 0.9},
		// 47 results become eligible at 8,000 chars; one rewrite per
		// 40,000 reclaimable makes at most 10.
		{name: "bulky results", size: 8_000, maxRewrites: 10, wantCompacts: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakeapitest.StartTest(t, `
rules:
  - times: 0
    reply: [{tool_use: {name: dump, input: {}}}]
`)
			n := 0
			dump := &fnTool{name: "dump", run: func(context.Context, json.RawMessage) tool.Result {
				n++
				return tool.OK(strings.Repeat(string(rune('a'+n%26)), tt.size))
			}}
			a := newAgent(t, srv, func(c *agent.Config) { asAlice(c); c.MaxTurns = 50 }, dump)
			if _, err := a.Run(context.Background(), llm.TextBlock("go")); !errors.Is(err, agent.ErrMaxTurns) {
				t.Fatalf("err = %v", err)
			}
			var prev []byte
			same, total, rewrites := 0, 0, 0
			for _, r := range srv.Requests() {
				if r.Status != 200 {
					t.Fatalf("request %d: status %d", r.N, r.Status)
				}
				cur := withoutCacheControl(t, r.Body)
				k := 0
				for k < len(prev) && k < len(cur) && prev[k] == cur[k] {
					k++
				}
				if prev != nil {
					same, total = same+k, total+len(cur)
					// Only the closing "]" of the messages may differ
					// when history grew at its end.
					if k < len(prev)-1 {
						rewrites++
					}
				}
				prev = cur
			}
			ratio := float64(same) / float64(total)
			markers := strings.Count(string(prev), "[old tool result of dump compacted")
			t.Logf("prefix stable ratio %.3f, %d rewrites, %d markers", ratio, rewrites, markers)
			if ratio < tt.minRatio {
				t.Errorf("prefix stable ratio = %.3f, want >= %.1f", ratio, tt.minRatio)
			}
			if rewrites > tt.maxRewrites {
				t.Errorf("history rewritten %d times, want at most %d", rewrites, tt.maxRewrites)
			}
			if (markers > 0) != tt.wantCompacts {
				t.Errorf("%d markers in the last request", markers)
			}
		})
	}
}

func withoutCacheControl(t *testing.T, body []byte) []byte {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	var strip func(any)
	strip = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			delete(x, "cache_control")
			for _, e := range x {
				strip(e)
			}
		case []any:
			for _, e := range x {
				strip(e)
			}
		}
	}
	strip(v)
	var out []byte
	for _, k := range []string{"tools", "system", "messages"} {
		b, err := json.Marshal(v[k])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}
