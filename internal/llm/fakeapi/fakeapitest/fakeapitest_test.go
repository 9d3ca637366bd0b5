package fakeapitest_test

import (
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"go.uber.org/goleak"

	"github.com/troupe-dev/troupe/internal/llm/fakeapi/fakeapitest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestStartTest(t *testing.T) {
	srv := fakeapitest.StartTest(t, `rules: [{agent: alice, reply: [{text: "hi from ${agent}"}]}]`)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := anthropic.NewClient(option.WithBaseURL(srv.URL()), option.WithAPIKey("test"),
		option.WithMaxRetries(0), option.WithHTTPClient(&http.Client{Transport: tr}))
	msg, err := c.Messages.New(t.Context(), anthropic.MessageNewParams{
		Model:     "m",
		MaxTokens: 10,
		System:    []anthropic.TextBlockParam{{Text: "You are teammate 'alice' (qa) in team 't'"}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := msg.Content[0].Text; got != "hi from alice" {
		t.Errorf("text = %q", got)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests recorded", n)
	}
}
