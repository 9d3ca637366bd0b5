package tool

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newTestEnv returns an Env over a fresh workspace with background jobs.
func newTestEnv(t testing.TB) *Env {
	env, _ := newSandbox(t)
	return env
}

// newSandbox makes a workspace and, beside it, a directory "out" that no
// tool may touch, holding out/etc/passwd = "secret". It returns the Env
// and the outside directory.
func newSandbox(t testing.TB) (*Env, string) {
	t.Helper()
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wsDir := filepath.Join(tmp, "ws")
	out := filepath.Join(tmp, "out")
	for _, d := range []string{wsDir, filepath.Join(out, "etc")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(out, "etc", "passwd"), []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := OpenWorkspace(wsDir)
	if err != nil {
		t.Fatal(err)
	}
	jobs := NewJobs()
	t.Cleanup(func() {
		jobs.StopAll()
		ws.Close()
	})
	return &Env{Workspace: ws, Agent: "tester", Jobs: jobs}, out
}

// writeFiles creates files under dir; names are slash-separated.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// call runs tool tl with args marshalled to JSON.
func call(t testing.TB, tl Tool, env *Env, args any) Result {
	t.Helper()
	in, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return tl.Run(t.Context(), env, in)
}

// snapshot maps every path under dir to its content ("->target" for a
// link, "/" for a directory), to show that nothing changed there.
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			m[p] = "error: " + err.Error()
			return nil
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			m[p] = "->" + target
		case d.IsDir():
			m[p] = "/"
		default:
			b, _ := os.ReadFile(p)
			m[p] = string(b)
		}
		return nil
	})
	return m
}
