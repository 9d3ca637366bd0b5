package settings

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadMergesWithSources(t *testing.T) {
	ws := t.TempDir()
	user := filepath.Join(t.TempDir(), "settings.json")
	write(t, user, `{"permissions": {"allow": ["Read(**)"], "defaultMode": "acceptEdits"}, "team": {"leadModel": "big"}}`)
	claude := filepath.Join(ws, ".claude", "settings.json")
	write(t, claude, `{
  "env": {"FOO": "1"},
  "hooks": {
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh", "timeout": 5}]}]
  },
  "permissions": {"deny": ["Bash(rm:*)"]}
}`)
	project := filepath.Join(ws, ".troupe", "settings.json")
	write(t, project, `{
  "hooks": {
    "PostToolUse": [{"hooks": [{"type": "command", "command": "log.sh"}]}],
    "PreToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "lint.sh", "timeout": 0.5}]}]
  },
  "permissions": {"allow": ["Bash(git status:*)"], "defaultMode": "default"},
  "team": {"defaultPattern": "small-team", "maxCoordinationShare": 0.4, "leases": "warn", "remote": "git@host:team/app.git", "remoteBase": "main"},
  "artifactGuard": {"words": ["Alice", " "], "exempt": ["docs/team/**"]}
}`)
	s, err := Load(Options{Workspace: ws, UserFile: user, Home: t.TempDir(), NoManaged: true})
	if err != nil {
		t.Fatal(err)
	}
	u := Source{Scope: ScopeUser, Path: user}
	c := Source{Scope: ScopeClaude, Path: claude}
	p := Source{Scope: ScopeProject, Path: project}
	want := &Settings{
		Hooks: []Hook{
			{Event: PreToolUse, Matcher: "Bash", Type: "command", Command: "guard.sh", Timeout: 5 * time.Second, Source: c},
			{Event: PreToolUse, Matcher: "Edit|Write", Type: "command", Command: "lint.sh", Timeout: 500 * time.Millisecond, Source: p},
			{Event: PostToolUse, Type: "command", Command: "log.sh", Source: p},
		},
		Allow:          []Rule{{"Read(**)", u}, {"Bash(git status:*)", p}},
		Deny:           []Rule{{"Bash(rm:*)", c}},
		DefaultMode:    Value{"default", p},
		DefaultPattern: Value{"small-team", p},
		LeadModel:      Value{"big", u},

		MaxCoordinationShare: Value{"0.4", p},
		Leases:               Value{"warn", p},
		Remote:               Value{"git@host:team/app.git", p},
		RemoteBase:           Value{"main", p},
		GuardWords:           []Word{{"Alice", p}},
		GuardExempt:          []Rule{{"docs/team/**", p}},
		Env:                  map[string]string{"FOO": "1"},
		EnvSources:           map[string]Source{"FOO": c},
	}
	if diff := cmp.Diff(want, s, cmpopts.IgnoreFields(Settings{}, "Files"), cmpopts.IgnoreUnexported(Settings{})); diff != "" {
		t.Errorf("merged settings (-want +got):\n%s", diff)
	}
	if len(s.Files) != 3 {
		t.Errorf("files = %+v", s.Files)
	}
	if got := s.HooksFor(PostToolUse); len(got) != 1 || got[0].Command != "log.sh" {
		t.Errorf("HooksFor(PostToolUse) = %+v", got)
	}
}

