package file

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestGitignoreWrittenOnceAndKept(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), ".troupe")
	s, err := Open(dir, Options{DisableWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	got, err := os.ReadFile(filepath.Join(dir, ".gitignore"))
	if err != nil || string(got) != Gitignore {
		t.Fatalf(".gitignore = %q, %v", got, err)
	}
	// A user's own file is left alone.
	if err := os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{DisableWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if got, _ := os.ReadFile(filepath.Join(dir, ".gitignore")); string(got) != "mine\n" {
		t.Errorf(".gitignore overwritten: %q", got)
	}
}

// TestGitignoreKeepsTranscriptsOut asks git itself which paths it ignores.
func TestGitignoreKeepsTranscriptsOut(t *testing.T) {
	t.Parallel()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	ws := t.TempDir()
	if out, err := exec.Command(git, "-C", ws, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	s, err := Open(filepath.Join(ws, ".troupe"), Options{DisableWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	tests := []struct {
		path    string
		ignored bool
	}{
		{".troupe/teams/t/transcripts/alice.jsonl", true},
		{".troupe/teams/t/inbox/team-lead.jsonl", true},
		{".troupe/troupe.log", true},
		{".troupe/settings.local.json", true},
		{".troupe/settings.json", false},
		{".troupe/patterns/review.yaml", false},
		{".troupe/skills/pdf/SKILL.md", false},
	}
	for _, tt := range tests {
		cmd := exec.Command(git, "-C", ws, "check-ignore", "-q", "--no-index", tt.path)
		err := cmd.Run()
		ignored := err == nil
		if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 1) {
			t.Fatalf("git check-ignore %s: %v", tt.path, err)
		}
		if ignored != tt.ignored {
			t.Errorf("%s ignored = %v, want %v", tt.path, ignored, tt.ignored)
		}
	}
}
