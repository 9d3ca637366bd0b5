package app

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
)

func TestSplitStoreURL(t *testing.T) {
	tests := []struct {
		url, scheme, rest string
	}{
		{"file:/var/x/.troupe", "file", "/var/x/.troupe"},
		{"file:///var/x/.troupe", "file", "/var/x/.troupe"},
		{"file:rel/.troupe", "file", "rel/.troupe"},
		{"/var/x/.troupe", "file", "/var/x/.troupe"},
		{"rel/.troupe", "file", "rel/.troupe"},
		{"./a:b", "file", "./a:b"},
		{"dir/a:b", "file", "dir/a:b"},
		{"s3://bucket/x", "s3", "//bucket/x"},
		{"postgres:db", "postgres", "db"},
		{"", "file", ""},
	}
	for _, tt := range tests {
		scheme, rest := splitStoreURL(tt.url)
		if scheme != tt.scheme || rest != tt.rest {
			t.Errorf("splitStoreURL(%q) = %q, %q; want %q, %q", tt.url, scheme, rest, tt.scheme, tt.rest)
		}
	}
}

func TestOpenStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tests := []struct {
		name, url string
		wantErr   string // "" opens
	}{
		{"file scheme", "file:" + dir, ""},
		{"file url", "file://" + dir, ""},
		{"plain path", dir, ""},
		{"unknown scheme", "s3://bucket/troupe", `unknown store scheme "s3" (known: file, nats)`},
		{"no directory", "file:", "no directory"},
		{"empty", "", "no directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := OpenStore(ctx, tt.url)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("OpenStore(%q) = %v; want an error with %q", tt.url, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			// Each URL reaches the same state directory.
			name := strings.ReplaceAll(tt.name, " ", "-")
			if _, err := s.CreateTeam(ctx, store.Roster{Name: name}); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dir, "teams", name, "config.json")); err != nil {
				t.Errorf("team %s not under %s: %v", name, dir, err)
			}
		})
	}
}

