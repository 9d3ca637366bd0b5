package tool

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// toolCase is one call of a tool against a workspace holding files.
type toolCase struct {
	name  string
	files map[string]string
	args  map[string]any
	want  Result
	// after, when set, is the content files must have afterwards.
	after map[string]string
}

func runToolCases(t *testing.T, tl Tool, tests []toolCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnv(t)
			dir := env.Workspace.Dir()
			writeFiles(t, dir, tt.files)
			got := call(t, tl, env, tt.args)
			got.Content = strings.ReplaceAll(got.Content, dir, "{ws}")
			if diff := cmp.Diff(tt.want, got, noResponse); diff != "" {
				t.Errorf("%s(%v) (-want +got):\n%s", tl.Spec().Name, tt.args, diff)
			}
			for name, want := range tt.after {
				b, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, string(b)); diff != "" {
					t.Errorf("%s afterwards (-want +got):\n%s", name, diff)
				}
			}
		})
	}
}

func TestReadFile(t *testing.T) {
	three := map[string]string{"a.txt": "one\ntwo\nthree\n"}
	long := strings.Repeat("x", 2500)
	huge := strings.Repeat("é", 100_000) // 200,000 bytes on one line
	runToolCases(t, readFileTool{}, []toolCase{
		{name: "whole file", files: three, args: map[string]any{"path": "a.txt"},
			want: OK("     1\tone\n     2\ttwo\n     3\tthree\n")},
		{name: "absolute inside", files: three, args: map[string]any{"path": "{ws}/a.txt"},
			want: Errorf(`read_file: "{ws}/a.txt" does not exist`)},
		{name: "offset and limit", files: three, args: map[string]any{"path": "a.txt", "offset": 2, "limit": 1},
			want: OK("     2\ttwo\n\n(showing lines 2-2 of 3; 1 line more: continue with offset=3)\n")},
		{name: "no final newline, CRLF", files: map[string]string{"b.txt": "a\r\nb"}, args: map[string]any{"path": "b.txt"},
			want: OK("     1\ta\n     2\tb\n")},
		{name: "long line", files: map[string]string{"l.txt": long + "\nend\n"}, args: map[string]any{"path": "l.txt"},
			want: OK("     1\t" + long[:2000] + "… [line cut: 500 more bytes]\n     2\tend\n")},
		{name: "huge line", files: map[string]string{"h.txt": huge}, args: map[string]any{"path": "h.txt"},
			want: OK("     1\t" + huge[:2000] + "… [line cut: 198000 more bytes]\n")},
		{name: "empty", files: map[string]string{"e.txt": ""}, args: map[string]any{"path": "e.txt"},
			want: OK("(e.txt is empty)")},
		{name: "directory", files: map[string]string{"d/x": ""}, args: map[string]any{"path": "d"},
			want: Errorf(`read_file: "d" is a directory; use glob to list its files`)},
		{name: "binary", files: map[string]string{"bin": "ELF\x00\x01"}, args: map[string]any{"path": "bin"},
			want: Errorf(`read_file: "bin" is a binary file (5 bytes); it cannot be shown as text`)},
		{name: "missing", args: map[string]any{"path": "nope.go"},
			want: Errorf(`read_file: "nope.go" does not exist`)},
		{name: "offset past end", files: three, args: map[string]any{"path": "a.txt", "offset": 9},
			want: Errorf(`read_file: offset 9 is past the end of "a.txt", which has 3 lines`)},
		{name: "offset zero", files: three, args: map[string]any{"path": "a.txt", "offset": 0},
			want: Errorf(`invalid arguments for read_file: "offset" is 1-based and must be at least 1, got 0`)},
		{name: "limit as string", files: three, args: map[string]any{"path": "a.txt", "limit": "5"},
			want: Errorf(`invalid arguments for read_file: "limit" must be an integer, got string`)},
		{name: "outside", args: map[string]any{"path": "../x"},
			want: Errorf(`read_file: path "../x" is outside the workspace {ws}`)},
	})
}

