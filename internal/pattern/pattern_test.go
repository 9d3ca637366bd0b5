package pattern

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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
		{FullTeam, true},      // the lead only manages: its edits are refused
		{"fixed-theme", true}, // seed 004's name for it
		{SmallTeam, false},    // the lead works too
		{"mixed-genius", false},
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
	writeFile(t, filepath.Join(dir, "small.yml"), "name: small-team\nlead_works: true\nsize: 1\nroles: [{name: pair}]\n")
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
	if p, _ := s.Lookup("small-team"); p.Size != 1 || p.Source != filepath.Join(dir, "small.yml") {
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
	if diff := cmp.Diff([]string{FullTeam, SmallTeam, "review-board"}, names); diff != "" {
		t.Error(diff)
	}
}

func TestDefault(t *testing.T) {
	s := Load("")
	if p, err := s.Default(""); err != nil || p.Name != FullTeam {
		t.Errorf("Default(\"\") = %v, %v", p.Name, err)
	}
	if p, err := s.Default("small-team"); err != nil || p.Name != SmallTeam {
		t.Errorf("Default(small-team) = %v, %v", p.Name, err)
	}
	if _, err := s.Default("nope"); err == nil || !strings.Contains(err.Error(), "full-team, small-team") {
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

func TestHistory(t *testing.T) {
	h := NewHistory(filepath.Join(t.TempDir(), ".troupe", "history.jsonl"))
	if got, err := h.Read(); err != nil || got != nil {
		t.Fatalf("empty history = %v, %v", got, err)
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	entries := []HistoryEntry{
		{Time: t0, Team: "a", Pattern: FullTeam, Members: []string{"ada", "bob"}},
		{Time: t0.Add(time.Hour), Team: "b", Pattern: SmallTeam, Members: []string{"cy", "ada"}},
	}
	for _, e := range entries {
		if err := h.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	// A torn last line is skipped.
	f, err := os.OpenFile(h.Path(), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"team": "c", "pat`)
	f.Close()
	got, err := h.Read()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]HistoryEntry{entries[1], entries[0]}, got); diff != "" {
		t.Errorf("Read (-want +got):\n%s", diff)
	}
	used, _ := h.UsedMembers()
	if diff := cmp.Diff([]string{"cy", "ada", "bob"}, used); diff != "" {
		t.Error(diff)
	}
}

func TestHistoryConcurrentAppends(t *testing.T) {
	h := NewHistory(filepath.Join(t.TempDir(), "history.jsonl"))
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if err := h.Append(HistoryEntry{Team: "t", Members: []string{strings.Repeat("x", 1000+i)}}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, err := h.Read()
	if err != nil || len(got) != 20 {
		t.Errorf("%d entries, %v", len(got), err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("name: x\nlead_works: true\nsize: 2\nroles: [{name: a}]\n"))
	f.Add([]byte("roles: {}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data, "fuzz")
		if err == nil && !nameRE.MatchString(p.Name) {
			t.Fatalf("accepted name %q", p.Name)
		}
	})
}
