package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi/fakeapitest"
)

// sdkBody is the body the SDK sent before the encoder: buildParams
// marshalled by the SDK, with "stream":true appended as NewStreaming's
// sjson set appends it (TestWireBodyIsTheSDKs checks the real thing).
func sdkBody(t testing.TB, req *llm.Request) []byte {
	t.Helper()
	params, err := buildParams(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := params.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return append(b[:len(b)-1], `,"stream":true}`...)
}

var tools = []llm.ToolSpec{
	{Name: "bash", Description: "Run <a> command & see", InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"integer"}},"required":["command"],"additionalProperties":false}`)},
	{Name: "read_file", Description: "read", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
	{Name: "no_schema"},
}

// variedTurn returns the assistant reply and the user answer of turn i,
// cycling through every kind of block the encoder caches.
func variedTurn(i int) (llm.Message, llm.Message) {
	id := fmt.Sprintf("toolu_%03d", i)
	reply := llm.Message{Role: llm.RoleAssistant}
	user := llm.Message{Role: llm.RoleUser}
	switch i % 5 {
	case 0:
		reply.Content = []llm.Block{llm.TextBlock("Let me look <here> & \u2028 \"there\"\n"),
			{Type: llm.BlockToolUse, ID: id, Name: "bash", Input: json.RawMessage(`{"command":"echo <hi> & ünï"}`)}}
		user.Content = []llm.Block{llm.ToolResultBlock(id, "hi\n\x01\t", false)}
	case 1:
		reply.Content = []llm.Block{{Type: llm.BlockThinking, Thinking: "hmm", Signature: "sig=="},
			{Type: llm.BlockThinking, Thinking: "unsigned: dropped"},
			{Type: llm.BlockToolUse, ID: id, Name: "read_file", Input: json.RawMessage(`{"path": "a.go" }`)}}
		user.Content = []llm.Block{llm.ToolResultBlock(id, "", true), llm.TextBlock("and also this")}
	case 2:
		reply.Content = []llm.Block{{Type: llm.BlockToolUse, ID: id, Name: "bash", Input: json.RawMessage(`not json`)},
			{Type: llm.BlockToolUse, ID: id + "b", Name: "bash"}}
		user.Content = []llm.Block{
			{Type: llm.BlockToolResult, ToolUseID: id, Content: "a picture", Images: []llm.Image{{MediaType: "image/png", Data: "iVBORw0KGgo="}, {MediaType: "image/bmp", Data: "Qk0="}}},
			llm.ToolResultBlock(id+"b", strings.Repeat("long output line\n", 50), false)}
	case 3:
		reply.Content = []llm.Block{llm.TextBlock("just text"), llm.TextBlock("")}
		user.Content = []llm.Block{llm.TextBlock("a message from a teammate")}
	case 4:
		// Two user messages in a row: Normalize merges them, results first.
		reply.Content = []llm.Block{{Type: llm.BlockToolUse, ID: id, Name: "bash", Input: json.RawMessage(`{}`)}}
		user.Content = []llm.Block{llm.TextBlock("interrupt"), llm.ToolResultBlock(id, "done", false)}
	}
	return reply, user
}

func TestBodyMatchesSDKEncoding(t *testing.T) {
	enc := newEncoder()
	req := &llm.Request{
		Agent:      "dev-1",
		System:     "You are <dev> & friends.",
		SystemTail: "You are dev-1.",
		Tools:      tools,
		MaxTokens:  1000,
		Messages:   []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("start")}}},
	}
	check := func(what string) {
		t.Helper()
		rb, err := enc.body(req)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		got := rb.bytes()
		if len(got) != rb.size {
			t.Fatalf("%s: size %d, body %d bytes", what, rb.size, len(got))
		}
		read, err := io.ReadAll(&pieceReader{pieces: rb.pieces})
		if err != nil || !bytes.Equal(read, got) {
			t.Fatalf("%s: the reader gave %d bytes (%v), want %d", what, len(read), err, len(got))
		}
		want := sdkBody(t, req)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: body differs from the SDK's:\n%s", what, cmp.Diff(string(want), string(got)))
		}
	}
	check("first turn")
	for i := range 25 {
		reply, user := variedTurn(i)
		req.Messages = append(req.Messages, reply, user)
		if i == 7 {
			// A user message of its own: merged with the one before.
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("more")}})
		}
		check(fmt.Sprintf("turn %d", i))
		switch i {
		case 10:
			req.CacheTTL = llm.CacheTTL1h
			check("ttl 1h")
		case 12:
			req.CacheTTL = llm.CacheTTL5m
			req.Model, req.MaxTokens = "claude-<x>", 0
			req.SystemTail = ""
			check("ttl 5m, default max tokens")
		case 15:
			// The history rewritten in place (compaction): equal-looking
			// blocks in a new backing array, one of them changed.
			h := append([]llm.Message(nil), req.Messages...)
			h[3] = llm.Message{Role: h[3].Role, Content: append([]llm.Block(nil), h[3].Content...)}
			h[3].Content[0].Content = "compacted"
			req.Messages = h
			check("rewritten history")
		case 18:
			// Input changed in place: the cache kept its own copy.
			for j := range req.Messages {
				for k := range req.Messages[j].Content {
					if in := req.Messages[j].Content[k].Input; len(in) > 2 {
						in[len(in)-2] = ' '
					}
				}
			}
			check("inputs changed in place")
		case 20:
			req.Messages = req.Messages[:9] // cut back to an earlier point
			check("shortened history")
			req.Tools = tools[:1]
			req.System = ""
			check("other tools, no system")
		}
	}
}

func TestBodyErrorsAsBefore(t *testing.T) {
	enc := newEncoder()
	for _, req := range []*llm.Request{
		{Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("")}}}},
		{Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("x")}}}, CacheTTL: "2h"},
		{Messages: []llm.Message{{Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock("x")}}}},
		{Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("x")}}}, Tools: []llm.ToolSpec{{Name: "bad", InputSchema: json.RawMessage(`{`)}}},
	} {
		_, wantErr := buildParams(req)
		_, err := enc.body(req)
		if wantErr == nil || err == nil || err.Error() != wantErr.Error() {
			t.Errorf("error %v, want %v", err, wantErr)
		}
		if errors.Is(wantErr, llm.ErrInvalidRequest) != errors.Is(err, llm.ErrInvalidRequest) {
			t.Errorf("%v: ErrInvalidRequest not kept", err)
		}
	}
}

// TestWireBodyIsTheSDKs checks what reaches the server, byte for byte,
// over several turns of one conversation.
func TestWireBodyIsTheSDKs(t *testing.T) {
	srv := fakeapitest.StartTest(t, "rules:\n  - times: 0\n    reply:\n      - text: ok\n")
	p, err := New(Config{APIKey: "sk-test", BaseURL: srv.URL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	req := &llm.Request{Agent: "a", System: "sys", Tools: tools,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("go")}}}}
	var want [][]byte
	for _, i := range []int{-1, 0, 1, 2, 3, 5, 6} { // 4 has text before results: the fake refuses it
		if i >= 0 {
			reply, user := variedTurn(i)
			req.Messages = append(req.Messages, reply, user)
		}
		want = append(want, sdkBody(t, req))
		if _, err := llm.Collect(p.Stream(context.Background(), req), nil); err != nil {
			t.Fatal(err)
		}
	}
	recs := srv.Requests()
	if len(recs) != len(want) {
		t.Fatalf("%d requests, want %d", len(recs), len(want))
	}
	for i, r := range recs {
		if !bytes.Equal(r.Body, want[i]) {
			t.Errorf("request %d differs from the SDK's body:\n%s", i, cmp.Diff(string(want[i]), string(r.Body)))
		}
	}
}

// TestConversationsBounded: past maxConversations the least recently used
// conversation is dropped, and its next request is still right.
func TestConversationsBounded(t *testing.T) {
	enc := newEncoder()
	req := func(agent string) *llm.Request {
		return &llm.Request{Agent: agent, Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("hi " + agent)}}}}
	}
	for i := range maxConversations {
		if _, err := enc.body(req(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := enc.body(req("0")); err != nil { // 0 is now the most recent; 1 the least
		t.Fatal(err)
	}
	rb, err := enc.body(req("new"))
	if err != nil {
		t.Fatal(err)
	}
	if len(enc.convs) != maxConversations || enc.convs["1"] != nil || enc.convs["0"] == nil || enc.convs["new"] == nil {
		t.Errorf("%d conversations; 0 kept %v, 1 dropped %v", len(enc.convs), enc.convs["0"] != nil, enc.convs["1"] == nil)
	}
	if want := sdkBody(t, req("new")); !bytes.Equal(rb.bytes(), want) {
		t.Errorf("body %s, want %s", rb.bytes(), want)
	}
	rb, err = enc.body(req("1"))
	if err != nil || !bytes.Equal(rb.bytes(), sdkBody(t, req("1"))) {
		t.Errorf("a dropped conversation comes back wrong: %v", err)
	}
}

// historyOf returns a request whose history is about kb kilobytes, in
// turns like a coding agent's (a short reply with a tool call, a result).
func historyOf(kb int) *llm.Request {
	req := &llm.Request{Agent: "bench", System: strings.Repeat("You are a coding agent. ", 400), Tools: tools,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("Fix the tests.")}}}}
	size := 0
	for i := 0; size < kb*1024; i++ {
		id := fmt.Sprintf("toolu_%06d", i)
		out := strings.Repeat(fmt.Sprintf("line %d of the output of a command\n", i), 12)
		req.Messages = append(req.Messages,
			llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock("Next I run the command."),
				{Type: llm.BlockToolUse, ID: id, Name: "bash", Input: json.RawMessage(`{"command":"go test ./..."}`)}}},
			llm.Message{Role: llm.RoleUser, Content: []llm.Block{llm.ToolResultBlock(id, out, false)}})
		size += len(out) + 120
	}
	return req
}

// BenchmarkEncode is the cost of one turn's request body once the history
// before the turn is cached: what every turn but the first pays. It should
// not grow with the history.
func BenchmarkEncode(b *testing.B) {
	for _, kb := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("history=%dKB", kb), func(b *testing.B) {
			req := historyOf(kb)
			enc := newEncoder()
			if _, err := enc.body(&llm.Request{Agent: req.Agent, System: req.System, Tools: req.Tools, Messages: req.Messages[:len(req.Messages)-2]}); err != nil {
				b.Fatal(err)
			}
			c := enc.convs[req.Agent]
			n := len(req.Messages)
			var size int
			cpu := threadCPU(b)
			for b.Loop() {
				c.msgs = c.msgs[:n-2] // back to the turn before: its two new messages encode again
				body, err := enc.body(req)
				if err != nil {
					b.Fatal(err)
				}
				size = body.size
			}
			b.ReportMetric(float64(size)/1024, "body_KB")
			b.ReportMetric(float64(cpu())/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkEncodeSDK is the same turn encoded whole through the SDK's
// params, as every request was before the encoder.
func BenchmarkEncodeSDK(b *testing.B) {
	for _, kb := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("history=%dKB", kb), func(b *testing.B) {
			req := historyOf(kb)
			cpu := threadCPU(b)
			for b.Loop() {
				params, err := buildParams(req)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := params.MarshalJSON(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpu())/float64(b.N), "cpu-ns/op")
		})
	}
}

// threadCPU pins the benchmark to its thread and returns a function giving
// the CPU time the thread has used since: on a shared machine wall time
// mostly measures the neighbours.
func threadCPU(b *testing.B) func() int64 {
	runtime.LockOSThread()
	b.Cleanup(runtime.UnlockOSThread)
	now := func() int64 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(rusageThread, &ru); err != nil {
			b.Fatal(err)
		}
		return ru.Utime.Nano() + ru.Stime.Nano()
	}
	start := now()
	return func() int64 { return now() - start }
}

const rusageThread = 1 // RUSAGE_THREAD (Linux)

// A team of more agents than the encoder's shared lists hold: each agent's
// system prompt is encoded once, and its body is still the SDK's.
func TestSystemEncodedOncePerAgent(t *testing.T) {
	enc := newEncoder()
	const agents = 3 * maxToolSets
	first := map[string]*byte{}
	for round := range 2 {
		for i := range agents {
			name := fmt.Sprintf("w%d", i)
			req := &llm.Request{Agent: name, System: "You are a worker of the team.", SystemTail: "You are " + name + ".", Tools: tools,
				Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(fmt.Sprintf("round %d", round))}}}}
			rb, err := enc.body(req)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := rb.bytes(), sdkBody(t, req); !bytes.Equal(got, want) {
				t.Fatalf("%s round %d: body differs from the SDK's:\n%s", name, round, cmp.Diff(string(want), string(got)))
			}
			sys := &enc.conversation(name).system.json[0]
			if round == 0 {
				first[name] = sys
			} else if first[name] != sys {
				t.Fatalf("%s: its system prompt was encoded again", name)
			}
		}
	}
}
