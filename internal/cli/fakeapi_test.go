package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// toolIDOnce starts `troupe fake-api` with args, makes one call and returns
// the id of the tool_use it answers with, then stops the server.
func toolIDOnce(t *testing.T, script string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int)
	go func() {
		code := Main(ctx, append([]string{"fake-api", "--script", script}, args...), strings.NewReader(""), pw, io.Discard)
		pw.Close()
		done <- code
	}()
	url, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("fake-api printed no URL: %v", err)
	}
	go io.Copy(io.Discard, pr)
	body := `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"go"}]}`
	req, _ := http.NewRequest("POST", strings.TrimSpace(url)+"/v1/messages", strings.NewReader(body))
	req.Header.Set("x-api-key", "k")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("content-type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var msg struct {
		Content []struct{ Type, ID string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil || resp.StatusCode != 200 {
		t.Fatalf("call: status %d, %v", resp.StatusCode, err)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("fake-api exited %d", code)
	}
	http.DefaultClient.CloseIdleConnections()
	for _, b := range msg.Content {
		if b.Type == "tool_use" {
			return b.ID
		}
	}
	t.Fatalf("no tool_use in %+v", msg)
	return ""
}

// A restarted `troupe fake-api` never repeats a tool id of the run before
// it (a resumed conversation holding both would be refused); --id-prefix
// makes ids reproducible.
func TestFakeAPIToolIDsUniqueAcrossRestarts(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(script, []byte("rules:\n  - reply:\n      - tool_use: {name: bash, input: {command: ls}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	first, second := toolIDOnce(t, script), toolIDOnce(t, script)
	if first == second {
		t.Errorf("two starts of fake-api both answered with tool id %s", first)
	}
	if !strings.HasPrefix(first, "toolu_fake_s") {
		t.Errorf("tool id %s lacks the per-start prefix", first)
	}
	for _, want := range []struct{ prefix, id string }{{"run7_", "toolu_fake_run7_1_0"}, {"", "toolu_fake_1_0"}} {
		for range 2 {
			if got := toolIDOnce(t, script, "--id-prefix", want.prefix); got != want.id {
				t.Errorf("--id-prefix %q: tool id %s, want %s", want.prefix, got, want.id)
			}
		}
	}
}
