package permission

import (
	"testing"

	"github.com/troupe-dev/troupe/internal/agent"
)

// TestAdditionalDirectories: Claude Code's additional directories follow
// the workspace's permission rules: reads run, edits follow the mode, and
// the protected paths stay protected there too.
func TestAdditionalDirectories(t *testing.T) {
	tests := []struct {
		why  string
		mode Mode
		call agent.Call
		want Effect
	}{
		{"reads in an additional directory run", Default, read("/shared/lib/a.go"), Allow},
		{"default mode: an edit there asks, as in the workspace", Default, edit("/shared/lib/a.go"), Ask},
		{"acceptEdits accepts edits there", AcceptEdits, write("/shared/lib/a.go"), Allow},
		{"acceptEdits runs filesystem commands there", AcceptEdits, bash("mkdir -p /shared/build"), Allow},
		{"acceptEdits accepts a redirect there", AcceptEdits, bash("ls > /shared/list.txt"), Allow},
		{"but not filesystem commands elsewhere", AcceptEdits, bash("mkdir -p /elsewhere/build"), Ask},
		{"nor redirects elsewhere", AcceptEdits, bash("ls > /elsewhere/list.txt"), Ask},
		{"its settings are protected", Bypass, write("/shared/.claude/settings.json"), Deny},
		{"its git hooks are protected from bash too", Bypass, bash("echo x > /shared/.git/hooks/pre-commit"), Deny},
		{"removing it takes its protected paths away", Bypass, bash("rm -rf /shared"), Deny},
		{"an ordinary file there is not protected", Bypass, write("/shared/.claude/notes.md"), Allow},
	}
	p, err := New("/work/proj", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.AddDirs("/shared", "relative/ignored")
	for _, tt := range tests {
		if got := p.Check(tt.mode, tt.call); got.Effect != tt.want {
			t.Errorf("%s: %s %s = %v (%s), want %v", tt.why, tt.mode, tt.call.Input, got.Effect, got.Reason, tt.want)
		}
	}
}
