package team

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/llm/anthropic"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi/fakeapitest"
	"github.com/troupe-dev/troupe/internal/subagent"
	"github.com/troupe-dev/troupe/internal/tool"
)

// TestLeaseSubagent: a subagent writes under its parent's lease checks:
// bob's subagent is refused on alice's leased file by write_file and by
// bash with the message bob himself gets, the file is unchanged, and alice
// is told once; a subagent of alice, the holder, writes freely.
func TestLeaseSubagent(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - agent: "bob:general-purpose"
    contains: "Change the API"
    reply: [{tool_use: {name: write_file, input: {path: src/api/a.go, content: "sub\n"}}}, {tool_use: {name: bash, input: {command: "echo sub > src/api/a.go"}}}]
  - agent: "bob:general-purpose"
    contains: "refused before writing"
    reply: [{text: "REPORT: refused"}]
  - agent: "alice:general-purpose"
    contains: "Change the API"
    reply: [{tool_use: {name: write_file, input: {path: src/api/a.go, content: "alice's sub\n"}}}]
  - agent: "alice:general-purpose"
    contains: "bytes written"
    reply: [{text: "REPORT: written"}]
`)
	p, err := anthropic.New(anthropic.Config{APIKey: "test", BaseURL: srv.URL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	f := newLeaseFixture(t)
	run := func(parent string) tool.Result {
		r := &subagent.Runner{Provider: p, Workspace: f.ws, Parent: parent}
		env := f.env(parent, LeaseRefuse, nil)
		return subagent.Handler(r)(context.Background(), env, tool.TaskArgs{Description: "api", Prompt: "Change the API", SubagentType: subagent.General})
	}
	if res := run("bob"); res.IsError || res.Content != "REPORT: refused" {
		t.Fatalf("bob's subagent = %+v", res)
	}
	if got := f.read("src/api/a.go"); got != "package api\n" {
		t.Errorf("src/api/a.go = %q: bob's subagent wrote it", got)
	}
	var results []string
	for _, r := range srv.Requests() {
		if r.Agent == "bob:general-purpose" && strings.Contains(string(r.Body), "tool_result") {
			results = append(results, string(r.Body))
		}
	}
	if len(results) != 1 {
		t.Fatalf("bob's subagent sent %d requests with tool results", len(results))
	}
	for _, want := range []string{
		"write_file: refused before writing src/api/a.go: " + aliceRefusal,
		"bash: refused before writing src/api/a.go: " + aliceRefusal,
	} {
		if !strings.Contains(results[0], strings.ReplaceAll(want, `"`, `\"`)) {
			t.Errorf("bob's subagent was not told %q:\n%s", want, results[0])
		}
	}
	msgs, err := f.tm.Mailbox().Peek(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, m.From+": "+m.Summary)
	}
	if diff := cmp.Diff([]string{"bob: lease refusal: src/api/a.go"}, got); diff != "" {
		t.Errorf("alice's inbox (-want +got):\n%s", diff)
	}

	if res := run("alice"); res.IsError || res.Content != "REPORT: written" {
		t.Fatalf("alice's subagent = %+v", res)
	}
	if got := f.read("src/api/a.go"); got != "alice's sub\n" {
		t.Errorf("src/api/a.go = %q, want alice's subagent's", got)
	}
}
