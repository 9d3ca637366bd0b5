package mcp

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/settings"
)

func TestExpand(t *testing.T) {
	t.Parallel()
	env := map[string]string{"HOME": "/home/me", "EMPTY": "", "TOKEN": "t0k"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		in, want string
		unset    []string
	}{
		{"plain", "plain", nil},
		{"${HOME}/bin", "/home/me/bin", nil},
		{"$HOME/bin", "$HOME/bin", nil}, // a bare $VAR is not expanded
		{"Bearer ${TOKEN}", "Bearer t0k", nil},
		{"${MISSING:-fallback}", "fallback", nil},
		{"${TOKEN:-fallback}", "t0k", nil},
		{"${EMPTY:-x}", "", nil}, // set, even if empty
		{"${MISSING}", "${MISSING}", []string{"MISSING"}},
		{"${MISSING:-}", "", nil},
		{"a${HOME}b${TOKEN}c", "a/home/meb" + "t0kc", nil},
		{"${not valid}", "${not valid}", nil},
		{"${unclosed", "${unclosed", nil},
		{"${1X}", "${1X}", nil},
	}
	for _, tt := range tests {
		got, unset := Expand(tt.in, lookup)
		if got != tt.want || !cmp.Equal(unset, tt.unset) {
			t.Errorf("Expand(%q) = %q, %v; want %q, %v", tt.in, got, unset, tt.want, tt.unset)
		}
	}
}

func TestLoader(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write(".mcp.json", `{"mcpServers": {
		"fs": {"command": "npx", "args": ["-y", "server-fs", "${ROOT:-/tmp}"], "env": {"KEY": "${KEY}"}},
		"web": {"type": "http", "url": "https://${HOST}/mcp", "headers": {"Authorization": "Bearer ${KEY}"}},
		"bad": {"type": "ws", "url": "ws://x"},
		"nocmd": {"args": ["x"]},
		"a__b": {"command": "x"}
	}}`)
	extra := write("extra.json", `{"mcpServers": {"fs": {"type": "sse", "url": "http://127.0.0.1:9/sse"}}}`)
	broken := write("broken.json", `{"mcpServers": [1,2]}`)
	env := map[string]string{"KEY": "k", "HOST": "example.test"}
	l := &Loader{Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	l.AddProject(dir)
	l.AddProject(t.TempDir()) // none there: nothing
	l.AddServers("settings", map[string]json.RawMessage{"set": json.RawMessage(`{"command": "srv", "env": {"X": "${NOPE}"}}`)})
	l.AddFlag(extra)
	l.AddFlag(broken)
	l.AddFlag(filepath.Join(dir, "missing.json"))
	l.AddFlag(`{"mcpServers": {"inline": {"command": "inline-srv"}}}`)
	cfg := l.Config()

	proj := filepath.Join(dir, ".mcp.json")
	want := []Server{
		{Name: "fs", Type: TypeSSE, URL: "http://127.0.0.1:9/sse", Source: extra},
		{Name: "web", Type: TypeHTTP, URL: "https://example.test/mcp", Headers: map[string]string{"Authorization": "Bearer k"}, Source: proj},
		{Name: "set", Type: TypeStdio, Command: "srv", Env: map[string]string{"X": "${NOPE}"}, Source: "settings"},
		{Name: "inline", Type: TypeStdio, Command: "inline-srv", Source: "--mcp-config"},
	}
	if diff := cmp.Diff(want, cfg.Servers); diff != "" {
		t.Errorf("servers (-want +got):\n%s", diff)
	}
	var probs []string
	for _, p := range cfg.Problems {
		if !errors.Is(p, ErrConfig) {
			t.Errorf("problem %v does not wrap ErrConfig", p)
		}
		probs = append(probs, p.Error())
	}
	all := strings.Join(probs, "\n")
	for _, w := range []string{
		proj + `: server "bad": unknown type "ws"`,
		proj + `: server "nocmd": neither command nor url`,
		proj + `: server "a__b": a server name may not contain "__"`,
		broken + ": not a JSON object with mcpServers",
		"missing.json",
	} {
		if !strings.Contains(all, w) {
			t.Errorf("problems lack %q:\n%s", w, all)
		}
	}
	warns := strings.Join(cfg.Warnings, "\n")
	for _, w := range []string{`settings: server "set": ${NOPE} is not set`, `server "fs" replaces the one from ` + proj} {
		if !strings.Contains(warns, w) {
			t.Errorf("warnings lack %q:\n%s", w, warns)
		}
	}
}

func TestCheckSchema(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, schema, err string
	}{
		{"object", `{"type":"object","properties":{"a":{"type":"string"}}}`, ""},
		{"refs fine", `{"type":"object","properties":{"a":{"$ref":"#/$defs/x"},"b":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"string"}}}`, ""},
		{"not object type", `{"type":"string"}`, "the API takes only"},
		{"no type", `{"properties":{}}`, "the API takes only"},
		{"array", `[1]`, "not a JSON object"},
		{"not json", `{"type":`, "not JSON"},
		{"ref loop", `{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{"$ref":"#/$defs/y"},"y":{"$ref":"#/$defs/x"}}}`, "$ref loop"},
		{"recursive", `{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#"}}}}`, "$ref loop"},
		{"self", `{"type":"object","$defs":{"n":{"properties":{"next":{"$ref":"#/$defs/n"}}}},"properties":{"n":{"$ref":"#/$defs/n"}}}`, "$ref loop"},
		{"dangling", `{"type":"object","properties":{"a":{"$ref":"#/$defs/none"}}}`, "does not resolve"},
		{"remote", `{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`, "points outside"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CheckSchema(json.RawMessage(tt.schema))
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrSchema)):
				t.Errorf("error %v, want one with %q", err, tt.err)
			}
		})
	}
	if _, err := CheckSchema(nil); err == nil {
		t.Error("nil schema accepted")
	}
}

