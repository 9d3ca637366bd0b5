package tool

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/shell"
)

// withSession gives env a shell session, closed at the end of the test.
func withSession(t *testing.T, env *Env) *Env {
	t.Helper()
	env.Shell = shell.NewSession(env.Workspace.Dir(), env.ShellEnv)
	t.Cleanup(func() { env.Shell.Close() })
	return env
}

// TestBashSessionAnswersAsRun: the answers of TestBash's table are the
// same with a session.
func TestBashSessionAnswersAsRun(t *testing.T) {
	env := withSession(t, newTestEnv(t))
	for _, cmdline := range []string{"echo hi; echo err >&2", "pwd", "true", "echo failing; exit 3", "exit 4", "printf x"} {
		input := map[string]any{"command": cmdline}
		plain := call(t, bashTool{}, newTestEnv(t), input)
		got := call(t, bashTool{}, env, input)
		if cmdline == "pwd" {
			want := env.Workspace.Dir() + "\n"
			if got.Content != want {
				t.Errorf("pwd in the session = %q, want %q", got.Content, want)
			}
			continue
		}
		if diff := cmp.Diff(plain, got, noResponse); diff != "" {
			t.Errorf("%q (-run +session):\n%s", cmdline, diff)
		}
	}
}

// TestBashSessionKeepsDirectory: cd in one call holds for the next, as in
// Claude Code.
func TestBashSessionKeepsDirectory(t *testing.T) {
	env := withSession(t, newTestEnv(t))
	call(t, bashTool{}, env, map[string]any{"command": "mkdir -p a/b && cd a/b"})
	got := call(t, bashTool{}, env, map[string]any{"command": "pwd"})
	if want := env.Workspace.Dir() + "/a/b\n"; got.Content != want {
		t.Errorf("pwd = %q, want %q", got.Content, want)
	}
}

// TestBashSessionTimeoutKillsGroup: a timed-out command takes its
// children with it, and the next call runs.
func TestBashSessionTimeoutKillsGroup(t *testing.T) {
	env := withSession(t, newTestEnv(t))
	got := call(t, bashTool{}, env, map[string]any{"command": "echo $$; sleep 1000 & echo $!; sleep 1000", "timeout": 1})
	if !got.IsError || !strings.Contains(got.Content, "command timed out after 1s") {
		t.Fatalf("got %+v", got)
	}
	pids := pidsIn(got.Content)
	if len(pids) < 2 {
		t.Fatalf("want the shell's and the child's pids in %q", got.Content)
	}
	if shell.GroupAlive(pids[0]) {
		t.Errorf("process group %d alive after the call returned", pids[0])
	}
	waitGone(t, pids)
	if got := call(t, bashTool{}, env, map[string]any{"command": "echo again"}); got.Content != "again\n" {
		t.Errorf("after the timeout: %+v", got)
	}
}

// TestBashSessionHidesKeys: the session's bash gets the environment
// today's bash gets, without the provider keys.
func TestBashSessionHidesKeys(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-tool-test-0001")
	t.Setenv("OPENAI_API_KEY", "sk-openai-tool-test-0002")
	t.Setenv("TROUPE_HOME", "/state-0003")
	const cmd = `env; cat /proc/$$/environ | tr '\0' '\n'`
	for _, extra := range []map[string]string{nil, {"FROM_SETTINGS": "on"}} {
		env := newTestEnv(t)
		if extra != nil {
			env.ShellEnv = shell.Environ(os.Environ(), extra)
		}
		withSession(t, env)
		got := call(t, bashTool{}, env, map[string]any{"command": cmd})
		for _, leak := range []string{"0001", "0002", "0003", "TROUPE_"} {
			if strings.Contains(got.Content, leak) {
				t.Errorf("session output holds %q:\n%s", leak, got.Content)
			}
		}
		if extra != nil && strings.Count(got.Content, "FROM_SETTINGS=on") != 2 {
			t.Errorf("the settings' variable is missing:\n%s", got.Content)
		}
	}
}

// TestBashSessionConcurrent: two calls at once both run, whichever gets
// the session: the first blocks reading a fifo the second writes.
func TestBashSessionConcurrent(t *testing.T) {
	env := withSession(t, newTestEnv(t))
	fifo := env.Workspace.Dir() + "/fifo"
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan Result, 1)
	go func() {
		done <- bashTool{}.Run(t.Context(), env, []byte(`{"command":"cat fifo"}`))
	}()
	got := call(t, bashTool{}, env, map[string]any{"command": "echo through > fifo; echo wrote"})
	if got.Content != "wrote\n" {
		t.Errorf("writer: %+v", got)
	}
	if got := <-done; got.Content != "through\n" {
		t.Errorf("reader: %+v", got)
	}
}

// BenchmarkBashSession is one short bash call through the tool in a
// session: shell.BenchmarkSession plus what the tool adds.
func BenchmarkBashSession(b *testing.B) {
	env := newTestEnv(b)
	env.Shell = shell.NewSession(env.Workspace.Dir(), env.ShellEnv)
	defer env.Shell.Close()
	input := []byte(`{"command":"echo hi"}`)
	for b.Loop() {
		if r := (bashTool{}).Run(context.Background(), env, input); r.IsError || r.Content != "hi\n" {
			b.Fatalf("%+v", r)
		}
	}
}
