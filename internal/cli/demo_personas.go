package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	fakeapiexamples "github.com/troupe-dev/troupe/examples/fakeapi"
	"github.com/troupe-dev/troupe/internal/pattern"
)

// personaGoal is what the persona story's lead is asked.
const personaGoal = "Keep a tide table for the harbour in tides.txt: write it, check it, review it, commit it."

// personaStory is seed 004's story: a fixed-theme team playing the bundled
// example theme, its characters speaking in their messages while nothing
// they leave behind (files, commits) names one. It is the one persona story
// there is, so other patterns and themes are refused by name.
func personaStory(pat, theme string) (demoStory, error) {
	if pat == "" {
		pat = pattern.FixedTheme
	}
	if theme == "" {
		theme = "example"
	}
	if p, ok := pattern.Load("").Lookup(pat); !ok || p.Name != pattern.FixedTheme || theme != "example" {
		return demoStory{}, fmt.Errorf("the persona demo plays --pattern %s --theme example (asked: --pattern %s --theme %s)", pattern.FixedTheme, pat, theme)
	}
	return demoStory{script: fakeapiexamples.LighthousePersonas, goal: personaGoal, files: []string{"tides.txt"}, tasks: 3, prepare: gitInit}, nil
}

// gitInit makes the demo's workspace a git repository, so that its
// commits can be read afterwards (git log shows no character's name).
func gitInit(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		return nil
	}
	if _, err := exec.LookPath("git"); err != nil {
		return errors.New("the persona demo commits its work: it needs git on PATH")
	}
	if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
		return fmt.Errorf("git init %s: %v: %s", dir, err, out)
	}
	return nil
}