func TestBuildProviderErrors(t *testing.T) {
	tests := []struct {
		name     string
		choice   ProviderChoice
		env      map[string]string
		want     Kind
		endpoint string // when it builds
	}{
		{"no key", ProviderChoice{Name: "anthropic"}, nil, KindNoKey, ""},
		{"unknown provider", ProviderChoice{Name: "gemini"}, map[string]string{"ANTHROPIC_API_KEY": "k"}, KindUsage, ""},
		{"openai without endpoint", ProviderChoice{Name: "openai"}, nil, KindUsage, ""},
		{"bad reply cap", ProviderChoice{Name: "anthropic"}, map[string]string{"ANTHROPIC_API_KEY": "k", "TROUPE_MAX_REPLY_BYTES": "lots"}, KindUsage, ""},
		{"anthropic", ProviderChoice{Name: "anthropic"}, map[string]string{"ANTHROPIC_API_KEY": "k"}, -1, "https://api.anthropic.com"},
		{"anthropic at a URL", ProviderChoice{Name: "anthropic", BaseURL: "http://127.0.0.1:9"}, map[string]string{"ANTHROPIC_API_KEY": "k"}, -1, "http://127.0.0.1:9"},
		{"openai", ProviderChoice{Name: "openai", BaseURL: "http://127.0.0.1:9/v1"}, nil, -1, "http://127.0.0.1:9/v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "TROUPE_MAX_REPLY_BYTES"} {
				t.Setenv(k, tt.env[k])
			}
			p, endpoint, err := BuildProvider(tt.choice, 0)
			if tt.want >= 0 {
				if err == nil {
					t.Fatalf("built %v; want an error of kind %d", p, tt.want)
				}
				if got := KindOf(err); got != tt.want {
					t.Errorf("KindOf(%v) = %d; want %d", err, got, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if endpoint != tt.endpoint {
				t.Errorf("endpoint %q; want %q", endpoint, tt.endpoint)
			}
		})
	}
}

func TestKindOf(t *testing.T) {
	base := errors.New("x")
	tests := []struct {
		err  error
		want Kind
	}{
		{base, KindFailure},
		{usageError(base), KindUsage},
		{noKeyError(base), KindNoKey},
		{failure(base), KindFailure},
	}
	for _, tt := range tests {
		if got := KindOf(tt.err); got != tt.want {
			t.Errorf("KindOf(%v) = %d; want %d", tt.err, got, tt.want)
		}
		if tt.err.Error() != "x" {
			t.Errorf("message %q; want the cause's, x", tt.err.Error())
		}
	}
}

// isolate keeps the test's settings and keys away from the user's.
func isolate(t *testing.T) string {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", filepath.Join(home, "state"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
	ws := t.TempDir()
	return ws
}

func TestOpenEnvAndSessionConfig(t *testing.T) {
	ws := isolate(t)
	ctx := context.Background()
	if err := os.MkdirAll(filepath.Join(ws, ".troupe"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".troupe", "settings.json"), []byte(`{"permissions": {"defaultMode": "acceptEdits"}, "model": "opus"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := OpenEnv(ctx, Options{Dir: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.StateDir != filepath.Join(ws, ".troupe") {
		t.Errorf("StateDir %s; want the workspace's .troupe", e.StateDir)
	}
	if _, err := os.Stat(filepath.Join(e.StateDir, "troupe.log")); err != nil {
		t.Errorf("no log file: %v", err)
	}
	// The store is the file store in the state directory.
	if _, err := e.Store.CreateTeam(ctx, store.Roster{Name: "t1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(e.StateDir, "teams", "t1", "config.json")); err != nil {
		t.Errorf("the env's store is not in its state directory: %v", err)
	}
	if e.Rules == nil || e.Rules.Policy == nil || e.Rules.Hooks == nil {
		t.Fatalf("rules not assembled: %+v", e.Rules)
	}

	cfg, err := e.SessionConfig(nil, "", 3, TeamOptions{TeammateMode: team.ModeProcess, IdleTimeout: 0, TeammateModel: "small"},
		ProviderChoice{Name: "openai", BaseURL: "http://127.0.0.1:9/v1"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PermissionMode != "acceptEdits" {
		t.Errorf("PermissionMode %q; want the settings' acceptEdits", cfg.PermissionMode)
	}
	if !strings.HasPrefix(cfg.Model, "claude-opus") {
		t.Errorf("Model %q; want the settings' opus alias resolved", cfg.Model)
	}
	if cfg.Store != e.Store || cfg.Rules != e.Rules || cfg.Workspace != e.Workspace {
		t.Error("the session's store, rules or workspace are not the env's")
	}
	args := cfg.AgentCommand[1:]
	for _, want := range [][]string{
		{"agent", "--state-dir", e.StateDir}, // the team's Placement adds each teammate's --workspace
		{"--provider", "openai", "--base-url", "http://127.0.0.1:9/v1"},
		{"--max-turns", "3"},
		{"--model", "small"},
	} {
		if !containsRun(args, want) {
			t.Errorf("AgentCommand %q lacks %q", args, want)
		}
	}
	if slices.Contains(args, "--sandbox") {
		t.Errorf("AgentCommand %q has --sandbox, not asked for", args)
	}

	if err := e.AddFlagRules([]string{"Bash(git log:*)"}, []string{"Bash(rm:*)"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range append(e.Settings.Allow, e.Settings.Deny...) {
		got = append(got, r.Rule+" "+r.Source.Path)
	}
	if diff := cmp.Diff([]string{"Bash(git log:*) --allowedTools", "Bash(rm:*) --disallowedTools"}, got); diff != "" {
		t.Errorf("flag rules (-want +got):\n%s", diff)
	}
	if err := e.AddFlagRules([]string{"Bash(unclosed"}, nil); KindOf(err) != KindUsage {
		t.Errorf("a malformed rule: %v (kind %d); want a usage error", err, KindOf(err))
	}
}

// TestRemoteSetting: team.remote and team.remoteBase give the git remote
// teammates on other machines clone; --remote wins over team.remote.
func TestRemoteSetting(t *testing.T) {
	for _, tc := range []struct {
		name, settings, flag string
		want                 team.RemoteGit
	}{
		{"none", `{}`, "", team.RemoteGit{}},
		{"settings", `{"team": {"remote": "git@hub:t/app.git", "remoteBase": "main"}}`, "", team.RemoteGit{URL: "git@hub:t/app.git", Base: "main"}},
		{"flag wins", `{"team": {"remote": "git@hub:t/app.git", "remoteBase": "main"}}`, "/srv/app.git", team.RemoteGit{URL: "/srv/app.git", Base: "main"}},
		{"flag alone", `{}`, "/srv/app.git", team.RemoteGit{URL: "/srv/app.git"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := isolate(t)
			if err := os.MkdirAll(filepath.Join(ws, ".troupe"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, ".troupe", "settings.json"), []byte(tc.settings), 0o644); err != nil {
				t.Fatal(err)
			}
			e, err := OpenEnv(context.Background(), Options{Dir: ws})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			cfg, err := e.SessionConfig(nil, "", 0, TeamOptions{Remote: tc.flag}, ProviderChoice{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, cfg.Remote); diff != "" {
				t.Errorf("remote (-want +got):\n%s", diff)
			}
		})
	}
}

func containsRun(s, run []string) bool {
	for i := 0; i+len(run) <= len(s); i++ {
		if slices.Equal(s[i:i+len(run)], run) {
			return true
		}
	}
	return false
}

func TestTeamEvents(t *testing.T) {
	ctx := context.Background()
	st, err := OpenStore(ctx, "file:"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tm, err := st.CreateTeam(ctx, store.Roster{Name: "gone"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tm.Journal().Append(ctx, store.Event{Type: "send", Agent: "team-lead"}); err != nil {
		t.Fatal(err)
	}
	types := func() []string {
		t.Helper()
		evs, err := TeamEvents(ctx, st, "gone")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range evs {
			out = append(out, e.Type)
		}
		return out
	}
	live := types()
	if !slices.Contains(live, "send") {
		t.Fatalf("live journal %v has no send", live)
	}
	if _, err := st.ArchiveTeam(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(live, types()); diff != "" {
		t.Errorf("archived journal differs from the live one (-live +archived):\n%s", diff)
	}
	if _, err := TeamEvents(ctx, st, "never"); !errors.Is(err, store.ErrTeamNotFound) {
		t.Errorf("a team that never was: %v; want ErrTeamNotFound", err)
	}
}
