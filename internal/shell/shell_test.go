package shell

import (
	"context"
	"fmt"
	"github.com/troupe-dev/troupe/internal/racetest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	racetest.QuickExit()
	if os.Getenv(helperEnv) != "" {
		runHelper()
		return
	}
	goleak.VerifyTestMain(m)
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	dir, _ = filepath.EvalSymlinks(dir)
	tests := []struct {
		name string
		opts Options
		want Result
	}{
		{"success", Options{Command: "echo hi"}, Result{Output: "hi\n"}},
		{"exit code", Options{Command: "echo out; exit 3"}, Result{Output: "out\n", ExitCode: 3}},
		{"stderr interleaved", Options{Command: "echo a; echo b >&2; echo c"}, Result{Output: "a\nb\nc\n"}},
		{"signal", Options{Command: "kill -9 $$"}, Result{ExitCode: -1}},
		{"dir", Options{Command: "pwd", Dir: dir}, Result{Output: dir + "\n"}},
		{"env", Options{Command: "echo $TROUPE_X", Env: []string{"TROUPE_X=y"}}, Result{Output: "y\n"}},
		{"no output", Options{Command: "true"}, Result{}},
		{"syntax error", Options{Command: "if then"}, Result{Output: "bash: -c: line 1: syntax error near unexpected token `then'\nbash: -c: line 1: `if then'\n", ExitCode: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Run(t.Context(), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			got.Duration = 0
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Run(%q) (-want +got):\n%s", tt.opts.Command, diff)
			}
		})
	}
}

