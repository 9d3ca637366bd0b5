package guard

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

func newGuard(t *testing.T, exempt ...string) *Guard {
	t.Helper()
	g, err := New([]string{"Zephyra", "  ", "Project Lynx", "ミライ"}, exempt)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestCount(t *testing.T) {
	tests := []struct {
		text, word string
		want       int
	}{
		{"zephyra wrote this", "Zephyra", 1},
		{"ZEPHYRA and Zephyra", "Zephyra", 2},
		{"zephyras", "Zephyra", 0},
		{"my_zephyra", "Zephyra", 0},
		{"(zephyra)", "Zephyra", 1},
		{"project  lynx", "Project Lynx", 0},
		{"see Project Lynx.", "Project Lynx", 1},
		{"担当はミライです", "ミライ", 1},
		{"aaa aa", "aa", 1},
		{"", "x", 0},
	}
	for _, tt := range tests {
		if got := count(tt.text, tt.word); got != tt.want {
			t.Errorf("count(%q, %q) = %d, want %d", tt.text, tt.word, got, tt.want)
		}
	}
}

func TestCheckWriteAndEdit(t *testing.T) {
	g := newGuard(t, "docs/team/**")
	tests := []struct {
		name     string
		err      error
		wantWord string
	}{
		{"new file with a word", g.CheckWrite("a.go", "// by Zephyra\n", ""), "Zephyra"},
		{"word already there", g.CheckWrite("a.go", "// by Zephyra\nmore\n", "// by Zephyra\n"), ""},
		{"word added again", g.CheckWrite("a.go", "Zephyra Zephyra", "Zephyra"), "Zephyra"},
		{"clean", g.CheckWrite("a.go", "package a\n", ""), ""},
		{"exempt guide", g.CheckWrite("docs/team/roles.md", "Zephyra leads", ""), ""},
		{"edit adds", g.CheckEdit("a.go", "x := 1", "x := 1 // ミライ"), "ミライ"},
		{"edit keeps", g.CheckEdit("a.go", "Zephyra: 1", "Zephyra: 2"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check(t, tt.err, tt.wantWord)
		})
	}
	var nilGuard *Guard
	if err := nilGuard.CheckWrite("a", "Zephyra", ""); err != nil {
		t.Error(err)
	}
}

func check(t *testing.T, err error, word string) {
	t.Helper()
	if word == "" {
		if err != nil {
			t.Errorf("refused: %v", err)
		}
		return
	}
	if !errors.Is(err, ErrListedWord) || !strings.Contains(err.Error(), `"`+word+`"`) {
		t.Errorf("error = %v, want a refusal naming %q", err, word)
	}
}

func TestCheckBash(t *testing.T) {
	g := newGuard(t)
	files := map[string]string{"msg.txt": "feat: parser\n\nPaired with zephyra.\n", "clean.txt": "feat: parser\n"}
	read := func(p string) (string, error) {
		if s, ok := files[p]; ok {
			return s, nil
		}
		return "", os.ErrNotExist
	}
	tests := []struct {
		cmd, word string
	}{
		{`git commit -m "fix parser (Zephyra)"`, "Zephyra"},
		{`git commit -am 'Zephyra was here'`, "Zephyra"},
		{`git commit -m"zephyra"`, "Zephyra"},
		{`git commit --message="project lynx launch"`, "Project Lynx"},
		{`git commit --message "Project Lynx"`, "Project Lynx"},
		{`git add . && git -C sub commit -q -m "done by ミライ"`, "ミライ"},
		{`GIT_AUTHOR_NAME=x git commit -m Zephyra`, "Zephyra"},
		{`git commit -F msg.txt`, "Zephyra"},
		{`git commit --file=msg.txt`, "Zephyra"},
		{"git commit -m \"$(cat <<'EOF'\nfeat: x\n\nZephyra\nEOF\n)\"", "Zephyra"},
		{"git commit -F - <<EOF\nfeat: Zephyra\nEOF", "Zephyra"},
		{`git commit -F clean.txt`, ""},
		{`git commit -F missing.txt`, ""},
		{`git commit -m "fix parser"`, ""},
		{`echo Zephyra > notes.txt`, ""}, // not a commit message (file writes through bash are not parsed)
		{`git log --author=Zephyra`, ""},
		{`git commit`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			check(t, g.CheckBash(tt.cmd, read), tt.word)
		})
	}
}

