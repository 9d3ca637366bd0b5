package fakeapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"go.uber.org/goleak"

	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// start serves script with opt on loopback until the test ends.
func start(t *testing.T, script string, opt fakeapi.Options) *fakeapi.Server {
	t.Helper()
	s, err := fakeapi.ParseScript([]byte(script))
	if err != nil {
		t.Fatalf("ParseScript: %v", err)
	}
	if opt.Logf == nil {
		opt.Logf = t.Logf
	}
	srv := fakeapi.New(s, opt)
	if _, err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return srv
}

// httpClient is a client of the test's own whose idle connections close
// with the test, so no goroutine outlives it.
func httpClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// sdk is the real SDK client pointed at srv, without retries.
func sdk(t *testing.T, srv *fakeapi.Server, opts ...option.RequestOption) *anthropic.Client {
	base := []option.RequestOption{
		option.WithBaseURL(srv.URL()),
		option.WithAPIKey("test"),
		option.WithMaxRetries(0),
		option.WithHTTPClient(httpClient(t)),
	}
	c := anthropic.NewClient(append(base, opts...)...)
	return &c
}

// params is a request from agent with one user message.
func params(agent, user string) anthropic.MessageNewParams {
	p := anthropic.MessageNewParams{
		Model:     "claude-test",
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(user))},
	}
	if agent != "" {
		p.System = []anthropic.TextBlockParam{{Text: "You are '" + agent + "', the lead of team 'x'."}}
	}
	return p
}

// stream makes a streaming call and accumulates it as the SDK user would.
func stream(t *testing.T, c *anthropic.Client, p anthropic.MessageNewParams) (anthropic.Message, []string, error) {
	t.Helper()
	s := c.Messages.NewStreaming(t.Context(), p)
	defer s.Close()
	var acc anthropic.Message
	var types []string
	for s.Next() {
		ev := s.Current()
		types = append(types, ev.Type)
		if err := acc.Accumulate(ev); err != nil {
			t.Fatalf("Accumulate %s: %v", ev.Type, err)
		}
	}
	return acc, types, s.Err()
}

// post sends a raw request and returns the status, headers and body.
func post(t *testing.T, srv *fakeapi.Server, path string, hdr map[string]string, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("content-type", "application/json")
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	res, err := httpClient(t).Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return res.StatusCode, res.Header, data
}

var apiHeaders = map[string]string{"x-api-key": "test", "anthropic-version": "2023-06-01"}

// texts lists the text of each block of a message ("" for non-text).
func texts(m anthropic.Message) []string {
	var out []string
	for _, b := range m.Content {
		out = append(out, b.Text)
	}
	return out
}

// compactJSON normalises a JSON text for comparison.
func compactJSON(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("bad JSON %s: %v", b, err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// recorded returns a channel that receives each finished call.
func recorded(srv *fakeapi.Server) <-chan fakeapi.Recorded {
	ch := make(chan fakeapi.Recorded, 100)
	srv.OnRecord(func(r fakeapi.Recorded) { ch <- r })
	return ch
}

// await waits for the server to record a call, or fails the test after a
// generous deadline (never hit by a passing test).
func await(t *testing.T, ch <-chan fakeapi.Recorded) fakeapi.Recorded {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("the server never finished the call")
		return fakeapi.Recorded{}
	}
}
