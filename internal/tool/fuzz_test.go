package tool

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzRun runs each file tool with fuzzed arguments in a workspace that
// holds links leading out, and checks that nothing panics and nothing
// outside the workspace changes.
func FuzzRun(f *testing.F) {
	env, out := newSandbox(f)
	ws := env.Workspace.Dir()
	for target, name := range map[string]string{out + "/etc": "etc", "..": "up", out + "/new": "dangle", "loop": "loop"} {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			f.Fatal(err)
		}
	}
	writeFiles(f, ws, map[string]string{"a/b.txt": "hello secret\nworld\n", "c.go": "package c\n"})
	before := snapshot(f, out)
	parent := filepath.Dir(ws)

	for _, seed := range []struct {
		tool       uint8
		path, a, b string
		flag       bool
	}{
		{0, "a/b.txt", "", "", false}, {1, "x/y", "content", "", false}, {2, "a/b.txt", "hello", "bye", true},
		{3, ".", "**/*", "", false}, {4, "", "secret", "*.txt", true}, {0, "etc/passwd", "", "", false},
		{1, "dangle", "x", "", false}, {1, "up/out/etc/passwd", "x", "", false}, {3, "up", "**", "", false},
		{4, "etc", ".", "", false}, {2, "../out/etc/passwd", "secret", "x", false}, {1, "%2e%2e/x", "x", "", false},
		{3, ".", "../*", "", false}, {3, ".", "/**", "", false}, {4, ".", "(", "[", false}, {0, "loop/x", "", "", false},
	} {
		f.Add(seed.tool, seed.path, seed.a, seed.b, seed.flag)
	}
	tools := []Tool{readFileTool{}, writeFileTool{}, editFileTool{}, globTool{}, grepTool{}}
	f.Fuzz(func(t *testing.T, which uint8, path, a, b string, flag bool) {
		tl := tools[int(which)%len(tools)]
		var args map[string]any
		switch tl.(type) {
		case readFileTool:
			args = map[string]any{"path": path, "offset": len(a) % 5, "limit": len(b)%7 + 1}
		case writeFileTool:
			args = map[string]any{"path": path, "content": a}
		case editFileTool:
			args = map[string]any{"path": path, "old_string": a, "new_string": b, "replace_all": flag}
		case globTool:
			args = map[string]any{"pattern": a, "path": path}
		case grepTool:
			args = map[string]any{"pattern": a, "path": path, "glob": b, "ignore_case": flag, "output_mode": []string{"content", "count", "files_with_matches"}[len(b)%3], "context": len(a) % 3}
		}
		in, err := json.Marshal(args)
		if err != nil {
			t.Skip()
		}
		tl.Run(t.Context(), env, in)

		if diff := cmp.Diff(before, snapshot(t, out)); diff != "" {
			t.Fatalf("%s(%s) changed the outside (-before +after):\n%s", tl.Spec().Name, in, diff)
		}
		entries, err := os.ReadDir(parent)
		if err != nil || len(entries) != 2 {
			t.Fatalf("%s(%s) left %v beside the workspace", tl.Spec().Name, in, entries)
		}
	})
}
