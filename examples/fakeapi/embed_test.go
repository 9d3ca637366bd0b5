package fakeapiexamples_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	fakeapiexamples "github.com/troupe-dev/troupe/examples/fakeapi"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
)

// TestDemoAnswersOffScriptInCharacter: what a user types into the demo that
// the story does not know gets an answer that says what the demo is, never
// the fake API's "no rule matched" diagnostic; and it still counts as
// unmatched, so the headless demo can fail on it.
func TestDemoAnswersOffScriptInCharacter(t *testing.T) {
	script, err := fakeapi.ParseScript(fakeapiexamples.RESTToGraphQL)
	if err != nil {
		t.Fatal(err)
	}
	srv := fakeapi.New(script, fakeapi.Options{})
	if _, err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	body, _ := json.Marshal(map[string]any{
		"model": "claude-test", "max_tokens": 100,
		"system":   "You are 'team-lead', the lead of team 'x'.",
		"messages": []any{map[string]any{"role": "user", "content": "what's the weather like?"}},
	})
	req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL()+"/v1/messages", bytes.NewReader(body))
	req.Header.Set("content-type", "application/json")
	req.Header.Set("x-api-key", "fake")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	text := string(raw)
	if strings.Contains(text, "no rule matched") || !strings.Contains(text, "offline demo") {
		t.Errorf("off-script reply: %s", text)
	}
	if srv.Unmatched() != 1 {
		t.Errorf("unmatched = %d, want 1", srv.Unmatched())
	}
}
