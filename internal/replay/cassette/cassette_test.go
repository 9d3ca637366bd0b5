package cassette_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/anthropic"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi/fakeapitest"
	"github.com/troupe-dev/troupe/internal/replay/cassette"
	"github.com/troupe-dev/troupe/internal/replay/pace"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// twoAgents scripts a lead and a teammate, each making a tool call and then
// finishing; every usage is explicit so totals can be checked exactly.
const twoAgents = `
rules:
  - agent: team-lead
    contains: "plan"
    reply:
      - text: "Let me look at the tree."
      - tool_use: {name: bash, input: {command: "ls"}}
    usage: {input_tokens: 100, output_tokens: 20, cache_read_input_tokens: 50, cache_creation_input_tokens: 10}
  - agent: team-lead
    contains: "README"
    reply: [{text: "The plan is ready."}]
    usage: {input_tokens: 130, output_tokens: 8, cache_read_input_tokens: 60}
  - agent: alice
    contains: "tests"
    reply:
      - thinking: "which package first?"
      - tool_use: {name: bash, input: {command: "go test ./..."}}
    usage: {input_tokens: 90, output_tokens: 25}
  - agent: alice
    contains: "ok"
    reply: [{text: "All tests pass <ok> & done."}]
    usage: {input_tokens: 120, output_tokens: 9, cache_creation_input_tokens: 40}
`

var wantUsage = llm.Usage{InputTokens: 100 + 130 + 90 + 120, OutputTokens: 20 + 8 + 25 + 9, CacheReadTokens: 50 + 60, CacheWriteTokens: 10 + 40}

type agentSpec struct{ name, system, first, toolOutput string }

var agents = []agentSpec{
	{"team-lead", "You are 'team-lead', the lead of team 'demo'.", "plan the work", "README.md main.go"},
	{"alice", "You are teammate 'alice' (tester) in team 'demo'.", "run the tests", "ok  	demo	0.01s"},
}

