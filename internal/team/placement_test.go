package team_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/tool"
)

// ownDir places every teammate in a workspace of its own (as a git
// worktree per teammate would), and remembers whom it placed.
type ownDir struct {
	root string
	t    *testing.T

	mu     sync.Mutex
	placed []string
}

func (p *ownDir) Place(_ context.Context, teamName, member string) (team.Env, error) {
	dir := filepath.Join(p.root, teamName, member)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return team.Env{}, err
	}
	ws, err := tool.OpenWorkspace(dir)
	if err != nil {
		return team.Env{}, err
	}
	p.t.Cleanup(func() { _ = ws.Close() })
	p.mu.Lock()
	p.placed = append(p.placed, teamName+"/"+member)
	p.mu.Unlock()
	return team.Env{Workspace: ws}, nil
}

// TestPlacement: a Placement decides where a teammate works. Its files
// land in its own workspace, not the lead's, and the roster records that
// directory as its cwd.
func TestPlacement(t *testing.T) {
	t.Parallel()
	p := &ownDir{root: t.TempDir(), t: t}
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Build it"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: placed}}
      - tool_use: {name: Task, input: {team_name: placed, name: solo, description: s, prompt: "Write the note."}}
  - agent: team-lead
    reply: [{text: "ok"}]
  - agent: solo
    contains: "Write the note."
    reply:
      - tool_use: {name: write_file, input: {path: note.txt, content: "mine"}}
  - agent: solo
    reply: [{text: "written"}]
`, func(c *team.Config) { c.Placement = p })
	f.run("Build it.")
	own := filepath.Join(p.root, "placed", "solo")
	if b, err := os.ReadFile(filepath.Join(own, "note.txt")); err != nil || string(b) != "mine" {
		t.Errorf("note in the teammate's workspace = %q, %v; want %q", b, err, "mine")
	}
	if _, err := os.Stat(filepath.Join(f.ws, "note.txt")); !os.IsNotExist(err) {
		t.Errorf("note in the lead's workspace: %v; want none", err)
	}
	r := f.roster()
	m, ok := r.Member("solo")
	if !ok {
		t.Fatal("solo is not on the roster")
	}
	if m.CWD != own {
		t.Errorf("solo's cwd = %q, want %q", m.CWD, own)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if diff := cmp.Diff([]string{"placed/solo"}, p.placed); diff != "" {
		t.Errorf("placed (-want +got):\n%s", diff)
	}
}