// The absolute form of a path inside the workspace is accepted.
func TestReadFileAbsolute(t *testing.T) {
	env := newTestEnv(t)
	writeFiles(t, env.Workspace.Dir(), map[string]string{"a/b.txt": "hi\n"})
	got := call(t, readFileTool{}, env, map[string]any{"path": filepath.Join(env.Workspace.Dir(), "a/b.txt")})
	if diff := cmp.Diff(OK("     1\thi\n"), got, noResponse); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestReadFileLimitDefault(t *testing.T) {
	env := newTestEnv(t)
	var b strings.Builder
	for range 2500 {
		b.WriteString("x\n")
	}
	writeFiles(t, env.Workspace.Dir(), map[string]string{"big.txt": b.String()})
	got := call(t, readFileTool{}, env, map[string]any{"path": "big.txt"})
	if got.IsError || strings.Count(got.Content, "\tx\n") != 2000 ||
		!strings.HasSuffix(got.Content, "(showing lines 1-2000 of 2500; 500 lines more: continue with offset=2001)\n") {
		t.Errorf("got %d lines, tail %q", strings.Count(got.Content, "\n"), got.Content[len(got.Content)-100:])
	}
}

func TestWriteFile(t *testing.T) {
	runToolCases(t, writeFileTool{}, []toolCase{
		{name: "create with parents", args: map[string]any{"path": "d/e/f.txt", "content": "hello"},
			want: OK("Created d/e/f.txt (5 bytes written)"), after: map[string]string{"d/e/f.txt": "hello"}},
		{name: "overwrite", files: map[string]string{"a.txt": "old"}, args: map[string]any{"path": "a.txt", "content": "new\n"},
			want: OK("Updated a.txt (4 bytes written)"), after: map[string]string{"a.txt": "new\n"}},
		{name: "empty content", args: map[string]any{"path": "empty", "content": ""},
			want: OK("Created empty (0 bytes written)"), after: map[string]string{"empty": ""}},
		{name: "through inside link", files: map[string]string{"real.txt": "old"}, args: map[string]any{"path": "real.txt", "content": "x"},
			want: OK("Updated real.txt (1 byte written)"), after: map[string]string{"real.txt": "x"}},
		{name: "directory", files: map[string]string{"d/x": ""}, args: map[string]any{"path": "d", "content": "x"},
			want: Errorf(`write_file: "d" is a directory`)},
		{name: "workspace itself", args: map[string]any{"path": ".", "content": "x"},
			want: Errorf(`write_file: bad path: the path is the workspace directory itself`)},
		{name: "parent is a file", files: map[string]string{"f": ""}, args: map[string]any{"path": "f/g", "content": "x"},
			want: Errorf(`write_file: "f/g": a component of the path is not a directory`)},
		{name: "content missing", args: map[string]any{"path": "a"},
			want: Errorf(`invalid arguments for write_file: "content" is required`)},
	})
}

func TestWriteFileKeepsModeAndLeavesNoTemp(t *testing.T) {
	env := newTestEnv(t)
	dir := env.Workspace.Dir()
	writeFiles(t, dir, map[string]string{"run.sh": "#!/bin/sh\n"})
	if err := os.Chmod(filepath.Join(dir, "run.sh"), 0o751); err != nil {
		t.Fatal(err)
	}
	if r := call(t, writeFileTool{}, env, map[string]any{"path": "run.sh", "content": "#!/bin/sh\necho\n"}); r.IsError {
		t.Fatal(r.Content)
	}
	if r := call(t, editFileTool{}, env, map[string]any{"path": "run.sh", "old_string": "echo", "new_string": "echo hi"}); r.IsError {
		t.Fatal(r.Content)
	}
	fi, err := os.Stat(filepath.Join(dir, "run.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o751 {
		t.Errorf("mode = %v, want 0751", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("workspace holds %v, want only run.sh", entries)
	}
}

// A link to a file inside the workspace is written through, not replaced.
func TestWriteThroughInsideLink(t *testing.T) {
	env := newTestEnv(t)
	dir := env.Workspace.Dir()
	writeFiles(t, dir, map[string]string{"real.txt": "old"})
	if err := os.Symlink("real.txt", filepath.Join(dir, "alias")); err != nil {
		t.Fatal(err)
	}
	if r := call(t, writeFileTool{}, env, map[string]any{"path": "alias", "content": "new"}); r.IsError {
		t.Fatal(r.Content)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "real.txt")); string(b) != "new" {
		t.Errorf("real.txt = %q, want new", b)
	}
	if fi, _ := os.Lstat(filepath.Join(dir, "alias")); fi.Mode()&os.ModeSymlink == 0 {
		t.Error("alias is no longer a link")
	}
}

func TestEditFile(t *testing.T) {
	src := map[string]string{"a.go": "package a\n\nfunc A() int { return 1 }\n\nfunc B() int { return 1 }\n"}
	runToolCases(t, editFileTool{}, []toolCase{
		{name: "unique", files: src, args: map[string]any{"path": "a.go", "old_string": "A() int { return 1 }", "new_string": "A() int { return 2 }"},
			want:  OK("Edited a.go: replaced 1 occurrence. The result:\n     1\tpackage a\n     2\t\n     3\tfunc A() int { return 2 }\n     4\t\n     5\tfunc B() int { return 1 }\n"),
			after: map[string]string{"a.go": "package a\n\nfunc A() int { return 2 }\n\nfunc B() int { return 1 }\n"}},
		{name: "ambiguous", files: src, args: map[string]any{"path": "a.go", "old_string": "return 1", "new_string": "return 2"},
			want:  Errorf(`edit_file: old_string matched 2 times in "a.go"; set replace_all to replace every occurrence, or include more surrounding context so that it matches exactly once`),
			after: src},
		{name: "replace all", files: src, args: map[string]any{"path": "a.go", "old_string": "return 1", "new_string": "return 2", "replace_all": true},
			want:  OK("Edited a.go: replaced 2 occurrences."),
			after: map[string]string{"a.go": "package a\n\nfunc A() int { return 2 }\n\nfunc B() int { return 2 }\n"}},
		{name: "not found", files: src, args: map[string]any{"path": "a.go", "old_string": "return  1", "new_string": "x"},
			want: Errorf(`edit_file: old_string matched 0 times in "a.go"; read the file again and copy the text exactly, including whitespace and indentation`)},
		{name: "same strings", files: src, args: map[string]any{"path": "a.go", "old_string": "x", "new_string": "x"},
			want: Errorf(`invalid arguments for edit_file: "old_string" and "new_string" are the same; there is nothing to change`)},
		{name: "empty old", files: src, args: map[string]any{"path": "a.go", "old_string": "", "new_string": "x"},
			want: Errorf(`invalid arguments for edit_file: "old_string" is empty; to create a file or replace all of it, use write_file`)},
		{name: "missing file", args: map[string]any{"path": "b.go", "old_string": "a", "new_string": "b"},
			want: Errorf(`edit_file: "b.go" does not exist`)},
		{name: "delete text", files: map[string]string{"t": "abc"}, args: map[string]any{"path": "t", "old_string": "b", "new_string": ""},
			want: OK("Edited t: replaced 1 occurrence. The result:\n     1\tac\n"), after: map[string]string{"t": "ac"}},
		{name: "replace_all wrong type", files: src, args: map[string]any{"path": "a.go", "old_string": "a", "new_string": "b", "replace_all": "yes"},
			want: Errorf(`invalid arguments for edit_file: "replace_all" must be a boolean (true or false), got string`)},
	})
}

func TestGlob(t *testing.T) {
	env := newTestEnv(t)
	dir := env.Workspace.Dir()
	writeFiles(t, dir, map[string]string{
		"main.go": "", "a/x.go": "", "a/b/y.go": "", "a/b/z.txt": "", ".git/hooks/h.go": "", ".troupe/s.go": "", "c/.hidden.go": "",
	})
	// Modification times decide the order: newest first.
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, name := range []string{"main.go", "a/x.go", "a/b/y.go", "c/.hidden.go"} {
		mt := base.Add(time.Duration(i) * time.Hour)
		if err := os.Chtimes(filepath.Join(dir, name), mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		args map[string]any
		want Result
	}{
		{"all go files newest first", map[string]any{"pattern": "**/*.go"}, OK("c/.hidden.go\na/b/y.go\na/x.go\nmain.go\n")},
		{"one level", map[string]any{"pattern": "*.go"}, OK("main.go\n")},
		{"under path", map[string]any{"pattern": "**/*.go", "path": "a"}, OK("a/b/y.go\na/x.go\n")},
		{"static prefix", map[string]any{"pattern": "a/b/*"}, OK("a/b/z.txt\na/b/y.go\n")},
		{"alternatives", map[string]any{"pattern": "**/*.{txt,md}"}, OK("a/b/z.txt\n")},
		{"absolute pattern inside", map[string]any{"pattern": dir + "/a/*.go"}, OK("a/x.go\n")},
		{"no match", map[string]any{"pattern": "**/*.rs"}, OK(`No files match "**/*.rs".`)},
		{"missing prefix", map[string]any{"pattern": "nope/**"}, OK(`No files match "nope/**".`)},
		{"bad pattern", map[string]any{"pattern": "a/[b"}, Errorf(`glob: pattern "a/[b" is not a valid glob`)},
		{"path is a file", map[string]any{"pattern": "*", "path": "main.go"}, Errorf(`glob: path "main.go" is not a directory`)},
		{"missing path", map[string]any{"pattern": "*", "path": "zz"}, Errorf(`glob: "zz" does not exist`)},
		{"dotdot pattern", map[string]any{"pattern": "a/../../*"}, Errorf(`glob: pattern "a/../../*" is outside the workspace {ws}: it may not contain ".."`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := call(t, globTool{}, env, tt.args)
			got.Content = strings.ReplaceAll(got.Content, dir, "{ws}")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("glob(%v) (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

func TestGlobCap(t *testing.T) {
	env := newTestEnv(t)
	files := map[string]string{}
	for i := range globCap + 5 {
		files[fmt.Sprintf("many/f%04d", i)] = ""
	}
	writeFiles(t, env.Workspace.Dir(), files)
	got := call(t, globTool{}, env, map[string]any{"pattern": "many/*"})
	lines := strings.Split(strings.TrimSpace(got.Content), "\n")
	if len(lines) != globCap+1 || lines[globCap] != "(showing the 1000 most recently modified of 1005 matches; use a narrower pattern or path)" {
		t.Errorf("got %d lines, last %q", len(lines), lines[len(lines)-1])
	}
}

func TestGrep(t *testing.T) {
	files := map[string]string{
		"a.go":        "package a\n// TODO: one\nfunc A() {}\n",
		"b/b.go":      "package b\n\nfunc B() {}\n// todo two\nvar x = 1\n",
		"b/c.txt":     "TODO three\n",
		"bin.dat":     "TODO\x00binary",
		".git/config": "TODO git\n",
		".troupe/t":   "TODO state\n",
	}
	runToolCases(t, grepTool{}, []toolCase{
		{name: "files with matches", files: files, args: map[string]any{"pattern": "TODO"},
			want: OK("a.go\nb/c.txt\n")},
		{name: "ignore case", files: files, args: map[string]any{"pattern": "todo", "ignore_case": true},
			want: OK("a.go\nb/b.go\nb/c.txt\n")},
		{name: "content", files: files, args: map[string]any{"pattern": "func", "output_mode": "content"},
			want: OK("a.go:3:func A() {}\nb/b.go:3:func B() {}\n")},
		{name: "content with context", files: files, args: map[string]any{"pattern": "func|var", "output_mode": "content", "context": 1, "path": "b"},
			want: OK("b/b.go-2-\nb/b.go:3:func B() {}\nb/b.go-4-// todo two\nb/b.go:5:var x = 1\n")},
		{name: "context groups", files: map[string]string{"f": "m\n1\n2\n3\n4\nm\n"}, args: map[string]any{"pattern": "m", "output_mode": "content", "context": 1},
			want: OK("f:1:m\nf-2-1\n--\nf-5-4\nf:6:m\n")},
		{name: "count", files: files, args: map[string]any{"pattern": "TODO|func", "output_mode": "count"},
			want: OK("a.go:2\nb/b.go:1\nb/c.txt:1\n\n(4 matching lines in 3 files)\n")},
		{name: "glob on names", files: files, args: map[string]any{"pattern": "TODO", "glob": "*.txt"},
			want: OK("b/c.txt\n")},
		{name: "glob on paths", files: files, args: map[string]any{"pattern": "package", "glob": "b/**/*.go"},
			want: OK("b/b.go\n")},
		{name: "single file", files: files, args: map[string]any{"pattern": "func", "path": "b/b.go", "output_mode": "content"},
			want: OK("b/b.go:3:func B() {}\n")},
		{name: "named binary file", files: files, args: map[string]any{"pattern": "TODO", "path": "bin.dat"},
			want: Errorf(`grep: "bin.dat" is a binary file`)},
		{name: "cap", files: map[string]string{"f": "x\nx\nx\nx\n"}, args: map[string]any{"pattern": "x", "output_mode": "content", "max_results": 2},
			want: OK("f:1:x\nf:2:x\n\n(results were capped; narrow the pattern, path or glob, or raise max_results)\n")},
		{name: "no match", files: files, args: map[string]any{"pattern": "nothing"},
			want: OK(`No matches for "nothing".`)},
		{name: "bad regexp", args: map[string]any{"pattern": "a("},
			want: Errorf("grep: the pattern is not a valid regular expression: error parsing regexp: missing closing ): `a(`")},
		{name: "bad mode", args: map[string]any{"pattern": "a", "output_mode": "lines"},
			want: Errorf(`invalid arguments for grep: "output_mode" must be content, files_with_matches or count, got "lines"`)},
		{name: "missing path", args: map[string]any{"pattern": "a", "path": "nope"},
			want: Errorf(`grep: "nope" does not exist`)},
	})
}

// TestSearchesLeaveOutHiddenPaths: a folder search skips what a deny rule
// forbids the searching tool, says how much it left out, and finds the rest.
func TestSearchesLeaveOutHiddenPaths(t *testing.T) {
	env := newTestEnv(t)
	writeFiles(t, env.Workspace.Dir(), map[string]string{
		"src/a.txt":          "token here\n",
		"secrets/key.txt":    "token=s3cr3t\n",
		"secrets/deep/x.txt": "token deep\n",
		"notes.txt":          "nothing\n",
	})
	var asked []string
	env.Hidden = func(tool, rel string) bool {
		asked = append(asked, tool)
		return rel == "secrets" || strings.HasPrefix(rel, "secrets/")
	}
	got := call(t, grepTool{}, env, map[string]any{"pattern": "token", "output_mode": "content"})
	if strings.Contains(got.Content, "s3cr3t") || strings.Contains(got.Content, "secrets/") || !strings.Contains(got.Content, "src/a.txt:1:token here") {
		t.Fatalf("grep over the workspace: %q", got.Content)
	}
	if !strings.Contains(got.Content, "1 path left out: a permission rule denies reading them") {
		t.Fatalf("grep does not say it left a path out: %q", got.Content)
	}
	got = call(t, grepTool{}, env, map[string]any{"pattern": "s3cr3t"})
	if got.Content != `No matches for "s3cr3t". (1 path left out: a permission rule denies reading them)` {
		t.Fatalf("grep for the secret itself: %q", got.Content)
	}
	got = call(t, globTool{}, env, map[string]any{"pattern": "**/*.txt"})
	if strings.Contains(got.Content, "secrets") || !strings.Contains(got.Content, "src/a.txt") || !strings.Contains(got.Content, "left out") {
		t.Fatalf("glob: %q", got.Content)
	}
	if !slices.Contains(asked, "grep") || !slices.Contains(asked, "glob") {
		t.Fatalf("Hidden was asked for %v", asked)
	}
}
