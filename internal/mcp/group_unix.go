//go:build unix

package mcp

import (
	"os/exec"
	"syscall"
)

// setGroup puts a stdio server in a process group of its own, so that
// Close can stop what it started too.
func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(cmd.SysProcAttr)
}

// killGroup kills every process left in the group pgid.
func killGroup(pgid int) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}
