package fakeapi_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
)

// agentBody is a request shaped like an agent's at turn turns of a tool
// loop: twenty tools, a system prompt of two blocks, the first message, and
// turns rounds of a bash tool call and its result, the last result marked
// for the cache. tag makes the last round's ids and texts unique.
func agentBody(turns int, tag string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"max_tokens":4096,"messages":[{"content":[{"text":"Run the benchmark: call bash with echo on every turn.","type":"text"}],"role":"user"}`)
	for i := 1; i <= turns; i++ {
		id := fmt.Sprintf("toolu_%d", i)
		if i == turns {
			id += tag
		}
		fmt.Fprintf(&b, `,{"content":[{"text":"Turn %d.","type":"text"},{"id":%q,"input":{"command":"echo turn %d"},"name":"bash","type":"tool_use"}],"role":"assistant"}`, i, id, i)
		cc := ""
		if i == turns {
			cc = `"cache_control":{"type":"ephemeral"},`
		}
		fmt.Fprintf(&b, `,{"content":[{%s"content":[{"text":"turn %d\n%s","type":"text"}],"is_error":false,"tool_use_id":%q,"type":"tool_result"}],"role":"user"}`, cc, i, strings.Repeat(`output line\n`, 20), id)
	}
	b.WriteString(`],"model":"claude-sonnet-4-5","stream":true,"system":[{"text":"You are team-lead, an agent of troupe.`)
	b.WriteString(strings.Repeat(" Work carefully and report what you did.", 60))
	b.WriteString(`","type":"text"},{"cache_control":{"type":"ephemeral"},"text":"Workspace: /tmp/ws","type":"text"}],"tools":[`)
	for i := range 20 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"description":"Tool %d. %s","input_schema":{"properties":{"command":{"description":"what to run","type":"string"},"timeout":{"type":"integer"}},"required":["command"],"type":"object"},"name":"tool_%d"}`, i, strings.Repeat("It does one thing well. ", 10), i)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// BenchmarkServeHistory is the fake server's cost for one call of an agent
// whose history holds the given number of tool rounds: each call repeats
// the history of the one before and adds a round of its own, as an agent's
// calls do.
func BenchmarkServeHistory(b *testing.B) {
	s, err := fakeapi.ParseScript([]byte("rules:\n  - times: 0\n    reply:\n      - tool_use: {name: bash, input: {command: echo}}\n"))
	if err != nil {
		b.Fatal(err)
	}
	for _, turns := range []int{10, 100, 400} {
		b.Run(fmt.Sprintf("turns=%d", turns), func(b *testing.B) {
			srv := fakeapi.New(s, fakeapi.Options{})
			defer srv.Close()
			size := 0
			n := 0
			for b.Loop() {
				b.StopTimer()
				n++
				body := agentBody(turns, fmt.Sprintf("_%d", n))
				size = len(body)
				req := httptest.NewRequest(http.MethodPost, "/v1/messages", bytes.NewReader(body))
				req.Header.Set("x-api-key", "k")
				req.Header.Set("anthropic-version", "2023-06-01")
				w := httptest.NewRecorder()
				b.StartTimer()
				srv.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
			b.ReportMetric(float64(size)/1024, "KB/body")
		})
	}
}

// BenchmarkServeConversation is the fake server's cost per call of one
// agent's conversation as it grows, call after call, from 20 to 219 tool
// rounds (then again): each body is the one before with a round added and
// the cache breakpoint moved onto it, which the server reads against the
// split and the prompt-cache chain of the call before.
func BenchmarkServeConversation(b *testing.B) {
	s, err := fakeapi.ParseScript([]byte("rules:\n  - times: 0\n    reply:\n      - tool_use: {name: bash, input: {command: echo}}\n"))
	if err != nil {
		b.Fatal(err)
	}
	srv := fakeapi.New(s, fakeapi.Options{NoRecords: true})
	defer srv.Close()
	bodies := make([][]byte, 200)
	size := 0
	for i := range bodies {
		bodies[i] = agentBody(20+i, "")
		size += len(bodies[i])
	}
	n := 0
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/v1/messages", bytes.NewReader(bodies[n%len(bodies)]))
		n++
		req.Header.Set("x-api-key", "k")
		req.Header.Set("anthropic-version", "2023-06-01")
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
	b.ReportMetric(float64(size)/float64(len(bodies))/1024, "KB/body")
}
