package compact_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/troupe-dev/troupe/internal/compact"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/anthropic"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi/fakeapitest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// round returns the assistant turn calling tool name and the user turn
// answering it with a result of size bytes.
func round(i int, name string, size int) []llm.Message {
	id := fmt.Sprintf("toolu_%d", i)
	return []llm.Message{
		{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockToolUse, ID: id, Name: name, Input: json.RawMessage(`{}`)}}},
		{Role: llm.RoleUser, Content: []llm.Block{llm.ToolResultBlock(id, strings.Repeat("x", size), false)}},
	}
}

func conversation(sizes ...int) []llm.Message {
	msgs := []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("go")}}}
	for i, n := range sizes {
		msgs = append(msgs, round(i, fmt.Sprintf("tool%d", i), n)...)
	}
	return msgs
}

func results(msgs []llm.Message) []string {
	var out []string
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == llm.BlockToolResult {
				if len(b.Content) > 100 {
					out = append(out, fmt.Sprintf("%d chars", len(b.Content)))
				} else {
					out = append(out, b.Content)
				}
			}
		}
	}
	return out
}

func TestMicro(t *testing.T) {
	marker := func(tool string, n string) string {
		return "[old tool result of " + tool + " compacted: " + n + " chars; call the tool again if you need it]"
	}
	tests := []struct {
		name    string
		sizes   []int
		policy  compact.MicroPolicy
		changed bool
		want    []string
	}{
		{
			name:    "older than the last three and past the threshold",
			sizes:   []int{25_000, 25_000, 25_000, 25_000, 25_000},
			changed: true,
			want:    []string{marker("tool0", "25,000"), marker("tool1", "25,000"), "25000 chars", "25000 chars", "25000 chars"},
		},
		{
			name:  "one old result is below the threshold",
			sizes: []int{25_000, 25_000, 25_000, 25_000},
			want:  []string{"25000 chars", "25000 chars", "25000 chars", "25000 chars"},
		},
		{
			name:  "three results or fewer are all kept",
			sizes: []int{90_000, 90_000, 90_000},
			want:  []string{"90000 chars", "90000 chars", "90000 chars"},
		},
		{
			name:    "small results stay even when others go",
			sizes:   []int{50_000, 500, 1, 1, 1},
			changed: true,
			want:    []string{marker("tool0", "50,000"), "500 chars", "x", "x", "x"},
		},
		{
			name:    "keep and threshold are settable",
			sizes:   []int{3_000, 3_000, 3_000},
			policy:  compact.MicroPolicy{Keep: 1, MinReclaimChars: -1},
			changed: true,
			want:    []string{marker("tool0", "3,000"), marker("tool1", "3,000"), "3000 chars"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := conversation(tt.sizes...)
			before := results(in)
			got, changed := tt.policy.Apply(in)
			if changed != tt.changed {
				t.Errorf("changed = %v, want %v", changed, tt.changed)
			}
			if diff := cmp.Diff(tt.want, results(got)); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, results(in)); diff != "" {
				t.Errorf("the input was modified (-before +after):\n%s", diff)
			}
			if _, err := llm.Normalize(got); err != nil {
				t.Errorf("not sendable: %v", err)
			}
		})
	}
}

// TestMicroKeepsThePrefixStable grows a conversation one bulky result at a
// time, as the loop does, and checks that history is rewritten rarely: each
// request is the previous one plus new messages, except at a rewrite, and a
// rewrite only happens once per threshold's worth of reclaimable output.
func TestMicroKeepsThePrefixStable(t *testing.T) {
	const rounds, size = 60, 10_000
	msgs := conversation()
	var prev []llm.Message
	rewrites := 0
	for i := range rounds {
		msgs = append(msgs, round(i, "read_file", size)...)
		if out, changed := compact.Micro(msgs, 3); changed {
			msgs = out
			rewrites++
		} else if prev != nil && !cmp.Equal(prev, msgs[:len(prev)]) {
			t.Fatalf("round %d: history changed without a rewrite", i)
		}
		prev = append([]llm.Message(nil), msgs...)
	}
	// 57 results become eligible, 10k each; each rewrite needs 40k.
	if max := rounds*size/compact.DefaultMinReclaimChars + 1; rewrites == 0 || rewrites > max {
		t.Errorf("rewrites = %d, want 1..%d", rewrites, max)
	}
	// Every rewrite leaves the last three whole.
	res := results(msgs)
	for _, r := range res[len(res)-3:] {
		if r != "10000 chars" {
			t.Errorf("a recent result was compacted: %q", r)
		}
	}
}

func TestDue(t *testing.T) {
	big := conversation(40_000) // about 10k tokens of estimate
	tests := []struct {
		name     string
		c        compact.Compactor
		model    string
		reported int64
		since    []llm.Message
		want     bool
	}{
		{"well under", compact.Compactor{}, "claude-sonnet-4-5", 50_000, nil, false},
		{"reported alone past 80% of 200k", compact.Compactor{}, "claude-sonnet-4-5", 160_000, nil, true},
		{"reported plus the estimate of what was added", compact.Compactor{}, "claude-sonnet-4-5", 151_000, big, true},
		{"the same below the line", compact.Compactor{}, "claude-sonnet-4-5", 140_000, big, false},
		{"unknown model: default window", compact.Compactor{}, "mystery", 165_000, nil, true},
		{"window overridden", compact.Compactor{Window: 20_000}, "claude-sonnet-4-5", 15_000, nil, false},
		{"window and threshold overridden", compact.Compactor{Window: 20_000, Threshold: 0.5}, "claude-sonnet-4-5", 10_000, nil, true},
		{"no call made yet: estimate only", compact.Compactor{Window: 12_000}, "", 0, big, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.Due(tt.model, tt.reported, tt.since); got != tt.want {
				t.Errorf("Due = %v, want %v (estimate %d)", got, tt.want, compact.EstimateTokens(tt.since))
			}
		})
	}
	if w := compact.WindowFor("gpt-4o-mini"); w != 128_000 {
		t.Errorf("WindowFor(gpt-4o-mini) = %d", w)
	}
}