func TestToolName(t *testing.T) {
	t.Parallel()
	tests := []struct{ server, tool, want string }{
		{"github", "create_issue", "mcp__github__create_issue"},
		{"my.server", "do it!", "mcp__my_server__do_it_"},
		{"s", strings.Repeat("x", 200), "mcp__s__" + strings.Repeat("x", 200)},
	}
	for _, tt := range tests {
		if got := ToolName(tt.server, tt.tool); got != tt.want {
			t.Errorf("ToolName(%q, %q) = %q, want %q", tt.server, tt.tool, got, tt.want)
		}
	}
	if s, ok := IsMCPTool("mcp__github__create_issue"); !ok || s != "github" {
		t.Errorf("IsMCPTool = %q, %v", s, ok)
	}
	if _, ok := IsMCPTool("Bash"); ok {
		t.Error("Bash is an MCP tool?")
	}
}

func FuzzExpand(f *testing.F) {
	f.Add("${A:-b}${C}$D")
	f.Fuzz(func(t *testing.T, s string) {
		out, _ := Expand(s, func(k string) (string, bool) { return "", false })
		if !strings.Contains(s, "${") && out != s {
			t.Errorf("Expand changed %q to %q without ${", s, out)
		}
	})
}

func FuzzCheckSchema(f *testing.F) {
	f.Add(`{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{"$ref":"#"}}}`)
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = CheckSchema(json.RawMessage(s))
	})
}

func TestFromSettings(t *testing.T) {
	t.Parallel()
	dir, home := t.TempDir(), t.TempDir()
	write := func(p, body string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	userFile := filepath.Join(home, ".claude", "settings.json")
	projFile := filepath.Join(dir, ".claude", "settings.json")
	write(userFile, `{"mcpServers": {"a": {"command": "user-a"}, "b": {"command": "user-b"}}}`)
	write(filepath.Join(dir, ".mcp.json"), `{"mcpServers": {"b": {"command": "project-b"}, "c": {"command": "project-c"}}}`)
	write(projFile, `{"mcpServers": {"c": {"command": "settings-c"}, "d": 5}}`)
	s, err := settings.Load(settings.Options{Workspace: dir, Home: home, UserFile: filepath.Join(home, "none.json"), NoManaged: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg := FromSettings(dir, s, []string{`{"mcpServers": {"a": {"command": "flag-a"}}}`}, nil)
	got := map[string]string{}
	for _, srv := range cfg.Servers {
		got[srv.Name] = srv.Command + "@" + srv.Source
	}
	want := map[string]string{
		"a": "flag-a@--mcp-config",
		"b": "project-b@" + filepath.Join(dir, ".mcp.json"),
		"c": "settings-c@" + projFile,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("servers (-want +got):\n%s", diff)
	}
	if len(cfg.Problems) != 1 || !strings.Contains(cfg.Problems[0].Error(), `server "d"`) {
		t.Errorf("problems = %v", cfg.Problems)
	}
	for _, f := range s.Files {
		for _, w := range f.Warnings {
			if strings.Contains(w, "mcpServers") {
				t.Errorf("settings warn about mcpServers: %s", w)
			}
		}
	}
}
