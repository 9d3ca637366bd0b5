package cli

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"
)

// TestDemoInterrupted: a demo stopped by SIGINT or SIGTERM exits 130 and
// says how to resume its team; a temporary workspace is kept (the team lives
// there) and named.
func TestDemoInterrupted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		sig       syscall.Signal
		workspace bool
		want      []string
	}{
		{"sigint-workspace", syscall.SIGINT, true, []string{`interrupted; continue with: troupe resume graphql-migration\n`}},
		{"sigterm-temp", syscall.SIGTERM, false, []string{
			`interrupted; continue with: troupe resume graphql-migration --workspace .*troupe-demo-`,
			`the workspace is kept in .*troupe-demo-`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tmp := t.TempDir()
			args := []string{"demo", "--headless", "--model-latency", "200ms"}
			if tc.workspace {
				args = append(args, "--workspace", filepath.Join(tmp, "ws"))
			}
			cmd := troupeCmd(t, args...)
			cmd.Env = append(cmd.Env, "TMPDIR="+tmp)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if !waitGlob(filepath.Join(tmp, "*", ".troupe", "teams", "graphql-migration", "events.jsonl"), `"type":"spawn"`, 60*time.Second) {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("the demo never spawned a teammate:\n%s%s", stdout.String(), stderr.String())
			}
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != ExitInterrupted {
				t.Fatalf("exit: %v, want code %d\n%s", err, ExitInterrupted, stderr.String())
			}
			for _, w := range tc.want {
				if !regexp.MustCompile(w).MatchString(stderr.String()) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
			if left, _ := filepath.Glob(filepath.Join(tmp, "troupe-demo-*", ".troupe")); !tc.workspace && len(left) == 0 {
				t.Errorf("the interrupted demo's temporary workspace was removed")
			}
		})
	}
}

// TestDemoRemovesTempWorkspace: a demo that finished leaves no
// troupe-demo-* folder behind.
func TestDemoRemovesTempWorkspace(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	cmd := troupeCmd(t, "demo", "--headless")
	cmd.Env = append(cmd.Env, "TMPDIR="+tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "troupe-demo-*")); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// waitGlob reports whether a file matching pattern comes to match re within
// the time given.
func waitGlob(pattern, re string, within time.Duration) bool {
	rx := regexp.MustCompile(re)
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		paths, _ := filepath.Glob(pattern)
		for _, p := range paths {
			if data, err := os.ReadFile(p); err == nil && rx.Match(data) {
				return true
			}
		}
	}
	return false
}
