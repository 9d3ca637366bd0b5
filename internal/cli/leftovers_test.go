//go:build linux

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/shell"
)

// startTime reads a process's start time (field 22 of /proc/<pid>/stat).
func startTime(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	n, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestResumeKillsLeftovers: troupe resume kills the command groups a dead
// troupe recorded under the state directory, before anything else.
func TestResumeKillsLeftovers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	t.Cleanup(func() { shell.SetRecordDir("") })
	left := exec.Command("bash", "-c", "sleep 1000 & sleep 1000")
	left.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := left.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := left.Process.Pid
	t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(map[string]any{"pid": dead.Process.Pid, "start": 1,
		"groups": []map[string]any{{"pgid": pgid, "start": startTime(t, pgid), "command": "sleep"}}})
	pids := filepath.Join(dir, ".troupe", "pids")
	if err := os.MkdirAll(pids, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pids, strconv.Itoa(dead.Process.Pid)+".json"), rec, 0o644); err != nil {
		t.Fatal(err)
	}

	var stdout, stderr bytes.Buffer
	Main(context.Background(), []string{"resume", "no-such-team", "--workspace", dir}, strings.NewReader(""), &stdout, &stderr)
	if !strings.Contains(stderr.String(), "killed 1 command(s) a previous run left running") {
		t.Errorf("stderr: %s", stderr.String())
	}
	left.Wait() // the leader was killed
	deadline := time.Now().Add(5 * time.Second)
	for shell.GroupAlive(pgid) {
		if time.Now().After(deadline) {
			t.Fatal("the leftover group is still alive")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
