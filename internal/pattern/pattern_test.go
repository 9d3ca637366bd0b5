package pattern

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestManageOnly(t *testing.T) {
	s := Load("")
	tests := []struct {
		name string
		want bool
	}{
		{FixedTheme, true}, // the lead only manages: its edits are refused
		{FullTeam, true},   // troupe's first name for it
		{MixedGenius, false},
		{SmallTeam, false}, // the lead works too
		{"", false},        // not recorded yet: fail open
		{"no-such", false}, // unknown: fail open
	}
	for _, tt := range tests {
		if got := s.ManageOnly(tt.name); got != tt.want {
			t.Errorf("ManageOnly(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
	var nilSet *Set
	if nilSet.ManageOnly(FullTeam) {
		t.Error("a nil set blocked")
	}
}

func TestLoadUserPatterns(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "review-board.yaml"), `
description: Three reviewers and a lead that only manages.
lead_works: false
roles:
  - {name: security, description: Looks for vulnerabilities., model: claude-opus-4}
  - {name: performance, mcp_servers: [github]}
  - {name: style}
`)
	writeFile(t, filepath.Join(dir, "small.yml"), "name: mixed-genius\nlead_works: true\nsize: 1\nroles: [{name: pair}]\n")
	writeFile(t, filepath.Join(dir, "broken.yaml"), "name: [\n")
	writeFile(t, filepath.Join(dir, "typo.yaml"), "lead_work: true\n")
	writeFile(t, filepath.Join(dir, "BadName.yaml"), "name: Has Spaces\n")
	writeFile(t, filepath.Join(dir, "empty.yaml"), "")
	writeFile(t, filepath.Join(dir, "notes.txt"), "ignored")
	s := Load(dir)

	got, ok := s.Lookup("review-board")
	want := Pattern{
		Name: "review-board", Description: "Three reviewers and a lead that only manages.", Size: 3,
		Roles:  []Role{{Name: "security", Description: "Looks for vulnerabilities.", Model: "claude-opus-4"}, {Name: "performance", MCPServers: []string{"github"}}, {Name: "style"}},
		Source: filepath.Join(dir, "review-board.yaml"),
	}
	if diff := cmp.Diff(want, got); !ok || diff != "" {
		t.Errorf("review-board (-want +got):\n%s", diff)
	}
	if !s.ManageOnly("review-board") {
		t.Error("review-board should be manage-only")
	}
	if p, _ := s.Lookup("mixed-genius"); p.Size != 1 || p.Source != filepath.Join(dir, "small.yml") {
		t.Errorf("a user pattern did not replace the built-in: %+v", p)
	}
	if len(s.Warnings) != 4 {
		t.Errorf("warnings = %q, want 4", s.Warnings)
	}
	for _, f := range []string{"broken.yaml", "typo.yaml", "BadName.yaml", "empty.yaml"} {
		if !strings.Contains(strings.Join(s.Warnings, "\n"), filepath.Join(dir, f)) {
			t.Errorf("no warning names %s: %q", f, s.Warnings)
		}
	}
	var names []string
	for _, p := range s.All() {
		names = append(names, p.Name)
	}
	if diff := cmp.Diff([]string{FixedTheme, MixedGenius, "review-board"}, names); diff != "" {
		t.Error(diff)
	}
}

func TestDefault(t *testing.T) {
	s := Load("")
	if p, err := s.Default(""); err != nil || p.Name != FixedTheme {
		t.Errorf("Default(\"\") = %v, %v", p.Name, err)
	}
	if p, err := s.Default("small-team"); err != nil || p.Name != MixedGenius {
		t.Errorf("Default(small-team) = %v, %v", p.Name, err)
	}
	if _, err := s.Default("nope"); err == nil || !strings.Contains(err.Error(), "fixed-theme, mixed-genius") {
		t.Errorf("Default(nope) = %v", err)
	}
}

func TestRoleFor(t *testing.T) {
	p, _ := Load("").Lookup(SmallTeam)
	var got []string
	for i := range 3 {
		r, _ := p.RoleFor(i)
		got = append(got, r.Name)
	}
	if diff := cmp.Diff([]string{"implementer", "reviewer", "implementer"}, got); diff != "" {
		t.Error(diff)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("name: x\nlead_works: true\nsize: 2\nroles: [{name: a}]\n"))
	f.Add([]byte("roles: {}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data, "fuzz")
		if err == nil && !nameRE().MatchString(p.Name) {
			t.Fatalf("accepted name %q", p.Name)
		}
	})
}

func TestSizeText(t *testing.T) {
	s := Load("")
	tests := []struct{ name, want string }{{FixedTheme, "4-6 members"}, {MixedGenius, "2-3 members"}}
	for _, tt := range tests {
		p, _ := s.Lookup(tt.name)
		if got := p.SizeText(); got != tt.want {
			t.Errorf("%s: SizeText() = %q, want %q", tt.name, got, tt.want)
		}
	}
	if got := (Pattern{Size: 2}).SizeText(); got != "3 members" {
		t.Errorf("unbounded: %q", got)
	}
}

func TestConfigAndDefaultChoice(t *testing.T) {
	ws := t.TempDir()
	c, err := ReadConfig(ws)
	if err != nil || c != (Config{}) {
		t.Fatalf("no file: %+v, %v", c, err)
	}
	if got := DefaultChoice("", "", c); got != (Choice{Name: FixedTheme, Source: "builtin"}) {
		t.Errorf("nothing set: %+v", got)
	}
	path := filepath.Join(ws, ".claude", "team-themes", "config.json")
	writeFile(t, path, `{"default_pattern": "mixed-genius"}`)
	c, err = ReadConfig(ws)
	if err != nil || c.DefaultPattern != MixedGenius || c.Path != path {
		t.Fatalf("config: %+v, %v", c, err)
	}
	if got := DefaultChoice("", "", c); got != (Choice{Name: MixedGenius, Source: path}) {
		t.Errorf("config only: %+v", got)
	}
	if got := DefaultChoice("small-team", "/s.json", c); got != (Choice{Name: "small-team", Source: "/s.json"}) {
		t.Errorf("settings win: %+v", got)
	}
	writeFile(t, path, `{"defaultPattern": "fixed-theme"}`)
	if c, err = ReadConfig(ws); err != nil || c.DefaultPattern != FixedTheme {
		t.Errorf("camel case key: %+v, %v", c, err)
	}
	for _, bad := range []string{`[1]`, `{"default_pattern": 3}`, `{`} {
		writeFile(t, path, bad)
		if _, err := ReadConfig(ws); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v does not name the file", bad, err)
		}
	}
}

func TestParseIsolation(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{"size: 1\n", "", ""},
		{"size: 1\nisolation: Worktree\n", "worktree", ""},
		{"size: 1\nisolation: shared\n", "shared", ""},
		{"size: 1\nisolation: container\n", "", `isolation "container": want shared or worktree`},
	} {
		p, err := Parse([]byte(tc.in), "x")
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("Parse(%q) error = %v; want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || p.Isolation != tc.want {
			t.Errorf("Parse(%q) = isolation %q, %v; want %q", tc.in, p.Isolation, err, tc.want)
		}
	}
}
