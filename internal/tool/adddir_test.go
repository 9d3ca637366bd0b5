package tool

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// newAddDirEnv makes a workspace with an additional directory "extra"
// beside it holding extra/lib/a.txt, and the untouchable "out" directory.
func newAddDirEnv(t *testing.T) (env *Env, extra, out string) {
	t.Helper()
	env, out = newSandbox(t)
	extra = filepath.Join(filepath.Dir(env.Workspace.Dir()), "extra")
	writeFiles(t, extra, map[string]string{"lib/a.txt": "alpha\nbeta\n"})
	if err := os.Symlink(filepath.Join(out, "etc"), filepath.Join(extra, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := env.Workspace.AddDir(extra); err != nil {
		t.Fatal(err)
	}
	return env, extra, out
}

func TestAddDirTools(t *testing.T) {
	tests := []struct {
		name string
		tool Tool
		args map[string]any
		want Result
		// after is the content of extra/new.txt afterwards ("" absent).
		after string
	}{
		{name: "read absolute in extra", tool: readFileTool{}, args: map[string]any{"path": "{extra}/lib/a.txt"},
			want: OK("     1\talpha\n     2\tbeta\n")},
		{name: "relative stays in the workspace", tool: readFileTool{}, args: map[string]any{"path": "../extra/lib/a.txt"},
			want: Errorf(`read_file: path "../extra/lib/a.txt" is outside the workspace {ws} and the additional directories {extra}`)},
		{name: "outside every directory", tool: readFileTool{}, args: map[string]any{"path": "{out}/etc/passwd"},
			want: Errorf(`read_file: path "{out}/etc/passwd" is outside the workspace {ws} and the additional directories {extra}`)},
		{name: "symlink out of extra", tool: readFileTool{}, args: map[string]any{"path": "{extra}/escape/passwd"},
			want: Errorf(`read_file: path "{extra}/escape/passwd" is outside the workspace {extra} (through a symbolic link)`)},
		{name: "dot-dot out of extra", tool: readFileTool{}, args: map[string]any{"path": "{extra}/../out/etc/passwd"},
			want: Errorf(`read_file: path "{extra}/../out/etc/passwd" is outside the workspace {ws} and the additional directories {extra}`)},
		{name: "write in extra", tool: writeFileTool{}, args: map[string]any{"path": "{extra}/new.txt", "content": "hi\n"},
			want: OK("Created {extra}/new.txt (3 bytes written)"), after: "hi\n"},
		{name: "write through symlink out of extra", tool: writeFileTool{}, args: map[string]any{"path": "{extra}/escape/x", "content": "x"},
			want: Errorf(`write_file: path "{extra}/escape/x" is outside the workspace {extra} (through a symbolic link)`)},
		{name: "edit in extra", tool: editFileTool{}, args: map[string]any{"path": "{extra}/lib/a.txt", "old_string": "beta", "new_string": "gamma"},
			want: OK("Edited {extra}/lib/a.txt: replaced 1 occurrence. The result:\n     1\talpha\n     2\tgamma\n")},
		{name: "glob in extra", tool: globTool{}, args: map[string]any{"pattern": "**/*.txt", "path": "{extra}"},
			want: OK("{extra}/lib/a.txt\n")},
		{name: "absolute glob in extra", tool: globTool{}, args: map[string]any{"pattern": "{extra}/lib/*.txt"},
			want: OK("{extra}/lib/a.txt\n")},
		{name: "glob does not follow the symlink out", tool: globTool{}, args: map[string]any{"pattern": "{extra}/escape/*"},
			want: Errorf(`glob: path "{extra}/escape" is outside the workspace {extra} (through a symbolic link)`)},
		{name: "grep in extra", tool: grepTool{}, args: map[string]any{"pattern": "beta", "path": "{extra}", "output_mode": "content"},
			want: OK("{extra}/lib/a.txt:2:beta\n")},
		{name: "grep one file in extra", tool: grepTool{}, args: map[string]any{"pattern": "alpha", "path": "{extra}/lib/a.txt"},
			want: OK("{extra}/lib/a.txt\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, extra, out := newAddDirEnv(t)
			ws := env.Workspace.Dir()
			args := map[string]any{}
			for k, v := range tt.args {
				if s, ok := v.(string); ok {
					v = strings.NewReplacer("{extra}", extra, "{out}", out, "{ws}", ws).Replace(s)
				}
				args[k] = v
			}
			got := call(t, tt.tool, env, args)
			got.Content = strings.NewReplacer(extra, "{extra}", out, "{out}", ws, "{ws}").Replace(got.Content)
			if diff := cmp.Diff(tt.want, got, noResponse); diff != "" {
				t.Errorf("%s(%v) (-want +got):\n%s", tt.tool.Spec().Name, tt.args, diff)
			}
			b, err := os.ReadFile(filepath.Join(extra, "new.txt"))
			if err != nil && tt.after != "" {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.after, string(b)); diff != "" {
				t.Errorf("extra/new.txt afterwards (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]string{filepath.Join(out, "etc"): "/", filepath.Join(out, "etc", "passwd"): "secret\n", out: "/"}, snapshot(t, out)); diff != "" {
				t.Errorf("outside directory changed (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAddDirHidden checks that a search in an additional directory asks
// about the absolute paths it would list, so that deny rules on them hold.
func TestAddDirHidden(t *testing.T) {
	env, extra, _ := newAddDirEnv(t)
	var asked []string
	env.Hidden = func(tool, p string) bool {
		asked = append(asked, p)
		return p == filepath.Join(extra, "lib")
	}
	got := call(t, globTool{}, env, map[string]any{"pattern": "**/*.txt", "path": extra})
	if diff := cmp.Diff(OK("No files match \"**/*.txt\". (1 path left out: a permission rule denies reading them)"), got, noResponse); diff != "" {
		t.Errorf("glob (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{filepath.Join(extra, "escape"), filepath.Join(extra, "lib")}, asked); diff != "" {
		t.Errorf("paths asked about (-want +got):\n%s", diff)
	}
}

func TestAddDir(t *testing.T) {
	env, extra, _ := newAddDirEnv(t)
	ws := env.Workspace
	for _, d := range []string{extra, filepath.Join(extra, "lib"), filepath.Join(ws.Dir(), "sub")} {
		os.MkdirAll(d, 0o755)
		if err := ws.AddDir(d); err != nil {
			t.Fatalf("AddDir(%s): %v", d, err)
		}
	}
	if diff := cmp.Diff([]string{extra}, ws.Dirs()); diff != "" {
		t.Errorf("Dirs after adding a dir already reached (-want +got):\n%s", diff)
	}
	for _, bad := range []string{filepath.Join(extra, "lib", "a.txt"), filepath.Join(extra, "missing")} {
		if err := ws.AddDir(bad); err == nil {
			t.Errorf("AddDir(%s) = nil, want an error", bad)
		}
	}
	p, err := ws.Locate(filepath.Join(extra, "lib", "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{filepath.Join("lib", "a.txt"), true, filepath.Join(extra, "lib", "a.txt")}, []any{p.Rel, p.Extra, p.Abs()}); diff != "" {
		t.Errorf("Locate (-want +got):\n%s", diff)
	}
	if _, err := ws.Resolve(filepath.Join(extra, "lib", "a.txt")); err == nil {
		t.Errorf("Resolve reached an additional directory; it must stay with the workspace")
	}
}