func TestRunOutputCap(t *testing.T) {
	got, err := Run(t.Context(), Options{Command: "seq 1 100000", OutputCap: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Truncated {
		t.Error("Truncated = false, want true")
	}
	if !strings.HasPrefix(got.Output, "1\n2\n3\n") || !strings.HasSuffix(got.Output, "99999\n100000\n") {
		t.Errorf("output does not keep head and tail:\n%s", got.Output)
	}
	total := len(strings.Join(seq(1, 100000), ""))
	if want := fmt.Sprintf("[... %d bytes of output cut ...]", total-1000); !strings.Contains(got.Output, want) {
		t.Errorf("output lacks %q", want)
	}
	if len(got.Output) > 1100 {
		t.Errorf("len(output) = %d, want about 1000", len(got.Output))
	}
}

func seq(a, b int) []string {
	var out []string
	for i := a; i <= b; i++ {
		out = append(out, strconv.Itoa(i)+"\n")
	}
	return out
}

// treeCommand starts a process tree that ignores nothing and would run for
// a long time: two background sleeps (one a grandchild through sh) and a
// foreground one, all holding the output pipe. It prints the pids.
const treeCommand = `sleep 1000 & echo $!; sh -c 'sleep 1000' & echo $!; echo ready; sleep 1000`

func pidsOf(t *testing.T, out string) []int {
	t.Helper()
	var pids []int
	for _, f := range strings.Fields(out) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	if len(pids) != 2 {
		t.Fatalf("want 2 pids in output, got %q", out)
	}
	return pids
}

// assertGone polls, with a deadline, until none of pids nor the group is
// alive.
func assertGone(t *testing.T, pgid int, pids []int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		alive := pgid > 0 && GroupAlive(pgid)
		for _, p := range pids {
			alive = alive || PidAlive(p)
		}
		if !alive {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v (group %d) still alive", pids, pgid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRunTimeoutKillsGroup(t *testing.T) {
	start := time.Now()
	p, err := Start(t.Context(), Options{Command: treeCommand, Timeout: 300 * time.Millisecond, Grace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	got := p.Wait()
	if !got.TimedOut || got.ExitCode != -1 {
		t.Errorf("TimedOut, ExitCode = %v, %d; want true, -1", got.TimedOut, got.ExitCode)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Run took %v after a 300ms timeout", d)
	}
	// The group must already be gone when Wait returns: no polling here.
	if GroupAlive(p.Pid()) {
		t.Errorf("group %d alive after Wait", p.Pid())
	}
	assertGone(t, p.Pid(), pidsOf(t, got.Output))
}

// TestRunTermIgnored checks the SIGKILL that follows the grace period.
func TestRunTermIgnored(t *testing.T) {
	got, err := Run(t.Context(), Options{Command: `trap '' TERM; echo ready; while :; do sleep 0.05; done`, Timeout: 200 * time.Millisecond, Grace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !got.TimedOut || got.Output != "ready\n" {
		t.Errorf("got %+v", got)
	}
}

// signalWriter closes ready when the output contains "ready".
type signalWriter struct {
	mu    sync.Mutex
	b     strings.Builder
	ready chan struct{}
	once  sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Contains(w.b.String(), "ready") {
		w.once.Do(func() { close(w.ready) })
	}
	return len(p), nil
}

func TestCancelKillsGroup(t *testing.T) {
	for _, how := range []string{"context", "stop"} {
		t.Run(how, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			w := &signalWriter{ready: make(chan struct{})}
			p, err := Start(ctx, Options{Command: treeCommand, Stream: w, Grace: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			<-w.ready
			var got Result
			if how == "context" {
				cancel()
				got = p.Wait()
			} else {
				got = p.Stop()
			}
			if !got.Canceled || got.TimedOut {
				t.Errorf("Canceled, TimedOut = %v, %v; want true, false", got.Canceled, got.TimedOut)
			}
			if GroupAlive(p.Pid()) {
				t.Errorf("group %d alive after Wait", p.Pid())
			}
			assertGone(t, p.Pid(), pidsOf(t, got.Output))
		})
	}
}

// TestOrphanHoldingPipe: a finished command whose background child keeps
// the pipe open must not hang, and the child goes with the group.
func TestOrphanHoldingPipe(t *testing.T) {
	got, err := Run(t.Context(), Options{Command: `sleep 1000 & echo $!; sh -c 'sleep 1000' & echo $!; echo done`})
	if err != nil {
		t.Fatal(err)
	}
	if got.ExitCode != 0 || !strings.HasSuffix(got.Output, "done\n") {
		t.Errorf("got %+v", got)
	}
	assertGone(t, 0, pidsOf(t, got.Output))
}

// TestEscapedHolderDoesNotHang: a process that left the group (setsid)
// keeps the pipe open; Run still returns after the drain bound.
func TestEscapedHolderDoesNotHang(t *testing.T) {
	if _, err := os.Stat("/usr/bin/setsid"); err != nil {
		t.Skip("no setsid")
	}
	// The loop waits until the escaped process runs, so that the group
	// kill cannot take it before it left.
	got, err := Run(t.Context(), Options{Dir: t.TempDir(), Command: `setsid sh -c 'echo $$ > pid; exec sleep 1000' & while [ ! -s pid ]; do sleep 0.01; done; cat pid; echo x`})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(got.Output) {
		if pid, err := strconv.Atoi(f); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if !strings.HasSuffix(got.Output, "x\n") {
		t.Errorf("output %q", got.Output)
	}
}

func TestStartError(t *testing.T) {
	_, err := Run(t.Context(), Options{Command: "true", Dir: filepath.Join(t.TempDir(), "missing")})
	if err == nil {
		t.Fatal("Run in a missing dir: want error")
	}
}

func TestBuffer(t *testing.T) {
	tests := []struct {
		name   string
		limit  int
		writes []string
		want   string
	}{
		{"unlimited", 0, []string{"abc", "def"}, "abcdef"},
		{"fits", 10, []string{"abc", "defg"}, "abcdefg"},
		{"exact", 4, []string{"ab", "cd"}, "abcd"},
		{"head and tail", 4, []string{"abcdefgh"}, "ab\n\n[... 4 bytes of output cut ...]\n\ngh"},
		{"many small", 4, []string{"a", "b", "c", "d", "e", "f", "g"}, "ab\n\n[... 3 bytes of output cut ...]\n\nfg"},
		{"ring wraps", 6, []string{"abc", "de", "fgh", "ij"}, "abc\n\n[... 4 bytes of output cut ...]\n\nhij"},
		{"rune edges", 6, []string{"aaé", "xyz", "ü12"}, "aa\n\n[... 7 bytes of output cut ...]\n\n12"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBuffer(tt.limit)
			for _, w := range tt.writes {
				b.Write([]byte(w))
			}
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
