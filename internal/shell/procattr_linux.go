package shell

import "syscall"

// sysProcAttr puts the command in its own process group and has the
// kernel SIGKILL it when troupe dies, kill -9 included. The death signal
// is tied to the thread that forked, not the process: Start forks from a
// goroutine locked to its thread until the command has exited, so the
// signal cannot fire because the Go runtime retired a thread.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
