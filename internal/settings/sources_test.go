package settings

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// hermetic returns options whose every file lies under a temporary
// directory: home, troupe's user file, managed settings and the workspace.
func hermetic(t *testing.T) Options {
	t.Helper()
	root := t.TempDir()
	return Options{
		Workspace:   filepath.Join(root, "ws"),
		Home:        filepath.Join(root, "home"),
		UserFile:    filepath.Join(root, "config", "troupe", "settings.json"),
		ManagedFile: filepath.Join(root, "etc", "claude-code", "managed-settings.json"),
	}
}

func TestPathsOrder(t *testing.T) {
	o := hermetic(t)
	o.Flag = filepath.Join(o.Workspace, "extra.json")
	var got []string
	for _, src := range o.Paths() {
		got = append(got, string(src.Scope)+" "+strings.TrimPrefix(src.Path, filepath.Dir(o.Workspace)))
	}
	want := []string{
		"claude-user /home/.claude/settings.json",
		"user /config/troupe/settings.json",
		"claude /ws/.claude/settings.json",
		"claude /ws/.claude/settings.local.json",
		"project /ws/.troupe/settings.json",
		"project /ws/.troupe/settings.local.json",
		"flag /ws/extra.json",
		"managed /etc/claude-code/managed-settings.json",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Paths (-want +got):\n%s", diff)
	}
}

