package tool

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// escapeCase is a path a model might use to reach outside the workspace.
// {out} stands for the directory beside the workspace that holds
// etc/passwd = "secret", {ws} for the workspace.
type escapeCase struct {
	name  string
	path  string
	setup func(t *testing.T, env *Env, ws, out string)
	// inside marks paths that are legitimate names inside the workspace
	// (taken literally); they must stay inside rather than be refused.
	inside bool
	// readOnly restricts a case to the tools that only read, for paths
	// naming real system files.
	readOnly bool
	// msg, when set, must appear in the refusal.
	msg string
}

func symlink(target, name string) func(t *testing.T, env *Env, ws, out string) {
	return func(t *testing.T, env *Env, ws, out string) {
		t.Helper()
		target := strings.ReplaceAll(target, "{out}", out)
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
}

func both(fs ...func(t *testing.T, env *Env, ws, out string)) func(t *testing.T, env *Env, ws, out string) {
	return func(t *testing.T, env *Env, ws, out string) {
		for _, f := range fs {
			f(t, env, ws, out)
		}
	}
}

const outsideMsg = "outside the workspace"

var escapeCases = []escapeCase{
	{name: "absolute outside", path: "{out}/etc/passwd", msg: outsideMsg},
	{name: "absolute /etc/passwd", path: "/etc/passwd", readOnly: true, msg: outsideMsg},
	{name: "dotdot", path: "../out/etc/passwd", msg: outsideMsg},
	{name: "many dotdots", path: "../../../../../../..{out}/etc/passwd", msg: outsideMsg},
	{name: "dotdot after a dir", path: "a/../../out/etc/passwd", setup: symlinkFree("a"), msg: outsideMsg},
	{name: "workspace then dotdot", path: "{ws}/../out/etc/passwd", msg: outsideMsg},
	{name: "proc self root", path: "/proc/self/root{out}/etc/passwd", msg: outsideMsg},
	{name: "symlink to outside dir", path: "etc/passwd", setup: symlink("{out}/etc", "etc"), msg: outsideMsg},
	{name: "symlink to /etc", path: "sysetc/passwd", setup: symlink("/etc", "sysetc"), readOnly: true, msg: outsideMsg},
	{name: "symlink to /", path: "root{out}/etc/passwd", setup: symlink("/", "root"), msg: outsideMsg},
	{name: "symlink to ../..", path: "deep/up/out/etc/passwd", setup: symlink("../..", "deep/up"), msg: outsideMsg},
	{name: "relative symlink to outside file", path: "rel", setup: symlink("../out/etc/passwd", "rel"), msg: outsideMsg},
	{name: "symlink chain", path: "c1/passwd", setup: both(symlink("c2", "c1"), symlink("{out}/etc", "c2")), msg: outsideMsg},
	{name: "symlink loop", path: "loop1/x", setup: both(symlink("loop2", "loop1"), symlink("loop1", "loop2"))},
	{name: "symlinked dir then dotdot out", path: "link/../../out/etc/passwd", setup: symlink("{out}/etc", "link"), msg: outsideMsg},
	{name: "trailing slash dotdot", path: "../out/etc/", msg: outsideMsg},
	{name: "trailing slash through link", path: "etc/", setup: symlink("{out}/etc", "etc"), msg: outsideMsg},
	{name: "double slashes", path: "..//..//out//etc//passwd", msg: outsideMsg},
	{name: "symlink created by bash", path: "leak", setup: bashLink, msg: outsideMsg},
	{name: "dangling symlink out", path: "dangle", setup: symlink("{out}/newfile", "dangle"), msg: outsideMsg},
	{name: "parent dirs through symlinked dir", path: "outdir/new/sub/f.txt", setup: symlink("{out}", "outdir"), msg: outsideMsg},
	{name: "NUL byte", path: "a\x00/../../out/etc/passwd", msg: "NUL"},
	{name: "tilde", path: "~/etc/passwd", msg: "~"},
	{name: "bare tilde", path: "~", msg: "~"},
	{name: "percent-encoded dotdot", path: "%2e%2e/%2e%2e/out/etc/passwd", inside: true},
	{name: "backslashes", path: `..\..\out\etc\passwd`, inside: true},
	{name: "symlinked dir then dotdot inside", path: "link/../passwd", setup: symlink("{out}/etc", "link"), inside: true},
}

func symlinkFree(dir string) func(t *testing.T, env *Env, ws, out string) {
	return func(t *testing.T, env *Env, ws, out string) {
		if err := os.MkdirAll(filepath.Join(ws, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// bashLink makes the link the way a model would, through the bash tool.
func bashLink(t *testing.T, env *Env, ws, out string) {
	t.Helper()
	r := call(t, bashTool{}, env, map[string]any{"command": "ln -s " + out + "/etc/passwd leak"})
	if r.IsError {
		t.Fatalf("bash: %s", r.Content)
	}
}

// escapeCalls are the calls each case is tried with; the path goes where
// the tool takes one.
var escapeCalls = []struct {
	tool     Tool
	args     func(path string) map[string]any
	readOnly bool
}{
	{readFileTool{}, func(p string) map[string]any { return map[string]any{"path": p} }, true},
	{writeFileTool{}, func(p string) map[string]any { return map[string]any{"path": p, "content": "pwned"} }, false},
	{editFileTool{}, func(p string) map[string]any {
		return map[string]any{"path": p, "old_string": "secret", "new_string": "pwned"}
	}, false},
	{globTool{}, func(p string) map[string]any { return map[string]any{"pattern": "**", "path": p} }, true},
	{grepTool{}, func(p string) map[string]any { return map[string]any{"pattern": "secret", "path": p} }, true},
}

func TestEscapes(t *testing.T) {
	for _, tc := range escapeCases {
		for _, c := range escapeCalls {
			if tc.readOnly && !c.readOnly {
				continue
			}
			name := c.tool.Spec().Name
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				env, out := newSandbox(t)
				ws := env.Workspace.Dir()
				if tc.setup != nil {
					tc.setup(t, env, ws, out)
				}
				before := snapshot(t, out)
				path := strings.NewReplacer("{out}", out, "{ws}", ws).Replace(tc.path)
				got := call(t, c.tool, env, c.args(path))

				if diff := cmp.Diff(before, snapshot(t, out)); diff != "" {
					t.Fatalf("%s(%q) changed the outside (-before +after):\n%s", name, path, diff)
				}
				if strings.Contains(got.Content, "secret") {
					t.Errorf("%s(%q) leaked the outside file: %s", name, path, got.Content)
				}
				if tc.inside {
					if name == "write_file" && !got.IsError {
						want := filepath.Join(ws, filepath.Clean(path))
						if b, err := os.ReadFile(want); err != nil || string(b) != "pwned" {
							t.Errorf("write_file(%q) did not write %s: %v", path, want, err)
						}
					}
					return
				}
				if !got.IsError {
					t.Fatalf("%s(%q) was not refused: %s", name, path, got.Content)
				}
				if tc.msg != "" && !strings.Contains(got.Content, tc.msg) {
					t.Errorf("%s(%q) refusal %q does not say %q", name, path, got.Content, tc.msg)
				}
			})
		}
	}
}

// TestGlobPatternEscapes covers the pattern, which names paths too.
func TestGlobPatternEscapes(t *testing.T) {
	env, out := newSandbox(t)
	ws := env.Workspace.Dir()
	symlink("{out}/etc", "etc")(t, env, ws, out)
	for _, pattern := range []string{"../out/**", "../*/etc/passwd", out + "/**", "etc/**", "etc/passwd", "a/../../out/**", "/proc/self/root" + out + "/**"} {
		got := call(t, globTool{}, env, map[string]any{"pattern": pattern})
		if strings.Contains(got.Content, "passwd") && !got.IsError {
			t.Errorf("glob %q listed outside files: %s", pattern, got.Content)
		}
	}
	// Walking the whole workspace lists the link but never what is behind it.
	got := call(t, globTool{}, env, map[string]any{"pattern": "**"})
	if diff := cmp.Diff(OK("etc\n"), got); diff != "" {
		t.Errorf("glob ** (-want +got):\n%s", diff)
	}
	got = call(t, grepTool{}, env, map[string]any{"pattern": "secret"})
	if diff := cmp.Diff(OK(`No matches for "secret".`), got); diff != "" {
		t.Errorf("grep secret (-want +got):\n%s", diff)
	}
}

func TestResolve(t *testing.T) {
	env := newTestEnv(t)
	ws := env.Workspace
	dir := ws.Dir()
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{"a.go", "a.go", false},
		{"./a/../b.go", "b.go", false},
		{".", ".", false},
		{dir, ".", false},
		{dir + "/x/y", "x/y", false},
		{dir + "/", ".", false},
		{"%2e%2e", "%2e%2e", false},
		{"..", "", true},
		{"../x", "", true},
		{dir + "x", "", true}, // a sibling whose name starts like the workspace
		{"", "", true},
		{"~", "", true},
		{"a\x00b", "", true},
	}
	for _, tt := range tests {
		got, err := ws.Resolve(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
	_, err := ws.Resolve("../x")
	if want := `path "../x" is outside the workspace ` + dir; err == nil || err.Error() != want {
		t.Errorf("Resolve(../x) error = %v, want %q", err, want)
	}
}