// run plays one agent's two-call conversation on p, returning what it saw:
// the responses and a transcript of the streamed events.
func run(ctx context.Context, p llm.Provider, a agentSpec) ([]*llm.Response, []string, error) {
	req := &llm.Request{
		Agent:     a.name,
		System:    a.system,
		MaxTokens: 1024,
		Messages:  []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(a.first)}}},
		Tools:     []llm.ToolSpec{{Name: "bash", Description: "run", InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}}}`)}},
	}
	var resps []*llm.Response
	var events []string
	for range 2 {
		resp, err := llm.Collect(p.Stream(ctx, req), func(ev llm.Event) {
			switch ev.Type {
			case llm.EventText, llm.EventThinking:
				if n := len(events); n > 0 && strings.HasPrefix(events[n-1], string(ev.Type)+":") {
					events[n-1] += ev.Text // deltas differ from replay's whole blocks; their sum does not
					return
				}
				events = append(events, string(ev.Type)+":"+ev.Text)
			case llm.EventToolStart:
				events = append(events, "tool:"+ev.Name+" "+ev.ID)
			}
		})
		if err != nil {
			return resps, events, err
		}
		resps = append(resps, resp)
		req.Messages = append(req.Messages, resp.Message)
		var results []llm.Block
		for _, tu := range resp.Message.ToolUses() {
			results = append(results, llm.ToolResultBlock(tu.ID, a.toolOutput, false))
		}
		if len(results) == 0 {
			break
		}
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Content: results})
	}
	return resps, events, nil
}

type outcome struct {
	resps  []*llm.Response
	events []string
	err    error
}

// runAll runs every agent at once on p.
func runAll(t *testing.T, p llm.Provider, specs []agentSpec) map[string]outcome {
	t.Helper()
	var mu sync.Mutex
	out := map[string]outcome{}
	var wg sync.WaitGroup
	for _, a := range specs {
		wg.Go(func() {
			resps, events, err := run(context.Background(), p, a)
			mu.Lock()
			out[a.name] = outcome{resps, events, err}
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// record runs both agents concurrently against the fake Anthropic API
// through a Recorder, then stops the fake.
func record(t *testing.T) (map[string]outcome, []byte) {
	t.Helper()
	srv := fakeapitest.StartTest(t, twoAgents)
	tr := &http.Transport{}
	p, err := anthropic.New(anthropic.Config{APIKey: "sk-test-secret", BaseURL: srv.URL(), HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	rec := cassette.NewRecorder(p, &buf, cassette.Header{Args: []string{"troupe", "-p", "build it"}, Meta: map[string]string{"team": "demo"}})
	got := runAll(t, rec, agents)
	for name, o := range got {
		if o.err != nil {
			t.Fatalf("%s: %v", name, o.err)
		}
	}
	if err := rec.Err(); err != nil {
		t.Fatal(err)
	}
	if n := srv.Unmatched(); n != 0 {
		t.Fatalf("%d calls fell to the fake's fallback", n)
	}
	tr.CloseIdleConnections()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	return got, buf.Bytes()
}

func load(t *testing.T, data []byte) *cassette.Cassette {
	t.Helper()
	c, err := cassette.Load(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRecordReplay(t *testing.T) {
	recorded, data := record(t)
	if bytes.Contains(data, []byte("sk-test-secret")) {
		t.Fatal("the API key is in the cassette")
	}
	c := load(t, data)
	if c.Header.Version != 1 || c.Header.Provider != "anthropic" || c.Header.CreatedAt.IsZero() ||
		!cmp.Equal(c.Header.Args, []string{"troupe", "-p", "build it"}) || c.Header.Meta["team"] != "demo" {
		t.Errorf("header = %+v", c.Header)
	}
	if diff := cmp.Diff(map[string]int{"team-lead": 2, "alice": 2}, c.Agents()); diff != "" {
		t.Errorf("agents (-want +got):\n%s", diff)
	}
	for _, e := range c.Entries {
		if e.Request.MaxTokens != 1024 || len(e.Request.Tools) != 1 || e.Response == nil {
			t.Errorf("entry %s/%d = %+v", e.Agent, e.Seq, e)
		}
	}

	// No server now: everything comes from the cassette.
	rp := cassette.NewReplayer(c)
	if rp.Name() != "anthropic" {
		t.Errorf("replayer name = %q", rp.Name())
	}
	replayed := runAll(t, rp, agents)
	if diff := cmp.Diff(recorded, replayed, cmp.AllowUnexported(outcome{}), cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
		t.Errorf("replay differs from the recording (-recorded +replayed):\n%s", diff)
	}
	if d := rp.Divergence(); d != nil {
		t.Errorf("divergence: %v", d)
	}
	if u := rp.Unused(); len(u) != 0 {
		t.Errorf("unused calls: %v", u)
	}
}

func TestUsageTotals(t *testing.T) {
	recorded, data := record(t)
	if diff := cmp.Diff(wantUsage, load(t, data).Usage()); diff != "" {
		t.Errorf("cassette usage (-fake's +cassette's):\n%s", diff)
	}
	var live llm.Usage
	for _, o := range recorded {
		for _, r := range o.resps {
			live.Add(r.Usage)
		}
	}
	if diff := cmp.Diff(wantUsage, live); diff != "" {
		t.Errorf("live usage (-fake's +provider's):\n%s", diff)
	}
}

func TestDivergence(t *testing.T) {
	_, data := record(t)
	for _, tc := range []struct {
		name   string
		change func([]agentSpec) []agentSpec
		agent  string
		seq    int
		path   string
		want   string
		got    string
	}{
		{
			name:   "user text",
			change: func(s []agentSpec) []agentSpec { s[1].first = "run the unit tests"; return s },
			agent:  "alice", seq: 1, path: "messages[0].content[0].text",
			want: `"run the tests"`, got: `"run the unit tests"`,
		},
		{
			name: "system prompt",
			change: func(s []agentSpec) []agentSpec {
				s[0].system = "You are 'team-lead', the boss of team 'demo'."
				return s
			},
			agent: "team-lead", seq: 1, path: "system",
			want: `"You are 'team-lead', the lead of team 'demo'."`, got: `"You are 'team-lead', the boss of team 'demo'."`,
		},
		{
			name:   "tool output in the second call",
			change: func(s []agentSpec) []agentSpec { s[1].toolOutput = "FAIL demo"; return s },
			agent:  "alice", seq: 2, path: "messages[2].content[0].content",
			want: `"ok  \tdemo\t0.01s"`, got: `"FAIL demo"`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rp := cassette.NewReplayer(load(t, data))
			specs := tc.change(append([]agentSpec(nil), agents...))
			out := runAll(t, rp, specs)
			var d *cassette.Divergence
			if !errors.As(out[tc.agent].err, &d) {
				t.Fatalf("%s: err = %v, want a *Divergence", tc.agent, out[tc.agent].err)
			}
			want := &cassette.Divergence{Agent: tc.agent, Seq: tc.seq, Path: tc.path, Want: tc.want, Got: tc.got}
			if diff := cmp.Diff(want, d); diff != "" {
				t.Errorf("divergence (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, rp.Divergence()); diff != "" {
				t.Errorf("Divergence() (-want +got):\n%s", diff)
			}
			for _, s := range []string{tc.agent, tc.path, "call " + string(rune('0'+tc.seq))} {
				if !strings.Contains(d.Error(), s) {
					t.Errorf("message %q does not name %q", d.Error(), s)
				}
			}
			for name, o := range out {
				if name != tc.agent && o.err != nil {
					t.Errorf("%s, unchanged, failed: %v", name, o.err)
				}
			}
			if tc.seq == 1 {
				if diff := cmp.Diff(map[string]int{tc.agent: 1}, rp.Unused()); diff != "" {
					t.Errorf("unused (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestExtraCallDiverges(t *testing.T) {
	_, data := record(t)
	rp := cassette.NewReplayer(load(t, data))
	runAll(t, rp, agents)
	req := &llm.Request{Agent: "alice", System: agents[1].system, Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("one more")}}}}
	_, err := llm.Collect(rp.Stream(context.Background(), req), nil)
	var d *cassette.Divergence
	if !errors.As(err, &d) || d.Agent != "alice" || d.Seq != 3 || d.Path != "" || !strings.Contains(d.Error(), "not in the recording") {
		t.Fatalf("err = %v", err)
	}
	_, err = llm.Collect(rp.Stream(context.Background(), &llm.Request{Agent: "bob"}), nil)
	if !errors.As(err, &d) || d.Agent != "bob" || d.Seq != 1 {
		t.Fatalf("unknown agent: err = %v", err)
	}
}

func TestLongValuesShortened(t *testing.T) {
	long := strings.Repeat("word ", 100)
	var buf bytes.Buffer
	rec := cassette.NewRecorder(fixed{}, &buf, cassette.Header{})
	req := &llm.Request{Agent: "a", Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(long + "END")}}}}
	if _, err := llm.Collect(rec.Stream(context.Background(), req), nil); err != nil {
		t.Fatal(err)
	}
	rp := cassette.NewReplayer(load(t, buf.Bytes()))
	req.Messages[0].Content[0].Text = long + "FIN"
	_, err := llm.Collect(rp.Stream(context.Background(), req), nil)
	var d *cassette.Divergence
	if !errors.As(err, &d) {
		t.Fatalf("err = %v", err)
	}
	if len(d.Want) > 200 || !strings.Contains(d.Want, "END") || !strings.Contains(d.Got, "FIN") || !strings.HasPrefix(d.Want, "…") {
		t.Errorf("want %q, got %q", d.Want, d.Got)
	}
}

// fixed answers every call with the same text; failing makes it fail.
type fixed struct{ fail error }

func (fixed) Name() string { return "fixed" }
func (f fixed) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		if f.fail != nil {
			yield(llm.Event{}, f.fail)
			return
		}
		if !yield(llm.Event{Type: llm.EventText, Text: "hi"}, nil) {
			return
		}
		yield(llm.Event{Type: llm.EventDone, Response: &llm.Response{ID: "r", Message: llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock("hi")}}, StopReason: llm.StopEndTurn}}, nil)
	}
}

func TestRecordedErrorReplayed(t *testing.T) {
	var buf bytes.Buffer
	cause := errors.Join(llm.ErrUnavailable, errors.New("overloaded after 6 attempts"))
	rec := cassette.NewRecorder(fixed{fail: cause}, &buf, cassette.Header{})
	req := &llm.Request{Agent: "a", Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("x")}}}}
	if _, err := llm.Collect(rec.Stream(context.Background(), req), nil); !errors.Is(err, llm.ErrUnavailable) {
		t.Fatalf("recorded call: %v", err)
	}
	c := load(t, buf.Bytes())
	if c.Header.Provider != "fixed" || len(c.Entries) != 1 || c.Entries[0].ErrorKind != "unavailable" {
		t.Fatalf("cassette = %+v", c)
	}
	_, err := llm.Collect(cassette.NewReplayer(c).Stream(context.Background(), req), nil)
	if !errors.Is(err, llm.ErrUnavailable) || err.Error() != cause.Error() {
		t.Errorf("replayed err = %v", err)
	}
}

func TestAbandonedCallRecorded(t *testing.T) {
	var buf bytes.Buffer
	rec := cassette.NewRecorder(fixed{}, &buf, cassette.Header{})
	req := &llm.Request{Agent: "a", Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("x")}}}}
	for range rec.Stream(context.Background(), req) {
		break
	}
	c := load(t, buf.Bytes())
	if len(c.Entries) != 1 || !strings.Contains(c.Entries[0].Error, "abandoned") {
		t.Fatalf("entries = %+v", c.Entries)
	}
}

// TestStepsKeptInOrder: a paced run's schedule goes to the cassette between
// the calls, and comes back in the order it was written.
func TestStepsKeptInOrder(t *testing.T) {
	var buf bytes.Buffer
	rec := cassette.NewRecorder(fixed{}, &buf, cassette.Header{})
	steps := []pace.Step{{Agent: "team-lead", Kind: "start"}, {Agent: "alice", Kind: "start"}, {Agent: "team-lead", Kind: "call", N: 1}, {Agent: "alice", Kind: "wake", N: 2}}
	req := &llm.Request{Agent: "team-lead", Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("x")}}}}
	for i, s := range steps {
		rec.Step(s)
		if i == 1 {
			if _, err := llm.Collect(rec.Stream(context.Background(), req), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := load(t, buf.Bytes())
	if diff := cmp.Diff(steps, c.Steps); diff != "" {
		t.Fatalf("steps (-want +got):\n%s", diff)
	}
	if len(c.Entries) != 1 {
		t.Fatalf("entries = %d, want 1", len(c.Entries))
	}
}

// TestDivergenceNotified: the replayer tells at once, once, so a team run
// stops at its first divergence instead of running on.
func TestDivergenceNotified(t *testing.T) {
	var buf bytes.Buffer
	rec := cassette.NewRecorder(fixed{}, &buf, cassette.Header{})
	req := &llm.Request{Agent: "a", Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("x")}}}}
	if _, err := llm.Collect(rec.Stream(context.Background(), req), nil); err != nil {
		t.Fatal(err)
	}
	rp := cassette.NewReplayer(load(t, buf.Bytes()))
	var told []error
	rp.OnDivergence(func(err error) { told = append(told, err) })
	changed := &llm.Request{Agent: "a", Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("y")}}}}
	for range 2 {
		if _, err := llm.Collect(rp.Stream(context.Background(), changed), nil); err == nil {
			t.Fatal("a changed request was answered")
		}
	}
	if len(told) != 1 || !strings.Contains(told[0].Error(), `agent "a" call 1`) {
		t.Fatalf("told %v, want the first divergence once", told)
	}
}

func TestReplayCancelled(t *testing.T) {
	_, data := record(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rp := cassette.NewReplayer(load(t, data))
	_, _, err := run(ctx, rp, agents[0])
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	const header = `{"version":1,"created_at":"2025-01-01T00:00:00Z","provider":"anthropic"}` + "\n"
	const entry = `{"agent":"a","seq":1,"request":{"model":"","system":"","messages":[],"tools":[],"max_tokens":0},"response":{"id":"r","model":"m","message":{"role":"assistant","content":[]},"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}}}` + "\n"
	for _, tc := range []struct{ data, want string }{
		{"", "empty"},
		{"not json\n", "line 1: header"},
		{`{"provider":"x"}` + "\n", "line 1: not a cassette header"},
		{`{"version":2}` + "\n", "line 1: version 2"},
		{header + entry + "{oops}\n", "line 3:"},
		{header + "\n" + entry + `{"agent":"a","seq":1`, "line 4: torn last entry"},
		{header + entry + entry, `agent "a": call 1 recorded twice`},
		{header + strings.Replace(entry, `"seq":1`, `"seq":2`, 1), `agent "a": call 1 missing`},
		{header + strings.Replace(entry, `"seq":1`, `"seq":0`, 1), "line 2: seq must be 1"},
		{header + `{"agent":"a","seq":1,"request":{}}` + "\n", "line 2: entry has neither"},
		{header + `{"step":{"agent":"a"}}` + "\n", "line 2: step without agent or kind"},
	} {
		_, err := cassette.Load(strings.NewReader(tc.data))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%.60q) = %v, want an error containing %q", tc.data, err, tc.want)
		}
	}
	if c, err := cassette.Load(strings.NewReader(header + entry)); err != nil || len(c.Entries) != 1 {
		t.Errorf("valid cassette: %v", err)
	}
}

func FuzzLoad(f *testing.F) {
	f.Add([]byte(`{"version":1,"provider":"anthropic"}` + "\n" + `{"agent":"a","seq":1,"request":{},"error":"x"}` + "\n"))
	f.Add([]byte(`{"version":1}` + "\n" + `{"agent":"a","seq":2,"request":{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]},"response":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := cassette.Load(bytes.NewReader(data))
		if err != nil {
			return
		}
		// Whatever loads can be replayed without panicking.
		rp := cassette.NewReplayer(c)
		for _, e := range c.Entries {
			req := &llm.Request{Agent: e.Agent, Model: e.Request.Model, System: e.Request.System, Messages: e.Request.Messages, Tools: e.Request.Tools, MaxTokens: e.Request.MaxTokens}
			_, _ = llm.Collect(rp.Stream(context.Background(), req), nil)
		}
		_ = c.Usage()
		_ = rp.Unused()
	})
}
