package fakeapi_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
)

func TestParseScriptErrors(t *testing.T) {
	tests := []struct{ name, script, want string }{
		{"unknown top-level key", "rulez: []", `unknown key "rulez"`},
		{"unknown rule key", "rules:\n  - {reply: [{text: a}]}\n  - {agnet: bob, reply: [{text: a}]}", `rule 1 (line 3): unknown key "agnet"`},
		{"unknown block key", "rules:\n  - reply: [{txt: a}]", `rule 0 (line 2): unknown key "txt"`},
		{"unknown tool_use key", "rules:\n  - reply: [{tool_use: {name: x, args: {}}}]", `rule 0 (line 2): unknown key "args"`},
		{"unknown fault key", "faults: [{call: 1, kind: drop, when: now}]", `unknown key "when"`},
		{"unknown fallback key", "fallback: {text: hi}", `unknown key "text"`},
		{"bad regex", "rules:\n  - {regex: 'a(', reply: []}", "rule 0 (line 2): regex: error parsing regexp"},
		{"bad agent pattern", "agent_pattern: '('", "agent_pattern: error parsing regexp"},
		{"agent pattern without group", "agent_pattern: 'You are'", "needs a capture group"},
		{"unknown fault kind", "faults: [{call: 2, kind: meteor}]", `fault 0: unknown kind "meteor"`},
		{"fault call zero", "faults: [{kind: drop}]", "fault 0: call must be 1 or more"},
		{"two faults one call", "faults: [{call: 2, kind: drop}, {call: 2, kind: cut}]", "fault 1: call 2 already has a fault"},
		{"block without kind", "rules:\n  - {reply: [{text: a}, {}]}", "rule 0 (line 2): reply block 1: has no kind"},
		{"block with two kinds", "rules:\n  - {reply: [{text: a, thinking: b}]}", "rule 0 (line 2): reply block 0: has text and thinking"},
		{"fallback block with two kinds", "fallback: {reply: [{text: a, tool_use: {name: x}}]}", "fallback: reply block 0: has text and tool_use"},
		{"bad tool name", "rules:\n  - {reply: [{tool_use: {name: 'no spaces'}}]}", `reply block 0: tool_use name "no spaces" must match`},
		{"bad stop reason", "rules:\n  - {reply: [], stop_reason: done}", `rule 0 (line 2): unknown stop_reason "done"`},
		{"negative times", "rules:\n  - {times: -1, reply: []}", "rule 0 (line 2): times must be 0"},
		{"bad latency", "rules:\n  - {latency: soon, reply: []}", "rule 0 (line 2)"},
		{"negative usage", "rules:\n  - {reply: [], usage: {output_tokens: -3}}", "usage.output_tokens must not be negative"},
		{"not a mapping", "- 1\n- 2", "parse script"},
		{"rules not a list", "rules: {a: 1}", "parse script"},
		{"bad JSON", `{"rules": [}`, "parse script"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fakeapi.ParseScript([]byte(tt.script))
			if err == nil {
				t.Fatalf("no error, want one containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestParseScriptAccepts(t *testing.T) {
	for name, script := range map[string]string{
		"empty":       "",
		"comment":     "# nothing yet\n",
		"full yaml":   "agent_pattern: \"You are [^']*'([^']+)'\"\nmodel: m\nfaults:\n  - {call: 6, kind: cut}\nfallback:\n  reply: [{text: none}]\n  stop_reason: end_turn\nrules:\n  - agent: a\n    contains: c\n    regex: 'r(\\d)'\n    times: 0\n    latency: 200ms\n    reply:\n      - thinking: t\n      - text: x\n      - tool_use: {name: write_file, input: {path: p, n: 1, when: 2024-01-02}}\n    stop_reason: max_tokens\n    usage: {input_tokens: 1, output_tokens: 2, cache_read_input_tokens: 3, cache_creation_input_tokens: 4}\n",
		"json":        `{"model": "m", "rules": [{"agent": "a", "reply": [{"text": "hi"}, {"tool_use": {"name": "x", "input": {"k": [1, 2]}}}]}]}`,
		"json tabbed": "{\n\t\"rules\": [\n\t\t{\"reply\": [{\"text\": \"tab\\there\"}]}\n\t]\n}\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := fakeapi.ParseScript([]byte(script)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestJSONScriptServes(t *testing.T) {
	srv := start(t, "{\n\t\"model\": \"json-model\",\n\t\"rules\": [{\"reply\": [{\"text\": \"from json\"}]}]\n}", fakeapi.Options{})
	msg, err := sdk(t, srv).Messages.New(t.Context(), params("", "hi"))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Content[0].Text != "from json" || msg.Model != "json-model" {
		t.Errorf("got %q from %q", msg.Content[0].Text, msg.Model)
	}
}

func TestLoadScript(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("rules: [{reply: [{text: hi}]}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := fakeapi.LoadScript(good); err != nil {
		t.Errorf("LoadScript(good): %v", err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("rules: [{oops: 1}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := fakeapi.LoadScript(bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), `unknown key "oops"`) {
		t.Errorf("LoadScript(bad) = %v", err)
	}
	if _, err := fakeapi.LoadScript(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("LoadScript(missing) = %v", err)
	}
}

// FuzzParseScript: parsing arbitrary bytes never panics, and a script that
// parses can be served.
func FuzzParseScript(f *testing.F) {
	for _, s := range []string{
		"", "rules: []", helloScript, toolScript, faultScript,
		`{"rules":[{"reply":[{"text":"x"}]}]}`,
		"rules:\n  - {regex: '(a)(b)', reply: [{text: '${1}${2}${agent}${'}]}]",
		"fallback: {reply: [{tool_use: {name: x, input: {1: [a, {b: ~}]}}}]}",
		"faults: [{call: 1, kind: rate_limit, retry_after: 0.5}]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := fakeapi.ParseScript(data)
		if err != nil {
			return
		}
		_ = fakeapi.New(s, fakeapi.Options{}).Close()
	})
}
