package team

import "syscall"

// teammateProcAttr puts a teammate process in its own process group
// (signals to the lead's group do not hit it) and has it sent SIGTERM when
// the lead dies, so no teammate is orphaned: a resume restarts it.
func teammateProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
