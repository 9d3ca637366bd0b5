//go:build !unix

package shell

import (
	"os"
	"os/exec"
	"time"
)

type signal int

const (
	sigTerm signal = iota
	sigKill
)

// Without process groups only the command itself can be killed.
func setGroup(*exec.Cmd) {}

func signalGroup(pid int, _ signal) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

// GroupAlive is not known without process groups; it reports false.
func GroupAlive(int) bool { return false }

// PidAlive is not known on this platform; it reports false.
func PidAlive(int) bool { return false }

func waitGroupGone(int, time.Duration) {}