func TestGate(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "old.go"), []byte("// Zephyra\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "MSG"), []byte("Zephyra"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := tool.OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	// An additional directory's files are read through its own root.
	extra := t.TempDir()
	if err := os.WriteFile(filepath.Join(extra, "kept.go"), []byte("// Zephyra\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ws.AddDir(extra); err != nil {
		t.Fatal(err)
	}
	g := newGuard(t)
	next := 0
	gate := g.Gate(ws, func(context.Context, agent.Call) agent.Decision { next++; return agent.Decision{Allow: true} })
	mk := func(name string, in map[string]any) agent.Call {
		b, _ := json.Marshal(in)
		return agent.Call{Name: name, Input: b, Kind: tool.KindOf(name)}
	}
	// kinded is a call of a tool the guard knows only by its kind.
	kinded := func(name string, k kind.Kind, in map[string]any) agent.Call {
		c := mk(name, in)
		c.Kind = k
		return c
	}
	tests := []struct {
		call  agent.Call
		allow bool
	}{
		{mk("bash", map[string]any{"command": `git commit -m "Zephyra"`}), false},
		{mk("bash", map[string]any{"command": `git commit -F MSG`}), false},
		{mk("bash", map[string]any{"command": `git commit -m "fix"`}), true},
		{mk("write_file", map[string]any{"path": "new.go", "content": "zephyra"}), false},
		{mk("write_file", map[string]any{"path": filepath.Join(dir, "old.go"), "content": "// Zephyra\npackage a\n"}), true},
		{mk("edit_file", map[string]any{"path": "old.go", "old_string": "package a", "new_string": "package zephyra"}), false},
		{mk("read_file", map[string]any{"path": "old.go"}), true},
		// Tools the guard has no field-by-field reading of.
		{kinded("mcp__github__create_issue", kind.Unknown, map[string]any{"title": "x", "labels": []any{"zephyra"}}), false},
		{kinded("mcp__github__create_issue", kind.Unknown, map[string]any{"title": "x", "body": "fine"}), true},
		{kinded("web_post", kind.Network, map[string]any{"body": map[string]any{"text": "Zephyra"}}), false},
		{kinded("mcp__fs__write", kind.Edit, map[string]any{"file": "a.md", "text": "Zephyra"}), false},
		{kinded("mcp__sh__run", kind.Execute, map[string]any{"argv": []any{"git", "commit", "-m", "Zephyra"}}), false},
		{kinded("SendMessage", kind.Manage, map[string]any{"content": "Zephyra, look"}), true}, // stays in .troupe
		{kinded("mcp__fs__read", kind.Read, map[string]any{"path": "Zephyra.md"}), true},
		{mk("write_file", map[string]any{"path": filepath.Join(extra, "kept.go"), "content": "// Zephyra\npackage b\n"}), true},
		{mk("write_file", map[string]any{"path": filepath.Join(extra, "new.go"), "content": "// Zephyra\n"}), false},
	}
	for _, tt := range tests {
		d := gate(context.Background(), tt.call)
		if d.Allow != tt.allow {
			t.Errorf("%s %s: %+v, want allow=%v", tt.call.Name, tt.call.Input, d, tt.allow)
		}
		if !d.Allow && !strings.Contains(d.Reason, "artifactGuard.words") {
			t.Errorf("reason %q does not say where the word is listed", d.Reason)
		}
	}
	if next != 7 {
		t.Errorf("next ran %d times, want 7", next)
	}
}

func TestNewBadExempt(t *testing.T) {
	if _, err := New([]string{"x"}, []string{"docs/["}); err == nil || !strings.Contains(err.Error(), "docs/[") {
		t.Errorf("New = %v", err)
	}
}

func FuzzCheckBash(f *testing.F) {
	for _, s := range []string{`git commit -m "Zephyra"`, "git commit -F -", "git -C", `git commit -am`, "git commit --file"} {
		f.Add(s)
	}
	g, _ := New([]string{"Zephyra", "ミライ"}, nil)
	f.Fuzz(func(t *testing.T, cmd string) {
		_ = g.CheckBash(cmd, func(string) (string, error) { return "Zephyra", nil })
		_ = count(cmd, "ミライ")
	})
}

// TestAfterBash: after a command, the changed files that now hold a listed
// word are reported in its result; older files, exempt files, version
// control and troupe's state are not looked at.
func TestAfterBash(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-time.Hour)
	for name, text := range map[string]string{
		"legacy.md":       "Zephyra from long ago\n",
		"GUIDE.md":        "",
		".git/COMMIT_MSG": "",
		".troupe/x.json":  "",
		"clean.txt":       "",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := tool.OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	g := newGuard(t, "GUIDE.md")
	after := g.AfterBash(ws)
	start := time.Now()
	// What a command wrote: a listed word in a new file and in files the
	// guard must not look at, and a clean change.
	for name, text := range map[string]string{
		"out/notes.txt":   "made by Project Lynx\n",
		"GUIDE.md":        "Zephyra is our persona\n",
		".git/COMMIT_MSG": "Zephyra\n",
		".troupe/x.json":  `{"who":"Zephyra"}`,
		"clean.txt":       "nothing to see\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res := tool.Result{Content: "done\n"}
	after(context.Background(), agent.Call{Name: "bash", Kind: kind.Execute, Started: start}, &res)
	if !res.IsError || !strings.Contains(res.Content, `out/notes.txt now contains "Project Lynx"`) {
		t.Fatalf("result after the command: %+v", res)
	}
	for _, quiet := range []string{"legacy.md", "GUIDE.md", "COMMIT_MSG", "x.json", "clean.txt"} {
		if strings.Contains(res.Content, quiet) {
			t.Errorf("%s reported: %s", quiet, res.Content)
		}
	}
	// Edits are not followed by a scan (the gate saw their writes); a
	// tool of unknown kind may have run anything, so it is.
	res = tool.Result{Content: "ok"}
	after(context.Background(), agent.Call{Name: "write_file", Kind: kind.Edit, Started: start}, &res)
	if res.IsError || res.Content != "ok" {
		t.Fatalf("write_file result changed: %+v", res)
	}
	res = tool.Result{Content: "ok"}
	after(context.Background(), agent.Call{Name: "mcp__x__y", Started: start}, &res)
	if !res.IsError || !strings.Contains(res.Content, "out/notes.txt") {
		t.Fatalf("result after a tool of unknown kind: %+v", res)
	}
	if (*Guard)(nil).AfterBash(ws) != nil {
		t.Error("a nil guard scans")
	}
	// A guard with no words yet scans nothing, until the running team's
	// words arrive.
	empty, _ := New(nil, nil)
	later := empty.AfterBash(ws)
	res = tool.Result{Content: "ok"}
	later(context.Background(), agent.Call{Name: "bash", Kind: kind.Execute, Started: start}, &res)
	if res.IsError {
		t.Fatalf("an empty guard reported: %+v", res)
	}
	empty.SetRunWords([]string{"Lynx"})
	later(context.Background(), agent.Call{Name: "bash", Kind: kind.Execute, Started: start}, &res)
	if !res.IsError || !strings.Contains(res.Content, `"Lynx", a persona name or theme word of the running team`) {
		t.Fatalf("the running team's words were not looked for: %+v", res)
	}
}

// TestRunWords: the running team's words are refused like listed ones,
// with their own reason, until they are taken off; the operational guides
// seed 004 names stay writable.
func TestRunWords(t *testing.T) {
	g, err := New([]string{"Zephyra"}, []string{"guides/**"})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.CheckWrite("a.go", "// Marlow was here", ""); err != nil {
		t.Fatalf("refused before the team: %v", err)
	}
	g.SetRunWords([]string{"Marlow", " ", "Marlow", "Saltmarsh Light"})
	if diff := cmp.Diff([]string{"Marlow", "Saltmarsh Light"}, g.RunWords()); diff != "" {
		t.Error(diff)
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"file", g.CheckWrite("a.go", "// Marlow was here", ""), `a.go would contain "Marlow", a persona name or theme word`},
		{"edit", g.CheckEdit("a.go", "x", "Saltmarsh Light"), `would add "Saltmarsh Light", a persona name`},
		{"commit", g.CheckBash(`git commit -m "Marlow: fix"`, nil), `commit message would contain "Marlow", a persona name`},
		{"listed word keeps its reason", g.CheckWrite("a.go", "Zephyra", ""), "artifactGuard.words"},
		{"CLAUDE.md", g.CheckWrite("CLAUDE.md", "Marlow speaks softly", ""), ""},
		{"nested CLAUDE.md", g.CheckWrite("sub/CLAUDE.md", "Marlow", ""), ""},
		{"themes", g.CheckWrite(".claude/team-themes/example.json", "Marlow", ""), ""},
		{"team specs", g.CheckWrite("docs/specs/agentic/teams/fixed-theme.md", "Marlow", ""), ""},
		{"configured", g.CheckWrite("guides/team.md", "Marlow", ""), ""},
	}
	for _, tt := range tests {
		switch {
		case tt.want == "" && tt.err != nil:
			t.Errorf("%s: refused: %v", tt.name, tt.err)
		case tt.want != "" && (tt.err == nil || !strings.Contains(tt.err.Error(), tt.want)):
			t.Errorf("%s: %v, want %q", tt.name, tt.err, tt.want)
		}
	}
	g.SetRunWords(nil)
	if err := g.CheckWrite("a.go", "// Marlow was here", ""); err != nil {
		t.Errorf("refused after the team: %v", err)
	}
	var nilGuard *Guard
	nilGuard.SetRunWords([]string{"x"})
	if nilGuard.RunWords() != nil {
		t.Error("a nil guard kept words")
	}
}
