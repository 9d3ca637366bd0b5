package tool

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/shell"
)

func TestBash(t *testing.T) {
	tests := []struct {
		name string
		args map[string]any
		want Result
	}{
		{"output", map[string]any{"command": "echo hi; echo err >&2"}, OK("hi\nerr\n")},
		{"runs in the workspace", map[string]any{"command": "pwd"}, OK("{ws}\n")},
		{"no output", map[string]any{"command": "true"}, OK("(no output)")},
		{"exit code", map[string]any{"command": "echo failing; exit 3"}, Errorf("failing\n\nexit code 3")},
		{"exit code without output", map[string]any{"command": "exit 4"}, Errorf("exit code 4")},
		{"timeout too large", map[string]any{"command": "true", "timeout": 601}, Errorf(`invalid arguments for bash: "timeout" must be between 1 and 600 seconds, got 601`)},
		{"timeout zero", map[string]any{"command": "true", "timeout": 0}, Errorf(`invalid arguments for bash: "timeout" must be between 1 and 600 seconds, got 0`)},
		{"timeout as string", map[string]any{"command": "true", "timeout": "10"}, Errorf(`invalid arguments for bash: "timeout" must be an integer, got string`)},
		{"no command", map[string]any{}, Errorf(`invalid arguments for bash: "command" is required`)},
		{"blank command", map[string]any{"command": "  "}, Errorf(`invalid arguments for bash: "command" is empty`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnv(t)
			got := call(t, bashTool{}, env, tt.args)
			got.Content = strings.ReplaceAll(got.Content, env.Workspace.Dir(), "{ws}")
			if diff := cmp.Diff(tt.want, got, noResponse); diff != "" {
				t.Errorf("bash(%v) (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

func TestBashOutputCap(t *testing.T) {
	env := newTestEnv(t)
	got := call(t, bashTool{}, env, map[string]any{"command": "head -c 200000 /dev/zero | tr '\\0' a; echo; echo last"})
	if got.IsError || !strings.HasPrefix(got.Content, "aaaa") || !strings.HasSuffix(got.Content, "a\nlast\n") ||
		!strings.Contains(got.Content, "[... 150006 bytes of output cut ...]") || len(got.Content) > OutputCap+100 {
		t.Errorf("len %d, head %q, tail %q", len(got.Content), got.Content[:20], got.Content[len(got.Content)-80:])
	}
}

// pidsIn returns the integers found in s.
func pidsIn(s string) []int {
	var pids []int
	for _, f := range strings.Fields(s) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

// waitGone polls, with a deadline, until none of pids is alive.
func waitGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, p := range pids {
		for shell.PidAlive(p) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d still alive", p)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func TestBashTimeoutKillsGroup(t *testing.T) {
	env := newTestEnv(t)
	got := call(t, bashTool{}, env, map[string]any{"command": "echo $$; sleep 1000 & echo $!; sleep 1000", "timeout": 1})
	if !got.IsError || !strings.Contains(got.Content, "command timed out after 1s; it and every process it started were killed") {
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
}

func TestBashCancel(t *testing.T) {
	env := newTestEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan Result, 1)
	go func() {
		done <- bashTool{}.Run(ctx, env, []byte(`{"command":"echo $$ > pid; sleep 1000 & sleep 1000"}`))
	}()
	pidFile := filepath.Join(env.Workspace.Dir(), "pid")
	var pgid int
	deadline := time.Now().Add(5 * time.Second)
	for pgid == 0 {
		if b, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(b), "\n") {
			pgid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		} else if time.Now().After(deadline) {
			t.Fatal("command did not start")
		} else {
			time.Sleep(5 * time.Millisecond)
		}
	}
	cancel()
	got := <-done
	if diff := cmp.Diff(Errorf("command was cancelled; it and every process it started were killed"), got, noResponse); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if shell.GroupAlive(pgid) {
		t.Errorf("group %d alive after cancel", pgid)
	}
}

func TestBashBackground(t *testing.T) {
	env := newTestEnv(t)
	got := call(t, bashTool{}, env, map[string]any{"command": "echo $$; sleep 1000 & echo $!; echo ready; sleep 1000", "run_in_background": true, "description": "sleepers"})
	want := OK("Started background job bg_1: sleepers\nRead its output with TaskOutput (task_id \"bg_1\"); stop it with TaskStop.")
	if diff := cmp.Diff(want, got, noResponse); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	// Poll without blocking until the job says it is ready.
	var out Result
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.Content, "ready") {
		if time.Now().After(deadline) {
			t.Fatalf("no ready in %q", out.Content)
		}
		out = call(t, taskOutputTool{}, env, map[string]any{"task_id": "bg_1", "block": false})
	}
	if out.IsError || !strings.HasPrefix(out.Content, "bg_1 [bash] sleepers: running\n<output>\n") {
		t.Errorf("TaskOutput: %+v", out)
	}
	pids := pidsIn(out.Content)

	stop := call(t, taskStopTool{}, env, map[string]any{"task_id": "bg_1"})
	if stop.IsError || !strings.HasPrefix(stop.Content, "Stopped bg_1.\nbg_1 [bash] sleepers: stopped") {
		t.Errorf("TaskStop: %+v", stop)
	}
	if shell.GroupAlive(pids[0]) {
		t.Errorf("group %d alive after TaskStop returned", pids[0])
	}
	waitGone(t, pids)

	again := call(t, taskStopTool{}, env, map[string]any{"task_id": "bg_1"})
	if again.IsError || !strings.HasPrefix(again.Content, "bg_1 had already ended; nothing to stop.") {
		t.Errorf("second TaskStop: %+v", again)
	}
	if fin := env.Jobs.TakeFinished(); len(fin) != 0 {
		t.Errorf("TakeFinished after the model read the stop: %+v", fin)
	}
}

func TestBashBackgroundCompletes(t *testing.T) {
	env := newTestEnv(t)
	call(t, bashTool{}, env, map[string]any{"command": "echo done; exit 2", "run_in_background": true})
	got := call(t, taskOutputTool{}, env, map[string]any{"task_id": "bg_1"})
	want := OK("bg_1 [bash] echo done; exit 2: failed, exit code 2\n<output>\ndone\n</output>")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestBashBackgroundWithoutJobs(t *testing.T) {
	env := newTestEnv(t)
	env.Jobs = nil
	got := call(t, bashTool{}, env, map[string]any{"command": "true", "run_in_background": true})
	if diff := cmp.Diff(Errorf("run_in_background is not available to this agent; run the command in the foreground"), got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestTaskTools(t *testing.T) {
	env := newTestEnv(t)
	tests := []struct {
		name string
		tool Tool
		args map[string]any
		want Result
	}{
		{"output unknown", taskOutputTool{}, map[string]any{"task_id": "bg_9"}, Errorf(`TaskOutput: no such background job "bg_9": there are no background jobs`)},
		{"stop unknown", taskStopTool{}, map[string]any{"task_id": "bg_9"}, Errorf(`TaskStop: no such background job "bg_9": there are no background jobs`)},
		{"timeout too large", taskOutputTool{}, map[string]any{"task_id": "bg_1", "timeout": 601}, Errorf(`invalid arguments for TaskOutput: "timeout" must be between 0 and 600 seconds, got 601`)},
		{"no id", taskStopTool{}, map[string]any{}, Errorf(`invalid arguments for TaskStop: "task_id" is required`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, call(t, tt.tool, env, tt.args)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestBashHidesKeys: env and /proc/self/environ show no provider key in
// the foreground or in the background; the settings' env is there.
func TestBashHidesKeys(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-tool-test-0001")
	t.Setenv("OPENAI_API_KEY", "sk-openai-tool-test-0002")
	t.Setenv("TROUPE_HOME", "/state-0003")
	const cmd = `env; cat /proc/self/environ | tr '\0' '\n'`
	for _, extra := range []map[string]string{nil, {"FROM_SETTINGS": "on"}} {
		env := newTestEnv(t)
		if extra != nil {
			env.ShellEnv = shell.Environ(os.Environ(), extra)
		}
		fg := call(t, bashTool{}, env, map[string]any{"command": cmd})
		bg := call(t, bashTool{}, env, map[string]any{"command": cmd, "run_in_background": true})
		st, err := env.Jobs.Output(t.Context(), "bg_1", true, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for name, out := range map[string]string{"foreground": fg.Content, "background": st.Output, "start": bg.Content} {
			for _, leak := range []string{"0001", "0002", "0003", "TROUPE_"} {
				if strings.Contains(out, leak) {
					t.Errorf("%s output holds %q:\n%s", name, leak, out)
				}
			}
		}
		if extra != nil && strings.Count(fg.Content, "FROM_SETTINGS=on") != 2 {
			t.Errorf("the settings' variable is missing:\n%s", fg.Content)
		}
	}
}

// TestBashSandbox: with a sandbox, bash writes the workspace but not
// .troupe nor anything outside.
func TestBashSandbox(t *testing.T) {
	env := newTestEnv(t)
	ws := env.Workspace.Dir()
	// Outside /tmp, which the sandbox replaces by a private one.
	out, err := os.MkdirTemp("/var/tmp", "troupe-bash-sandbox-")
	if err != nil {
		t.Skipf("no /var/tmp for a directory outside the private /tmp: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(out) })
	writeFiles(t, out, map[string]string{"etc/passwd": "secret\n"})
	if err := os.MkdirAll(filepath.Join(ws, ".troupe"), 0o755); err != nil {
		t.Fatal(err)
	}
	env.Sandbox = &shell.Sandbox{Protected: shell.ProtectedPaths(ws)}
	if err := shell.CheckSandbox(t.Context(), env.Sandbox); err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
	got := call(t, bashTool{}, env, map[string]any{"command": "echo ok > f && cat f"})
	if got.IsError || got.Content != "ok\n" {
		t.Errorf("write in the workspace: got %+v, want ok", got)
	}
	for _, cmd := range []string{"echo x > .troupe/evil", "echo x > " + out + "/etc/passwd"} {
		if got := call(t, bashTool{}, env, map[string]any{"command": cmd}); !got.IsError || !strings.Contains(got.Content, "Read-only file system") {
			t.Errorf("%s: got %+v, want a refusal", cmd, got)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(out, "etc", "passwd")); string(b) != "secret\n" {
		t.Errorf("outside file changed: %q", b)
	}
	env.Sandbox = &shell.Sandbox{Bwrap: "no-such-bwrap"}
	if got := call(t, bashTool{}, env, map[string]any{"command": "true", "run_in_background": true}); !got.IsError || !strings.Contains(got.Content, "bubblewrap is not installed") {
		t.Errorf("missing bwrap: got %+v", got)
	}
}
