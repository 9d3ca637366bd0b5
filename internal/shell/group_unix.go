//go:build unix

package shell

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

const (
	sigTerm = syscall.SIGTERM
	sigKill = syscall.SIGKILL
)

func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

func signalGroup(pgid int, sig syscall.Signal) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, sig)
	}
}

// GroupAlive reports whether any process of the group pgid is still
// running. Zombies do not count: they run nothing and, once reparented to
// an init that does not reap, may never disappear.
func GroupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); err == syscall.ESRCH {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true // no /proc: kill(2) said someone is there
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, state, ok := procGroup(pid); ok && g == pgid && state != 'Z' && state != 'X' {
			return true
		}
	}
	return false
}

// PidAlive reports whether the process pid exists and is not a zombie.
func PidAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
		return false
	}
	if _, state, ok := procGroup(pid); ok {
		return state != 'Z' && state != 'X'
	}
	_, err := os.Stat("/proc")
	return err != nil // without /proc, trust kill(2)
}

// procGroup reads the process group and state of pid from /proc.
func procGroup(pid int) (pgid int, state byte, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// The command name may hold spaces and parentheses: fields start
	// after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, false
	}
	g, err := strconv.Atoi(string(f[2]))
	if err != nil {
		return 0, 0, false
	}
	return g, f[0][0], true
}

func waitGroupGone(pgid int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for GroupAlive(pgid) && time.Now().Before(deadline) {
		signalGroup(pgid, sigKill)
		time.Sleep(5 * time.Millisecond)
	}
}
