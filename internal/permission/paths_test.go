package permission

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/troupe-dev/troupe/internal/agent"
)

// workspace makes a workspace with a denied secrets/key, a symlink and a
// hard link to it, and a symlinked folder.
func workspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	mk := func(rel, body string) {
		t.Helper()
		p := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk("secrets/key", "k")
	mk("app/config/secrets/token", "t")
	mk("src/main.go", "package main")
	mk(".claude/settings.json", "{}")
	for _, l := range []struct{ target, name string }{
		{"secrets/key", "innocent.txt"},
		{"secrets", "docs"},
		{".claude/settings.json", "settings-link.json"},
		{"nowhere/new", "dangling"},
	} {
		if err := os.Symlink(filepath.Join(ws, l.target), filepath.Join(ws, l.name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(ws, "secrets/key"), filepath.Join(ws, "hard.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(ws, ".claude/settings.json"), filepath.Join(ws, "hard-settings.json")); err != nil {
		t.Fatal(err)
	}
	return ws
}

func TestRealPathDenies(t *testing.T) {
	ws := workspace(t)
	p, err := New(ws, Rules("Read", "Edit", "Bash"), Rules("Read(./secrets/**)", "Edit(./secrets/**)"), nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call agent.Call
		want Effect
	}{
		{"as written", read("secrets/key"), Deny},
		{"any depth", read("app/config/secrets/token"), Deny},
		{"a symlink to the file", read("innocent.txt"), Deny},
		{"through a symlinked folder", read("docs/key"), Deny},
		{"a hard link", read("hard.txt"), Deny},
		{"absolute through the link", read(filepath.Join(ws, "innocent.txt")), Deny},
		{"edit through a symlink", edit("innocent.txt"), Deny},
		{"write a new file through a symlinked folder", write("docs/new.txt"), Deny},
		{"write through a hard link", write("hard.txt"), Deny},
		{"an ordinary file", read("src/main.go"), Allow},
		{"a dangling link to an allowed place", write("dangling"), Allow},
		{"bash cat of a symlink", bash("cat innocent.txt"), Deny},
		{"bash cat of a hard link", bash("cat hard.txt"), Deny},
		{"bash input redirection", bash("wc -l < docs/key"), Deny},
		{"bash cp reads", bash("cp secrets/key /tmp/x"), Deny},
		{"bash tar", bash("tar czf /tmp/a.tgz secrets"), Deny},
		{"bash base64", bash("base64 app/config/secrets/token"), Deny},
		{"bash grep in the folder", bash("grep -r token secrets/"), Deny},
		{"bash glob", bash("head secr*/k*"), Deny},
		{"bash option value", bash("python3 tool.py --input=innocent.txt"), Deny},
		{"bash existing file as any word", bash("python3 tool.py hard.txt"), Deny},
		{"bash write into a denied folder", bash("echo x > docs/new"), Deny},
		{"bash ordinary", bash("cat src/main.go"), Allow},
		{"bash word that is no file", bash("echo secrets-are-fun"), Allow},
	}
	for _, mode := range []Mode{Default, Bypass} {
		for _, tt := range tests {
			if v := p.Check(mode, tt.call); v.Effect != tt.want {
				t.Errorf("%s %s: %s %s = %s (%s), want %s", mode, tt.name, tt.call.Name, tt.call.Input, v.Effect, v.Reason, tt.want)
			}
		}
	}
	for _, tc := range []struct {
		rel  string
		want bool
	}{
		{"secrets/key", true}, {"docs/key", true}, {"innocent.txt", true}, {"hard.txt", true},
		{"src/main.go", false}, {"app/config/secrets/token", true},
	} {
		if got := p.DeniesPath("grep", tc.rel); got != tc.want {
			t.Errorf("DeniesPath(grep, %s) = %v, want %v", tc.rel, got, tc.want)
		}
	}
}

func TestProtectedPaths(t *testing.T) {
	ws := workspace(t)
	outside := filepath.Join(t.TempDir(), "user-settings.json")
	p, err := New(ws, Rules("Edit", "Write", "Bash"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Protect(outside, "hooks/*.sh")
	calls := []agent.Call{
		write(".claude/settings.json"),
		edit(".claude/settings.local.json"),
		write(".troupe/settings.json"),
		write(".troupe/teams/t/inbox/bob.jsonl"),
		write(".mcp.json"),
		write(".git/hooks/pre-commit"),
		edit(".git/config"),
		write(outside),
		write("hooks/check.sh"),
		write("settings-link.json"),
		write("hard-settings.json"),
		write(filepath.Join(ws, ".claude", "settings.json")),
		bash("echo '{}' > .claude/settings.json"),
		bash("cp evil.json .claude/settings.json"),
		bash("mv x .git/hooks/pre-commit"),
		bash("tee .mcp.json < x"),
		bash("sed -i s/a/b/ .git/config"),
		bash("ln -sf /tmp/x .git/hooks/post-checkout"),
		bash("touch .troupe/x"),
		bash("truncate -s0 .claude/settings.local.json"),
		bash("rm -rf .git"),
		bash("rm -rf ."),
		bash("git config core.hooksPath /tmp/h"),
		bash("find .git -delete"),
		bash("echo x >> settings-link.json"),
		bash("cat x > " + outside),
	}
	for _, mode := range Modes {
		for _, c := range calls {
			if v := p.Check(mode, c); v.Effect != Deny || !v.Hard {
				t.Errorf("%s %s %s = %s (%s), want a hard deny", mode, c.Name, c.Input, v.Effect, v.Reason)
			}
		}
	}
	// Reads and ordinary writes are untouched; a rule that names the path
	// lifts the protection, a blanket one does not.
	for _, c := range []agent.Call{read(".claude/settings.json"), write("src/new.go"), bash("cat .git/config"), bash("git config --get user.name")} {
		if v := p.Check(Bypass, c); v.Effect != Allow {
			t.Errorf("%s %s = %s (%s), want allow", c.Name, c.Input, v.Effect, v.Reason)
		}
	}
	named, err := New(ws, Rules("Edit(.claude/settings.json)", "Edit(**)"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := named.Check(Default, edit(".claude/settings.json")); v.Effect != Allow {
		t.Errorf("named allow: %+v", v)
	}
	if v := named.Check(Bypass, edit(".mcp.json")); v.Effect != Deny {
		t.Errorf("Edit(**) lifted a protected path: %+v", v)
	}
}

// TestHardLinkAfterScan: a scan is kept for a while, but a link made to a
// covered file after it is still that file.
func TestHardLinkAfterScan(t *testing.T) {
	ws := workspace(t)
	p, err := New(ws, Rules("Read"), Rules("Read(secrets/**)"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !p.DeniesPath("read_file", "hard.txt") {
		t.Fatal("hard.txt not denied")
	}
	if err := os.Link(filepath.Join(ws, "secrets/key"), filepath.Join(ws, "later.txt")); err != nil {
		t.Fatal(err)
	}
	if v := p.Check(Default, read("later.txt")); v.Effect != Deny {
		t.Errorf("a link made after the scan: %+v", v)
	}
	if err := os.WriteFile(filepath.Join(ws, "two.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(ws, "two.txt"), filepath.Join(ws, "three.txt")); err != nil {
		t.Fatal(err)
	}
	if v := p.Check(Default, read("three.txt")); v.Effect != Allow {
		t.Errorf("a hard link between ordinary files: %+v", v)
	}
}

func TestGlobBounded(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a/x.go", "a/y.txt", "b/z.go", ".h/w.go", "c/d/e.go"} {
		p := filepath.Join(dir, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, complete := globBounded(filepath.Join(dir, "*/*.go"), 100)
	slices.Sort(got)
	want := []string{filepath.Join(dir, "a/x.go"), filepath.Join(dir, "b/z.go")}
	if !complete || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("globBounded = %v %v, want %v (dot folders stay out, as in bash)", got, complete, want)
	}
	if _, complete := globBounded(filepath.Join(dir, "*/*"), 3); complete {
		t.Error("a glob past its limit reported complete")
	}
}

// TestConcurrentChecks: agents share one policy; its caches must hold up
// under concurrent checks (run with -race).
func TestConcurrentChecks(t *testing.T) {
	ws := workspace(t)
	p, err := New(ws, Rules("Read", "Bash"), Rules("Read(secrets/**)"), nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan bool)
	for range 4 {
		go func() {
			ok := true
			for range 20 {
				ok = ok && p.DeniesPath("grep", "hard.txt") && p.Check(Default, bash("cat hard.txt")).Effect == Deny
			}
			done <- ok
		}()
	}
	for range 4 {
		if !<-done {
			t.Error("a concurrent check let the hard link through")
		}
	}
}
