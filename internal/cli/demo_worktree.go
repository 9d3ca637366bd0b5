package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// demoWorktreeScript names the worktree demo's script in the demo marker,
// so troupe resume plays the same story.
const demoWorktreeScript = "rest-to-graphql-worktree"

// demoSeed is the blog the worktree demo starts from: its README's API
// line is what the analyst and the frontend developer both change.
var demoSeed = map[string]string{
	"README.md":     "# blog\n\nAPI: REST, see src/routes.js.\n",
	"src/routes.js": "// The blog's REST routes (the demo's starting point).\nmodule.exports = ['/users', '/users/:id', '/posts', '/posts/:id', '/posts/:id/comments'];\n",
}

// demoRepo makes dir a git repository on branch main with the seed blog
// committed, unless it is one already.
func demoRepo(ctx context.Context, dir string) error {
	git := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if _, err := exec.LookPath("git"); err != nil {
		return fmt.Errorf("the worktree demo needs git on PATH: %w", err)
	}
	if err := git("rev-parse", "--verify", "--quiet", "HEAD"); err == nil {
		return nil
	}
	if err := git("init", "--quiet", "-b", "main"); err != nil {
		return err
	}
	// The demo's own repository gets an identity, so that the teammates'
	// git commands work on a machine where none is configured.
	if err := git("config", "user.name", "troupe demo"); err != nil {
		return err
	}
	if err := git("config", "user.email", "demo@localhost"); err != nil {
		return err
	}
	for f, c := range demoSeed {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			return err
		}
	}
	if err := git("add", "README.md", "src/routes.js"); err != nil {
		return err
	}
	return git("commit", "--quiet", "-m", "The blog, before the migration")
}

// withOverlay adds an overlay script's rules to a script: its "first"
// rules before the script's own, its "last" rules after them.
func withOverlay(base, overlay []byte) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(base, &doc); err != nil {
		return nil, err
	}
	var ov struct {
		First []any `yaml:"first"`
		Last  []any `yaml:"last"`
	}
	if err := yaml.Unmarshal(overlay, &ov); err != nil {
		return nil, err
	}
	rules, _ := doc["rules"].([]any)
	doc["rules"] = append(append(ov.First, rules...), ov.Last...)
	return yaml.Marshal(doc)
}
