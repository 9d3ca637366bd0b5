//go:build unix && !linux

package team

import "syscall"

// teammateProcAttr puts a teammate process in its own process group.
// There is no parent-death signal outside Linux: a teammate process
// outlives a lead killed with SIGKILL.
func teammateProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
