package mcp

import "syscall"

// setDeathSignal makes the server die with troupe, even when troupe is
// killed before Close runs.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
