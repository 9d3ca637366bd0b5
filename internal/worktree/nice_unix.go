//go:build unix

package worktree

import "syscall"

// backgroundNice is the niceness of git processes that work ahead of
// demand.
const backgroundNice = 10

// lowerPriority lowers a started process's CPU priority; the processes it
// starts inherit it. A failure leaves it as it was: only speed is at stake.
func lowerPriority(pid int) { _ = syscall.Setpriority(syscall.PRIO_PROCESS, pid, backgroundNice) }
