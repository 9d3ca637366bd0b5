package fakeapi_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
)

const faultScript = `
faults:
  - {call: 1, kind: rate_limit, retry_after: 2}
  - {call: 2, kind: overloaded}
  - {call: 3, kind: server_error}
rules:
  - times: 0
    reply:
      - text: "a reply long enough to be streamed in several parts"
      - tool_use: {name: bash, input: {command: "echo hi"}}
`

func TestHTTPFaults(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		srv := start(t, faultScript, fakeapi.Options{})
		c := sdk(t, srv)
		wants := []struct {
			status    int
			errType   string
			retryHdr  string
			faultKind string
		}{
			{429, "rate_limit_error", "2", "rate_limit"},
			{529, "overloaded_error", "", "overloaded"},
			{500, "api_error", "", "server_error"},
		}
		for i, want := range wants {
			var err error
			if streaming {
				_, _, err = stream(t, c, params("", "hi"))
			} else {
				_, err = c.Messages.New(t.Context(), params("", "hi"))
			}
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("stream=%t call %d: err = %v, want an API error", streaming, i+1, err)
			}
			if apiErr.StatusCode != want.status || apiErr.Response.Header.Get("retry-after") != want.retryHdr {
				t.Errorf("stream=%t call %d: status %d retry-after %q", streaming, i+1, apiErr.StatusCode, apiErr.Response.Header.Get("retry-after"))
			}
			if !strings.Contains(apiErr.RawJSON(), `"type":"`+want.errType+`"`) {
				t.Errorf("stream=%t call %d: body %s", streaming, i+1, apiErr.RawJSON())
			}
		}
		// Faults consume no rule: call 4 gets the reply.
		if _, err := c.Messages.New(t.Context(), params("", "hi")); err != nil {
			t.Fatalf("call 4: %v", err)
		}
		var got []fakeapi.Recorded
		for _, r := range srv.Requests() {
			r.Body, r.Usage, r.Cache = nil, fakeapi.Usage{}, nil
			got = append(got, r)
		}
		want := []fakeapi.Recorded{
			{N: 1, Model: "claude-test", Stream: streaming, Status: 429, Rule: -1, Fault: "rate_limit"},
			{N: 2, Model: "claude-test", Stream: streaming, Status: 529, Rule: -1, Fault: "overloaded"},
			{N: 3, Model: "claude-test", Stream: streaming, Status: 500, Rule: -1, Fault: "server_error"},
			{N: 4, Model: "claude-test", Status: 200, Rule: 0},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("stream=%t records (-want +got):\n%s", streaming, diff)
		}
	}
}

func TestSDKRetriesThroughFaults(t *testing.T) {
	script := `
faults:
  - {call: 1, kind: rate_limit, retry_after: 0.01}
  - {call: 2, kind: overloaded}
rules:
  - {reply: [{text: "made it"}]}
`
	srv := start(t, script, fakeapi.Options{})
	c := sdk(t, srv, option.WithMaxRetries(3))
	msg, err := c.Messages.New(t.Context(), params("", "hi"))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if msg.Content[0].Text != "made it" || len(srv.Requests()) != 3 {
		t.Errorf("text %q after %d calls", msg.Content[0].Text, len(srv.Requests()))
	}
}

func TestDropFault(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		srv := start(t, `rules: [{times: 0, reply: [{text: ok}]}]`, fakeapi.Options{})
		srv.InjectFault(1, fakeapi.Fault{Kind: fakeapi.FaultDrop})
		c := sdk(t, srv)
		var err error
		if streaming {
			_, _, err = stream(t, c, params("", "hi"))
		} else {
			_, err = c.Messages.New(t.Context(), params("", "hi"))
		}
		var apiErr *anthropic.Error
		if err == nil || errors.As(err, &apiErr) {
			t.Errorf("stream=%t: err = %v, want a transport error", streaming, err)
		}
		if r := srv.Requests()[0]; r.Fault != "drop" || r.Status != 0 {
			t.Errorf("stream=%t: recorded %+v", streaming, r)
		}
		// The next call is answered normally.
		if _, err := c.Messages.New(t.Context(), params("", "hi")); err != nil {
			t.Errorf("stream=%t: after drop: %v", streaming, err)
		}
	}
}

func TestCutFault(t *testing.T) {
	srv := start(t, faultScript, fakeapi.Options{})
	srv.InjectFault(1, fakeapi.Fault{Kind: fakeapi.FaultCut}) // replaces the script's rate limit
	srv.InjectFault(2, fakeapi.Fault{Kind: fakeapi.FaultCut})
	c := sdk(t, srv)

	s := c.Messages.NewStreaming(t.Context(), params("", "hi"))
	var acc anthropic.Message
	var types []string
	for s.Next() {
		types = append(types, s.Current().Type)
		if err := acc.Accumulate(s.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if s.Err() == nil {
		t.Errorf("a cut stream ended without an error; events %v", types)
	}
	_ = s.Close()
	if diff := cmp.Diff([]string{"message_start", "content_block_start", "content_block_delta"}, types); diff != "" {
		t.Errorf("events before the cut (-want +got):\n%s", diff)
	}
	if len(acc.Content) != 1 || acc.Content[0].Text == "" || strings.HasPrefix("a reply long enough to be streamed in several parts", acc.Content[0].Text) == false ||
		acc.Content[0].Text == "a reply long enough to be streamed in several parts" {
		t.Errorf("partial content %+v", acc.Content)
	}

	if _, err := c.Messages.New(t.Context(), params("", "hi")); err == nil {
		t.Error("a cut JSON reply parsed")
	}
	for _, r := range srv.Requests() {
		if r.Fault != "cut" || r.Status != 200 || r.Rule != -1 {
			t.Errorf("recorded %+v", r)
		}
	}
	// Cut calls consume no rule and count as no fallback.
	if srv.Unmatched() != 0 {
		t.Errorf("unmatched = %d", srv.Unmatched())
	}
}

func TestInjectFaultPanicsOnUnknownKind(t *testing.T) {
	s, _ := fakeapi.ParseScript(nil)
	srv := fakeapi.New(s, fakeapi.Options{})
	defer srv.Close()
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	srv.InjectFault(1, fakeapi.Fault{Kind: "meteor"})
}
