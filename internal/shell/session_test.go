package shell

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSession runs one session through commands that each need something
// of it, in order: later steps check the session survived earlier ones.
func TestSession(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := NewSession(dir, []string{"PATH=" + os.Getenv("PATH"), "TROUPE_X=y"})
	defer s.Close()
	steps := []struct {
		name string
		opts Options
		want Result
	}{
		{"echo", Options{Command: "echo hi"}, Result{Output: "hi\n"}},
		{"long", Options{Command: "echo a long command; echo " + strings.Repeat("x", 5000) + " >/dev/null"}, Result{Output: "a long command\n"}},
		{"shorter after longer", Options{Command: "echo s"}, Result{Output: "s\n"}},
		{"env given", Options{Command: "echo $TROUPE_X"}, Result{Output: "y\n"}},
		{"no trailing newline", Options{Command: "printf abc"}, Result{Output: "abc"}},
		{"stderr interleaved", Options{Command: "echo a; echo b >&2; echo c"}, Result{Output: "a\nb\nc\n"}},
		{"status", Options{Command: "echo out; false"}, Result{Output: "out\n", ExitCode: 1}},
		{"cd", Options{Command: "cd sub && X=kept"}, Result{}},
		{"cwd and variables kept", Options{Command: "pwd; echo $X"}, Result{Output: dir + "/sub\nkept\n"}},
		{"stdin is empty", Options{Command: "read line; echo read $?"}, Result{Output: "read 1\n"}},
		{"cat of stdin ends", Options{Command: "cat; echo after"}, Result{Output: "after\n"}},
		{"exit", Options{Command: "echo bye; exit 3"}, Result{Output: "bye\n", ExitCode: 3}},
		{"cwd kept across a restart", Options{Command: "pwd; echo ${X-gone}"}, Result{Output: dir + "/sub\ngone\n"}},
		{"exec", Options{Command: "exec echo replaced"}, Result{Output: "replaced\n"}},
		{"output redirected for good", Options{Command: "exec >/dev/null 2>&1; echo hidden"}, Result{}},
		{"output back", Options{Command: "echo visible"}, Result{Output: "visible\n"}},
		{"kill itself", Options{Command: "kill -9 $$"}, Result{ExitCode: -1}},
		{"after a kill", Options{Command: "echo alive"}, Result{Output: "alive\n"}},
		{"marker-like output", Options{Command: `printf '\n\036troupe-0 0\n'`}, Result{Output: "\n\x1etroupe-0 0\n"}},
		{"syntax error", Options{Command: "if then"}, Result{ExitCode: 2}},
		{"timeout", Options{Command: "echo started; sleep 30", Timeout: 300 * time.Millisecond, Grace: 100 * time.Millisecond}, Result{Output: "started\n", TimedOut: true, ExitCode: -1}},
		{"after a timeout", Options{Command: "pwd"}, Result{Output: dir + "/sub\n"}},
		{"capped", Options{Command: "seq 1 100000", OutputCap: 100}, Result{Truncated: true}},
		{"cwd removed", Options{Command: "cd .. && rmdir sub && exit"}, Result{}},
		{"back home", Options{Command: "pwd"}, Result{Output: dir + "\n"}},
	}
	for _, st := range steps {
		got, err := s.Run(context.Background(), st.opts)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got.Duration = 0
		if st.name == "syntax error" {
			got.Output = ""
		}
		if st.want.Truncated {
			if !got.Truncated || len(got.Output) > 400 {
				t.Errorf("%s: truncated %v, %d bytes", st.name, got.Truncated, len(got.Output))
			}
			continue
		}
		if diff := cmp.Diff(st.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", st.name, diff)
		}
	}
}

func TestSessionCancel(t *testing.T) {
	s := NewSession(t.TempDir(), nil)
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	// Cancelled already: the command starts, and nothing it writes can
	// come before the end of a 30 s sleep.
	cancel()
	got, err := s.Run(ctx, Options{Command: "sleep 30", Grace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Canceled || got.ExitCode != -1 {
		t.Errorf("result %+v, want cancelled", got)
	}
	if got, _ := s.Run(context.Background(), Options{Command: "echo ok"}); got.Output != "ok\n" {
		t.Errorf("after cancel: %+v", got)
	}
}

// TestSessionScrubbedEnv: a session started with no environment gets this
// process's, without the provider keys, as Run's commands do.
func TestSessionScrubbedEnv(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
	t.Setenv("OPENAI_API_KEY", "sk-secret")
	t.Setenv("TROUPE_SESSION_VISIBLE", "no")
	t.Setenv("PLAIN_VAR", "yes")
	s := NewSession(t.TempDir(), nil)
	defer s.Close()
	got, err := s.Run(context.Background(), Options{Command: "env"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got.Output, "secret") || strings.Contains(got.Output, "TROUPE_SESSION_VISIBLE") {
		t.Errorf("the session sees a scrubbed variable:\n%s", got.Output)
	}
	if !strings.Contains(got.Output, "PLAIN_VAR=yes") {
		t.Errorf("the session lost the environment:\n%s", got.Output)
	}
}

func TestSessionClosed(t *testing.T) {
	s := NewSession(t.TempDir(), nil)
	if _, err := s.Run(context.Background(), Options{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(context.Background(), Options{Command: "true"}); err == nil {
		t.Error("a closed session ran a command")
	}
}
