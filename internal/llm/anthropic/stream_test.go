package anthropic_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/anthropic"
)

// sse writes events as a Messages stream does.
func sse(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		typ := e[len(`{"type":"`):]
		typ = typ[:strings.IndexByte(typ, '"')]
		b.WriteString("event: " + typ + "\ndata: " + e + "\n\n")
	}
	return b.String()
}

// toolCallReply is a reply of the shape a bench turn gets: a sentence and
// a bash call whose input comes in three deltas.
var toolCallReply = sse(
	`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1,"cache_read_input_tokens":5,"cache_creation_input_tokens":7,"cache_creation":{"ephemeral_5m_input_tokens":4,"ephemeral_1h_input_tokens":3}}}}`,
	`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
	`{"type":"ping"}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Turn 1."}}`,
	`{"type":"content_block_stop","index":0}`,
	`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"bash","input":{}}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"comman"}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"d\":\"echo"}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" turn 1\"}"}}`,
	`{"type":"content_block_stop","index":1}`,
	`{"type":"message_delta","delta":{"type":"message_delta","stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":20,"input_tokens":12}}`,
	`{"type":"message_stop"}`,
)

// canned serves reply to every request and keeps the last request's
// headers.
type canned struct {
	srv   *httptest.Server
	mu    sync.Mutex
	hdr   http.Header
	reply string
}

func newCanned(tb testing.TB, reply string) *canned {
	c := &canned{reply: reply}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		c.mu.Lock()
		c.hdr = r.Header.Clone()
		c.mu.Unlock()
		w.Header().Set("content-type", "text/event-stream")
		w.Header().Set("request-id", "req_canned")
		_, _ = io.WriteString(w, c.reply)
	}))
	tb.Cleanup(func() {
		c.srv.CloseClientConnections()
		c.srv.Close()
		closeIdle(nil)
	})
	return c
}

func cannedProvider(tb testing.TB, c *canned) *anthropic.Provider {
	p, err := anthropic.New(anthropic.Config{APIKey: "sk-test-secret", BaseURL: c.srv.URL, MaxRetries: -1})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// TestStreamedReplyDecoded: the reply's content, stop reason and usage,
// with message_delta's counts replacing message_start's where it has them,
// and the request carrying the headers the API requires.
func TestStreamedReplyDecoded(t *testing.T) {
	c := newCanned(t, toolCallReply)
	resp, err := llm.Collect(cannedProvider(t, c).Stream(context.Background(), userReq("go")), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &llm.Response{
		ID: "msg_1", Model: "claude-sonnet-4-5", StopReason: llm.StopToolUse,
		Usage: llm.Usage{InputTokens: 12, OutputTokens: 20, CacheReadTokens: 5, CacheWriteTokens: 7, CacheWrite1hTokens: 3},
		Message: llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{
			llm.TextBlock("Turn 1."),
			{Type: llm.BlockToolUse, ID: "toolu_1", Name: "bash", Input: []byte(`{"command":"echo turn 1"}`)},
		}},
	}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range map[string]string{"Content-Type": "application/json", "X-Api-Key": "sk-test-secret", "Anthropic-Version": "2023-06-01"} {
		if got := c.hdr.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
}

// TestStreamOddities: a tool_use whose input is null at the start and has
// no deltas gets an empty input; an event that is not the shape of its
// type is a malformed stream, retried; an error event is the API's error,
// retried.
func TestStreamOddities(t *testing.T) {
	start := `{"type":"message_start","message":{"id":"m","model":"x","usage":{"input_tokens":1,"output_tokens":1}}}`
	end := []string{`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":2}}`, `{"type":"message_stop"}`}
	t.Run("null input", func(t *testing.T) {
		c := newCanned(t, sse(append([]string{start,
			`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"bash","input":null}}`,
			`{"type":"content_block_stop","index":0}`}, end...)...))
		resp, err := llm.Collect(cannedProvider(t, c).Stream(context.Background(), userReq("go")), nil)
		if err != nil {
			t.Fatal(err)
		}
		if u := resp.Message.ToolUses(); len(u) != 1 || string(u[0].Input) != `{}` {
			t.Errorf("tool uses %+v", u)
		}
	})
	t.Run("malformed event", func(t *testing.T) {
		c := newCanned(t, sse(start, `{"type":"content_block_start","index":"zero","content_block":{"type":"text"}}`))
		_, err := llm.Collect(cannedProvider(t, c).Stream(context.Background(), userReq("go")), nil)
		if !errors.Is(err, llm.ErrUnavailable) || !strings.Contains(err.Error(), "malformed stream") {
			t.Errorf("err = %v, want a retryable malformed stream", err)
		}
	})
	t.Run("error event", func(t *testing.T) {
		c := newCanned(t, sse(start, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
		_, err := llm.Collect(cannedProvider(t, c).Stream(context.Background(), userReq("go")), nil)
		if !errors.Is(err, llm.ErrUnavailable) || !strings.Contains(err.Error(), "overloaded_error: Overloaded (request req_canned)") {
			t.Errorf("err = %v, want the API's overloaded error", err)
		}
	})
}

// BenchmarkStreamReply is the client's cost of one call whose reply is a
// sentence and a tool call; BenchmarkStreamReplyRaw is the same round trip
// read and thrown away, the least a call can cost.
func BenchmarkStreamReply(b *testing.B) {
	p := cannedProvider(b, newCanned(b, toolCallReply))
	for b.Loop() {
		resp, err := llm.Collect(p.Stream(context.Background(), userReq("hi")), nil)
		if err != nil || len(resp.Message.Content) != 2 {
			b.Fatalf("err %v", err)
		}
	}
}

func BenchmarkStreamReplyRaw(b *testing.B) {
	c := newCanned(b, toolCallReply)
	body := `{"max_tokens":64,"messages":[{"content":"hi","role":"user"}],"model":"claude-sonnet-4-5","stream":true}`
	for b.Loop() {
		req, err := http.NewRequest(http.MethodPost, c.srv.URL+"/v1/messages", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// writeCounter counts the writes made to the connections it dials.
type writeCounter struct {
	net.Conn
	writes *atomic.Int64
}

func (c writeCounter) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// TestSmallRequestOneWrite: a request whose body fits the connection's
// write buffer goes out in one write, headers and body together; a larger
// one still arrives whole.
func TestSmallRequestOneWrite(t *testing.T) {
	c := newCanned(t, toolCallReply)
	var writes atomic.Int64
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		return writeCounter{Conn: conn, writes: &writes}, err
	}}
	llm.TuneTransport(tr)
	t.Cleanup(tr.CloseIdleConnections)
	p, err := anthropic.New(anthropic.Config{APIKey: "sk-test", BaseURL: c.srv.URL, MaxRetries: -1, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		size     int
		oneWrite bool
	}{{1 << 10, true}, {64 << 10, false}} {
		writes.Store(0)
		if _, err := llm.Collect(p.Stream(context.Background(), userReq(strings.Repeat("x", tc.size))), nil); err != nil {
			t.Fatal(err)
		}
		if n := writes.Load(); (n == 1) != tc.oneWrite {
			t.Errorf("a request with a %d-byte message took %d writes", tc.size, n)
		}
	}
}
