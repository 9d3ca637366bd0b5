//go:build unix && !linux

package shell

import "syscall"

// sysProcAttr puts the command in its own process group; this platform
// has no parent-death signal, so only the watchdog and resume catch the
// orphans of a killed troupe.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