func TestLoadClaudeOnly(t *testing.T) {
	ws := t.TempDir()
	write(t, filepath.Join(ws, ".claude", "settings.json"), `{"hooks": {"Stop": [{"matcher": "", "hooks": [{"type": "command", "command": "echo done"}]}]}}`)
	s, err := Load(Options{Workspace: ws, NoUser: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Hooks) != 1 || s.Hooks[0].Event != Stop || s.Hooks[0].Source.Scope != ScopeClaude {
		t.Errorf("hooks = %+v", s.Hooks)
	}
}

func TestLoadNothing(t *testing.T) {
	s, err := Load(Options{Workspace: t.TempDir(), NoUser: true, NoManaged: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&Settings{}, s, cmpopts.IgnoreUnexported(Settings{})); diff != "" {
		t.Error(diff)
	}
}

func TestParseErrors(t *testing.T) {
	src := Source{Scope: ScopeProject, Path: "/w/.troupe/settings.json"}
	tests := []struct {
		name, data, want string
	}{
		{"syntax", "{\n  \"hooks\": {,\n}", "/w/.troupe/settings.json:2:13: invalid character ','"},
		{"type", "{\n\"permissions\": {\"allow\": \"Bash\"}}", "/w/.troupe/settings.json:2:"},
		{"no type", `{"hooks": {"Stop": [{"hooks": [{"command": "x"}]}]}}`, `hooks.Stop[0].hooks[0]: no "type"`},
		{"empty command", `{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": " "}]}]}}`, `empty "command"`},
		{"bad timeout", `{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x", "timeout": -1}]}]}}`, "timeout -1"},
		{"not an object", `[1]`, "/w/.troupe/settings.json"},
		{"unknown mode", `{"permissions": {"defaultMode": "yolo"}}`, `permissions.defaultMode "yolo" is unknown`},
		{"coordination share", `{"team": {"maxCoordinationShare": 1.5}}`, `team.maxCoordinationShare 1.5 is out of range`},
		{"lease mode", `{"team": {"leases": "loose"}}`, `team.leases "loose" is unknown (want one of refuse, warn, off)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.data), src)
			if err == nil || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestParseWarnings(t *testing.T) {
	f, err := Parse([]byte(`{"hooks": {"PostCompact": [{"hooks": [{"type": "prompt", "command": "x"}]}]}, "sandbox": {}, "outputStyle": "x"}`), Source{Path: "s.json"})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Warnings) != 3 {
		t.Errorf("warnings = %q, want 3", f.Warnings)
	}
}

func TestLoadBadFileNamed(t *testing.T) {
	ws := t.TempDir()
	path := filepath.Join(ws, ".troupe", "settings.json")
	write(t, path, `{"team": `)
	_, err := Load(Options{Workspace: ws, NoUser: true})
	if err == nil || !strings.Contains(err.Error(), path+":1:") {
		t.Errorf("Load error = %v, want one naming %s and the position", err, path)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "x", "timeout": 3}]}]}}`))
	f.Add([]byte(`{"permissions": {"allow": ["Read(**)"]}, "artifactGuard": {"words": ["a"]}}`))
	f.Add([]byte("{\n\"team\": 1}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data, Source{Path: "f.json"})
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		_ = Merge(file)
	})
}

// TestSandboxKey: Claude Code's "sandbox" key is read and merged: the last
// file that says enabled wins, the lists add up, and the key is not
// reported as unknown.
func TestSandboxKey(t *testing.T) {
	a, err := Parse([]byte(`{"sandbox": {"enabled": true, "network": {"allowedDomains": ["example.com"]}, "filesystem": {"allowWrite": ["/tmp/out"], "denyRead": ["~/secret"]}}}`), Source{Scope: ScopeClaude, Path: "a.json"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse([]byte(`{"sandbox": {"filesystem": {"denyWrite": ["build"]}}}`), Source{Scope: ScopeProject, Path: "b.json"})
	if err != nil {
		t.Fatal(err)
	}
	got := Merge(a, b).Sandbox
	want := Sandbox{Enabled: true, Source: Source{Scope: ScopeClaude, Path: "a.json"}, AllowedDomains: []string{"example.com"},
		AllowWrite: []string{"/tmp/out"}, DenyWrite: []string{"build"}, DenyRead: []string{"~/secret"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sandbox (-want +got):\n%s", diff)
	}
	if len(a.Unknown) != 0 {
		t.Errorf("sandbox reported as unknown: %v", a.Unknown)
	}
	off, _ := Parse([]byte(`{"sandbox": {"enabled": false}}`), Source{Path: "c.json"})
	if Merge(a, off).Sandbox.Enabled {
		t.Error("a later enabled:false did not turn the sandbox off")
	}
}
