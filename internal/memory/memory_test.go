package memory

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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

func TestFindUpTo(t *testing.T) {
	root := t.TempDir()
	top := filepath.Join(root, "top")
	mid := filepath.Join(top, "mid")
	ws := filepath.Join(mid, "ws")
	write(t, filepath.Join(root, "AGENTS.md"), "above the top: never read")
	write(t, filepath.Join(top, "TROUPE.md"), "top troupe")
	write(t, filepath.Join(top, "AGENTS.md"), "top agents")
	write(t, filepath.Join(mid, "CLAUDE.md"), "mid claude\n")
	write(t, filepath.Join(mid, "TROUPE.md"), " \n\n") // blank: left out
	write(t, filepath.Join(ws, "AGENTS.md"), "ws agents")
	write(t, filepath.Join(ws, "TROUPE.md"), "ws troupe")
	if err := os.Mkdir(filepath.Join(mid, "AGENTS.md"), 0o755); err != nil { // not a file
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" {
		// The usual CLAUDE.md -> AGENTS.md link is read once.
		if err := os.Symlink("AGENTS.md", filepath.Join(ws, "CLAUDE.md")); err != nil {
			t.Fatal(err)
		}
	}

	got, err := FindUpTo(ws, top)
	if err != nil {
		t.Fatal(err)
	}
	want := []File{
		{Path: filepath.Join(top, "AGENTS.md"), Content: "top agents"},
		{Path: filepath.Join(top, "TROUPE.md"), Content: "top troupe"},
		{Path: filepath.Join(mid, "CLAUDE.md"), Content: "mid claude\n"},
		{Path: filepath.Join(ws, "AGENTS.md"), Content: "ws agents"},
		{Path: filepath.Join(ws, "TROUPE.md"), Content: "ws troupe"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FindUpTo (-want +got):\n%s", diff)
	}

	// A top that is not above the workspace means the filesystem root, so
	// the file in root is found (and possibly others above it).
	got, err = FindUpTo(ws, filepath.Join(root, "elsewhere"))
	if err != nil {
		t.Fatal(err)
	}
	if !contains(got, filepath.Join(root, "AGENTS.md")) {
		t.Errorf("with an unrelated top, %s was not found: %v", filepath.Join(root, "AGENTS.md"), paths(got))
	}
}

func TestFindStopsAtHome(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "home")
	ws := filepath.Join(home, "src", "proj")
	t.Setenv("HOME", home)
	t.Setenv("USERPROFILE", home) // windows
	write(t, filepath.Join(root, "AGENTS.md"), "above home")
	write(t, filepath.Join(home, "AGENTS.md"), "personal")
	write(t, filepath.Join(ws, "CLAUDE.md"), "project")

	got, err := Find(ws)
	if err != nil {
		t.Fatal(err)
	}
	want := []File{
		{Path: filepath.Join(home, "AGENTS.md"), Content: "personal"},
		{Path: filepath.Join(ws, "CLAUDE.md"), Content: "project"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Find (-want +got):\n%s", diff)
	}
}

func TestFindTruncates(t *testing.T) {
	ws := t.TempDir()
	// A multi-byte rune straddles the cap: the cut must not split it.
	content := strings.Repeat("a", MaxFileSize-1) + "é" + strings.Repeat("b", 100)
	write(t, filepath.Join(ws, "AGENTS.md"), content)
	got, err := FindUpTo(ws, ws)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("got %d files, want 1", len(got))
	}
	want := strings.Repeat("a", MaxFileSize-1) + "\n\n[truncated: AGENTS.md is 41061 bytes; only the first 40959 are shown]"
	if diff := cmp.Diff(want, got[0].Content); diff != "" {
		t.Errorf("truncated content (-want +got):\n%s", diff)
	}
}

func TestFindUnreadable(t *testing.T) {
	if runtime.GOOS == "windows" || os.Geteuid() == 0 {
		t.Skip("needs a user that file permissions apply to")
	}
	ws := t.TempDir()
	write(t, filepath.Join(ws, "AGENTS.md"), "secret")
	write(t, filepath.Join(ws, "TROUPE.md"), "readable")
	if err := os.Chmod(filepath.Join(ws, "AGENTS.md"), 0); err != nil {
		t.Fatal(err)
	}
	got, err := FindUpTo(ws, ws)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(ws, "AGENTS.md")) {
		t.Errorf("error = %v, want one naming the unreadable file", err)
	}
	if diff := cmp.Diff([]File{{Path: filepath.Join(ws, "TROUPE.md"), Content: "readable"}}, got); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

func TestPrompt(t *testing.T) {
	tests := []struct {
		name  string
		files []File
		want  string
	}{
		{name: "none", want: ""},
		{
			name: "two",
			files: []File{
				{Path: "/home/u/AGENTS.md", Content: "Be brief.\n\n"},
				{Path: `/home/u/p "q"/CLAUDE.md`, Content: "Run make test."},
			},
			want: `Project instructions from memory files follow, outermost directory first. Follow them; where they disagree, the later (more specific) file wins.

<project-memory path="/home/u/AGENTS.md">
Be brief.
</project-memory>

<project-memory path="/home/u/p &quot;q&quot;/CLAUDE.md">
Run make test.
</project-memory>`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Prompt(tt.files)); diff != "" {
				t.Errorf("Prompt (-want +got):\n%s", diff)
			}
		})
	}
}

func paths(fs []File) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Path)
	}
	return out
}

func contains(fs []File, path string) bool {
	for _, f := range fs {
		if f.Path == path {
			return true
		}
	}
	return false
}