func TestPrecedence(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string // path relative to the temp root -> content
		flag  string
		check func(t *testing.T, s *Settings)
	}{
		{
			name: "managed wins over every file and the flag",
			files: map[string]string{
				"home/.claude/settings.json":            `{"model": "user-model", "permissions": {"defaultMode": "acceptEdits"}}`,
				"ws/.claude/settings.json":              `{"model": "project-model", "permissions": {"allow": ["Bash(rm:*)"]}}`,
				"ws/.troupe/settings.local.json":        `{"permissions": {"defaultMode": "bypassPermissions"}}`,
				"etc/claude-code/managed-settings.json": `{"model": "managed-model", "permissions": {"deny": ["Bash(rm:*)"], "defaultMode": "default"}}`,
			},
			flag: `{"model": "flag-model"}`,
			check: func(t *testing.T, s *Settings) {
				if s.Model.Value != "managed-model" || s.LeadModel.Value != "managed-model" || s.DefaultMode.Value != "default" {
					t.Errorf("model %v lead %v mode %v, want managed's", s.Model, s.LeadModel, s.DefaultMode)
				}
				if len(s.Deny) != 1 || s.Deny[0].Source.Scope != ScopeManaged {
					t.Errorf("deny = %v, want the managed rule", s.Deny)
				}
			},
		},
		{
			name: "flag wins over project files",
			files: map[string]string{
				"ws/.claude/settings.local.json": `{"model": "local", "env": {"A": "local", "B": "local"}}`,
				"extra.json":                     `{"model": "flag", "env": {"A": "flag"}}`,
			},
			flag: "extra.json",
			check: func(t *testing.T, s *Settings) {
				if s.Model.Value != "flag" || s.Model.Source.Scope != ScopeFlag {
					t.Errorf("model = %+v", s.Model)
				}
				if diff := cmp.Diff(map[string]string{"A": "flag", "B": "local"}, s.Env); diff != "" {
					t.Errorf("env (-want +got):\n%s", diff)
				}
				if s.EnvSources["B"].Scope != ScopeClaude || s.EnvSources["A"].Scope != ScopeFlag {
					t.Errorf("env sources = %v", s.EnvSources)
				}
			},
		},
		{
			name: "team.leadModel beats model in the same file, a later model beats both",
			files: map[string]string{
				"home/.claude/settings.json": `{"model": "m1", "team": {"leadModel": "lead1"}}`,
				"ws/.claude/settings.json":   `{"model": "m2"}`,
			},
			check: func(t *testing.T, s *Settings) {
				if s.LeadModel.Value != "m2" || s.Model.Value != "m2" {
					t.Errorf("lead %v model %v", s.LeadModel, s.Model)
				}
			},
		},
		{
			name: "additional directories resolved and deduplicated",
			files: map[string]string{
				"home/.claude/settings.json": `{"permissions": {"additionalDirectories": ["~/lib", "../shared"]}}`,
				"ws/.troupe/settings.json":   `{"permissions": {"additionalDirectories": ["/abs/dir/", "../shared/."]}}`,
			},
			check: func(t *testing.T, s *Settings) {
				root := filepath.Dir(s.opts.Workspace)
				var got []string
				for _, d := range s.AdditionalDirectories {
					got = append(got, d.Rule)
				}
				want := []string{filepath.Join(root, "home", "lib"), filepath.Join(root, "shared"), "/abs/dir"}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("additional directories (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "unknown keys kept and named once",
			files: map[string]string{
				"ws/.claude/settings.json": `{"$schema": "x", "statusLine": {"type": "command"}, "cleanupPeriodDays": 3}`,
			},
			check: func(t *testing.T, s *Settings) {
				w := s.Warnings()
				if len(w) != 2 || !strings.Contains(w[0], `"cleanupPeriodDays"`) || !strings.Contains(w[1], `"statusLine"`) || !strings.Contains(w[1], ".claude/settings.json") {
					t.Errorf("warnings = %q", w)
				}
				if string(s.Files[0].Unknown["cleanupPeriodDays"]) != "3" {
					t.Errorf("unknown = %v", s.Files[0].Unknown)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := hermetic(t)
			root := filepath.Dir(o.Workspace)
			for p, c := range tt.files {
				write(t, filepath.Join(root, p), c)
			}
			o.Flag = tt.flag
			if tt.flag != "" && !strings.HasPrefix(tt.flag, "{") {
				o.Flag = filepath.Join(root, tt.flag)
			}
			s, err := Load(o)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, s)
		})
	}
}

func TestFlagFileMustExist(t *testing.T) {
	o := hermetic(t)
	o.Flag = filepath.Join(o.Workspace, "nope.json")
	if _, err := Load(o); err == nil || !strings.Contains(err.Error(), "nope.json") {
		t.Errorf("Load error = %v, want one naming the missing --settings file", err)
	}
}

func TestHookScriptsAndProtectedPaths(t *testing.T) {
	o := hermetic(t)
	ws := o.Workspace
	write(t, filepath.Join(ws, ".claude", "hooks", "guard.sh"), "#!/bin/sh\nexit 0\n")
	write(t, filepath.Join(ws, "tools", "lint.py"), "print(1)\n")
	write(t, filepath.Join(o.Home, "bin", "notify"), "#!/bin/sh\n")
	write(t, filepath.Join(ws, ".claude", "settings.json"), `{"hooks": {
  "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/guard.sh --strict"}]}],
  "PostToolUse": [{"hooks": [{"type": "command", "command": "python3 tools/lint.py | jq . > /dev/null; ${TROUPE_PROJECT_DIR}/missing.sh"}]}],
  "Stop": [{"hooks": [{"type": "command", "command": "~/bin/notify done && /bin/true"}]}]
}}`)
	s, err := Load(o)
	if err != nil {
		t.Fatal(err)
	}
	wantScripts := []string{filepath.Join(ws, ".claude", "hooks", "guard.sh"), filepath.Join(o.Home, "bin", "notify"), filepath.Join(ws, "tools", "lint.py")}
	slices.Sort(wantScripts)
	if diff := cmp.Diff(wantScripts, s.HookScripts(ws)); diff != "" {
		t.Errorf("HookScripts (-want +got):\n%s", diff)
	}
	got := s.ProtectedPaths(ws)
	for _, p := range append([]string{
		filepath.Join(o.Home, ".claude", "settings.json"),
		o.UserFile, o.ManagedFile,
		filepath.Join(ws, ".claude", "settings.json"),
		filepath.Join(ws, ".claude", "settings.local.json"),
		filepath.Join(ws, ".troupe", "settings.json"),
		filepath.Join(ws, ".troupe", "settings.local.json"),
		filepath.Join(ws, ".claude", "agents"),
		filepath.Join(ws, ".claude", "commands"),
		filepath.Join(ws, ".claude", "skills"),
		filepath.Join(o.Home, ".claude", "agents"),
	}, wantScripts...) {
		if !slices.Contains(got, p) {
			t.Errorf("ProtectedPaths lacks %s; got %q", p, got)
		}
	}
	for _, p := range got {
		if strings.HasSuffix(p, "CLAUDE.md") || strings.HasPrefix(p, "/bin") {
			t.Errorf("ProtectedPaths has %s", p)
		}
	}
}

func TestSnapshotRoundTripAndChanges(t *testing.T) {
	o := hermetic(t)
	ws := o.Workspace
	script := filepath.Join(ws, "hooks", "check.sh")
	write(t, script, "#!/bin/sh\nexit 0\n")
	claude := filepath.Join(ws, ".claude", "settings.json")
	write(t, claude, `{"permissions": {"allow": ["Read(**)"]}, "env": {"X": "1"}, "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "sh hooks/check.sh"}]}]}}`)
	troupeLocal := filepath.Join(ws, ".troupe", "settings.local.json")
	write(t, troupeLocal, `{"team": {"defaultPattern": "solo"}}`)
	o.Flag = `{"model": "inline"}`
	s, err := Load(o)
	if err != nil {
		t.Fatal(err)
	}
	snap := s.Snapshot(time.Unix(100, 0))
	path := filepath.Join(ws, ".troupe", "snapshots", "x", SnapshotFileName)
	if err := WriteSnapshot(path, snap); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("snapshot file: %v %v", info, err)
	}
	if changes := snap.Changed(); len(changes) != 0 {
		t.Errorf("changes right after the snapshot: %v", changes)
	}

	// An agent rewrites the rules during the run.
	write(t, claude, `{"permissions": {"allow": ["Bash(*)"]}}`)
	write(t, script, "#!/bin/sh\nexit 2\n")
	if err := os.Remove(troupeLocal); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, ".claude", "settings.local.json"), `{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "sh hooks/new.sh"}]}]}}`)
	write(t, filepath.Join(ws, "hooks", "new.sh"), "#!/bin/sh\n")

	read, err := ReadSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	again, err := read.Settings()
	if err != nil {
		t.Fatal(err)
	}
	opts := []cmp.Option{cmpopts.IgnoreUnexported(Settings{}, File{}), cmpopts.EquateEmpty()}
	if diff := cmp.Diff(s, again, opts...); diff != "" {
		t.Errorf("settings from the snapshot differ from those loaded (-loaded +snapshot):\n%s", diff)
	}
	want := []Change{
		{What: "settings file", Kind: Modified, Path: claude},
		{What: "settings file", Kind: Added, Path: filepath.Join(ws, ".claude", "settings.local.json")},
		{What: "settings file", Kind: Removed, Path: troupeLocal},
		{What: "hook script", Kind: Modified, Path: script},
		{What: "hook script", Kind: Added, Path: filepath.Join(ws, "hooks", "new.sh")},
	}
	if diff := cmp.Diff(want, read.Changed()); diff != "" {
		t.Errorf("Changed (-want +got):\n%s", diff)
	}
}

func TestReadSnapshotErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadSnapshot(filepath.Join(dir, "none.json")); err == nil || !strings.Contains(err.Error(), "none.json") {
		t.Errorf("missing: %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	write(t, bad, `{"version": 99}`)
	if _, err := ReadSnapshot(bad); err == nil || !strings.Contains(err.Error(), "version 99") {
		t.Errorf("bad version: %v", err)
	}
}

func FuzzCommandWords(f *testing.F) {
	f.Add(`"$CLAUDE_PROJECT_DIR"/.claude/hooks/x.sh --a 'b c' | jq . > /dev/null`)
	f.Add(`~/bin/n && ${TROUPE_PROJECT_DIR}/y;z`)
	f.Fuzz(func(t *testing.T, cmd string) {
		for _, w := range commandWords(cmd) {
			_ = expandWord(w, "/ws", "/home/u")
		}
	})
}

func TestReadSnapshotSum(t *testing.T) {
	o := hermetic(t)
	s, err := Load(o)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "snap.json")
	if err := WriteSnapshot(path, s.Snapshot(time.Unix(1, 0))); err != nil {
		t.Fatal(err)
	}
	sum, err := HashFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSnapshotSum(path, sum); err != nil {
		t.Errorf("the written snapshot was refused: %v", err)
	}
	// An agent rewrites the snapshot to give teammates looser rules.
	data, _ := os.ReadFile(path)
	write(t, path, strings.Replace(string(data), `"files": [`, `"files": [{"source": {"scope": "flag", "path": "--settings"}, "exists": true, "content": "{\"permissions\": {\"allow\": [\"Bash(*)\"]}}"},`, 1))
	if _, err := ReadSnapshotSum(path, sum); err == nil || !strings.Contains(err.Error(), "changed after its session wrote it") {
		t.Errorf("a rewritten snapshot was accepted: %v", err)
	}
}
