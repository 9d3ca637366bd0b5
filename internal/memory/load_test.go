package memory

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLoadOrder(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "home")
	ws := filepath.Join(home, "proj")
	managed := filepath.Join(root, "etc", "CLAUDE.md")
	files := map[string]string{
		managed: "managed",
		filepath.Join(home, ".claude", "CLAUDE.md"):          "user",
		filepath.Join(home, ".claude", "rules", "b.md"):      "user rule b",
		filepath.Join(home, ".claude", "rules", "a", "x.md"): "user rule a/x",
		filepath.Join(home, "AGENTS.md"):                     "home agents",
		filepath.Join(ws, "CLAUDE.local.md"):                 "local",
		filepath.Join(ws, "TROUPE.md"):                       "troupe",
		filepath.Join(ws, ".claude", "CLAUDE.md"):            "dot claude",
		filepath.Join(ws, "CLAUDE.md"):                       "claude",
		filepath.Join(ws, "AGENTS.md"):                       "agents",
		filepath.Join(ws, ".claude", "rules", "go.md"):       "---\npaths:\n  - \"**/*.go\"\n  - go.mod\n---\n\nUse gofmt.\n",
		filepath.Join(ws, ".claude", "rules", "all.md"):      "---\npaths: src/**, docs/*.md\n---\nAlways.",
		filepath.Join(ws, ".claude", "rules", "notes.txt"):   "not a rule",
	}
	for p, c := range files {
		write(t, p, c)
	}
	got, err := Load(ws, Options{Home: home, ManagedFile: managed})
	if err != nil {
		t.Fatal(err)
	}
	want := []File{
		{Path: managed, Content: "managed"},
		{Path: filepath.Join(home, ".claude", "CLAUDE.md"), Content: "user"},
		{Path: filepath.Join(home, ".claude", "rules", "a", "x.md"), Content: "user rule a/x"},
		{Path: filepath.Join(home, ".claude", "rules", "b.md"), Content: "user rule b"},
		{Path: filepath.Join(home, "AGENTS.md"), Content: "home agents"},
		{Path: filepath.Join(ws, "AGENTS.md"), Content: "agents"},
		{Path: filepath.Join(ws, "CLAUDE.md"), Content: "claude"},
		{Path: filepath.Join(ws, ".claude", "CLAUDE.md"), Content: "dot claude"},
		{Path: filepath.Join(ws, ".claude", "rules", "all.md"), Content: "Always.", Paths: []string{"src/**", "docs/*.md"}},
		{Path: filepath.Join(ws, ".claude", "rules", "go.md"), Content: "Use gofmt.\n", Paths: []string{"**/*.go", "go.mod"}},
		{Path: filepath.Join(ws, "TROUPE.md"), Content: "troupe"},
		{Path: filepath.Join(ws, "CLAUDE.local.md"), Content: "local"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load (-want +got):\n%s", diff)
	}
	p := Prompt(got[8:9])
	if !strings.Contains(p, `applies-to="src/**, docs/*.md"`) {
		t.Errorf("prompt does not say which files a rule is for:\n%s", p)
	}
}

func TestImports(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "home")
	ws := filepath.Join(root, "ws")
	write(t, filepath.Join(ws, "CLAUDE.md"), "See @docs/a.md and @README.md.\nMail bob@example.com, or `@docs/code.md`.\n```\n@docs/fenced.md\n```\n@~/.claude/mine.md\n@missing.md @../outside.md")
	write(t, filepath.Join(ws, "docs", "a.md"), "a imports @b.md")
	write(t, filepath.Join(ws, "docs", "b.md"), "b imports back @a.md")
	write(t, filepath.Join(ws, "README.md"), "readme")
	write(t, filepath.Join(ws, "docs", "code.md"), "never")
	write(t, filepath.Join(ws, "docs", "fenced.md"), "never")
	write(t, filepath.Join(home, ".claude", "mine.md"), "mine, imports @/etc/hostname-not-here")
	write(t, filepath.Join(root, "outside.md"), "outside")
	got, err := Load(ws, Options{Home: home, Top: ws, NoManaged: true})
	var gotPaths []string
	for _, f := range got {
		rel, _ := filepath.Rel(root, f.Path)
		by, _ := filepath.Rel(root, f.ImportedBy)
		if f.ImportedBy == "" {
			by = ""
		}
		gotPaths = append(gotPaths, rel+" <- "+by)
	}
	want := []string{
		"ws/CLAUDE.md <- ",
		"ws/docs/a.md <- ws/CLAUDE.md",
		"ws/docs/b.md <- ws/docs/a.md",
		"ws/README.md <- ws/CLAUDE.md",
		"home/.claude/mine.md <- ws/CLAUDE.md",
	}
	if diff := cmp.Diff(want, gotPaths); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	for _, w := range []string{"a cycle of 3", filepath.Join(root, "outside.md") + " skipped"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error = %v, want one saying %q", err, w)
		}
	}
	if strings.Contains(fmt.Sprint(err), "mine.md skipped") {
		t.Errorf("an import of the user's own file was refused: %v", err)
	}
}

func TestImportDepth(t *testing.T) {
	ws := t.TempDir()
	// f0 imports f1 … f7 imports f8: five hops are followed.
	for i := 0; i < 8; i++ {
		write(t, filepath.Join(ws, fmt.Sprintf("f%d.md", i)), fmt.Sprintf("level %d @f%d.md", i, i+1))
	}
	write(t, filepath.Join(ws, "f8.md"), "level 8")
	write(t, filepath.Join(ws, "CLAUDE.md"), "@f1.md")
	got, err := FindUpTo(ws, ws)
	if n := len(got); n != 1+MaxImportDepth {
		t.Errorf("got %d files, want the file and %d imports: %v", n, MaxImportDepth, paths(got))
	}
	if err == nil || !strings.Contains(err.Error(), "5 hops deep") {
		t.Errorf("error = %v, want one about the depth", err)
	}
}

func TestImportsParser(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"@a.md", []string{"a.md"}},
		{"x @a.md, @b/c.md.", []string{"a.md", "b/c.md"}},
		{"e@mail.com @@x", nil},
		{"`@a` ``@b ` @c`` @d", []string{"d"}},
		{"unclosed ` @a", []string{"a"}},
		{"~~~\n@a\n~~~\n@b", []string{"b"}},
		{"````\n```\n@a\n````\n@b", []string{"b"}},
		{"\t@~/x.md (@y.md)", []string{"~/x.md"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, Imports(tt.in)); diff != "" {
			t.Errorf("Imports(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func FuzzImports(f *testing.F) {
	f.Add("See @a.md and `@b` ```\n@c\n```")
	f.Add("---\npaths: [\"*.go\"]\n---\nbody")
	f.Fuzz(func(t *testing.T, s string) {
		for _, imp := range Imports(s) {
			if imp == "" || strings.ContainsAny(imp, " \t\n") {
				t.Fatalf("bad import %q from %q", imp, s)
			}
		}
		if _, body := ruleFrontMatter(s); len(body) > len(s) {
			t.Fatalf("body %q longer than the file %q", body, s)
		}
	})
}