func provider(t *testing.T, url string) llm.Provider {
	t.Helper()
	p, err := anthropic.New(anthropic.Config{APIKey: "test", BaseURL: url, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	return p
}

// TestCompactOverHTTP makes the summary call against the fake API: it is
// the conversation itself plus the summary request, and what comes back is
// one sendable user turn with the identity, the summary and the input the
// model had not answered yet.
func TestCompactOverHTTP(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - agent: alice
    contains: "Pay particular attention to: the parser"
    reply: [{text: "  Goals: fix the parser. Files: parse.go.  "}]
`)
	system := "You are teammate 'alice' (dev) in team 'T'."
	msgs := append(conversation(5_000, 5_000), llm.Message{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("now add tests")}})
	req := llm.Request{Model: "claude-test", System: system, Messages: msgs, Agent: "alice"}
	var c compact.Compactor
	got, resp, err := c.Compact(context.Background(), provider(t, srv.URL()), req, system, "the parser")
	if err != nil {
		t.Fatal(err)
	}
	if s := resp.Message.Text(); !strings.Contains(s, "fix the parser") {
		t.Errorf("summary = %q", s)
	}
	want := []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{
		llm.TextBlock(system + "\n\n" + compact.CompactedNote + "\n\n<summary>\nGoals: fix the parser. Files: parse.go.\n</summary>"),
		llm.TextBlock("now add tests"),
	}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replacement (-want +got):\n%s", diff)
	}
	if _, err := llm.Normalize(got); err != nil {
		t.Errorf("replacement not sendable: %v", err)
	}
	recs := srv.Requests()
	if len(recs) != 1 || recs[0].Status != 200 || recs[0].Rule != 0 {
		t.Fatalf("requests = %+v", recs)
	}
	var body struct {
		Messages []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(recs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	// The history (5 messages) is sent as it was, the request riding with
	// the last tool result; the unanswered input is not summarised.
	if n := len(body.Messages); n != 5 {
		t.Fatalf("summary call sent %d messages, want 5", n)
	}
	if last := body.Messages[4].Content; len(last) != 2 || !strings.Contains(string(last[1]), "Goals:") {
		t.Errorf("last turn = %s", last)
	}
	if strings.Contains(string(recs[0].Body), "now add tests") {
		t.Errorf("the unanswered input was sent to be summarised")
	}
}

func TestCompactNothingToDo(t *testing.T) {
	var c compact.Compactor
	msgs := []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("hello")}}}
	_, _, err := c.Compact(context.Background(), nil, llm.Request{Messages: msgs}, "", "")
	if !errors.Is(err, compact.ErrNothingToCompact) {
		t.Errorf("err = %v", err)
	}
}

func TestCompactEmptySummary(t *testing.T) {
	srv := fakeapitest.StartTest(t, `
rules:
  - reply: [{tool_use: {name: grep, input: {}}}]
`)
	var c compact.Compactor
	req := llm.Request{Model: "m", System: "You are 'x'.", Messages: conversation(10)}
	_, _, err := c.Compact(context.Background(), provider(t, srv.URL()), req, "", "")
	if !errors.Is(err, compact.ErrEmptySummary) {
		t.Errorf("err = %v", err)
	}
}

// TestCompactKeepsTheCachedPrefix: the summary call reads the whole cached
// conversation, and the conversation that replaces the history (identity
// put back in its first user turn) still reads the tools and the shared
// system prompt from the cache: only the conversation is written anew.
func TestCompactKeepsTheCachedPrefix(t *testing.T) {
	srv := fakeapitest.StartTest(t, "rules:\n  - times: 0\n    reply: [{text: \"Goals: go on.\"}]\n")
	p := provider(t, srv.URL())
	identity := "You are teammate 'alice' (dev) in team 'T'."
	req := llm.Request{Model: "claude-sonnet-4-5", System: strings.Repeat("Shared role instructions. ", 300), SystemTail: identity,
		Messages: conversation(3_000, 3_000), Agent: "alice",
		Tools: []llm.ToolSpec{{Name: "bash", Description: "run", InputSchema: json.RawMessage(`{"type":"object"}`)}}}
	first, err := llm.Collect(p.Stream(context.Background(), &req), nil)
	if err != nil {
		t.Fatal(err)
	}
	var c compact.Compactor
	msgs, summary, err := c.Compact(context.Background(), p, req, identity, "")
	if err != nil {
		t.Fatal(err)
	}
	if summary.Usage.CacheReadTokens != first.Usage.CacheWriteTokens {
		t.Errorf("summary call read %d tokens, want the %d the last call cached", summary.Usage.CacheReadTokens, first.Usage.CacheWriteTokens)
	}
	req.Messages = msgs
	after, err := llm.Collect(p.Stream(context.Background(), &req), nil)
	if err != nil {
		t.Fatal(err)
	}
	head := srv.Requests()[0].Cache[1] // the system breakpoint: tools + shared system
	if after.Usage.CacheReadTokens != int64(head.Tokens) || after.Usage.CacheWriteTokens == 0 {
		t.Errorf("after compaction %+v: want the %d tokens of tools and shared system read, the new conversation written", after.Usage, head.Tokens)
	}
}
