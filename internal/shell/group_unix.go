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
	cmd.SysProcAttr = sysProcAttr()
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
		if st, ok := readStat(pid); ok && st.pgid == pgid && st.state != 'Z' && st.state != 'X' {
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
	if st, ok := readStat(pid); ok {
		return st.state != 'Z' && st.state != 'X'
	}
	_, err := os.Stat("/proc")
	return err != nil // without /proc, trust kill(2)
}

// procStat is what troupe reads of /proc/<pid>/stat.
type procStat struct {
	pgid  int
	state byte
	// start is the process's start time in clock ticks since boot: with
	// the pid, it names one process for good, since a reused pid has a
	// later start.
	start uint64
}

// readStat reads the process group, state and start time of pid.
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// The command name may hold spaces and parentheses: fields start
	// after the last ')', with the state (field 3 of proc(5)).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, false
	}
	g, err := strconv.Atoi(string(f[2]))
	if err != nil {
		return procStat{}, false
	}
	start, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return procStat{}, false
	}
	return procStat{pgid: g, state: f[0][0], start: start}, true
}

func waitGroupGone(pgid int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for GroupAlive(pgid) && time.Now().Before(deadline) {
		signalGroup(pgid, sigKill)
		time.Sleep(5 * time.Millisecond)
	}
}

// readStart is the start time of pid, or 0 when unknown.
func readStart(pid int) uint64 {
	st, _ := readStat(pid)
	return st.start
}
