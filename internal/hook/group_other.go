//go:build !unix

package hook

import (
	"os"
	"os/exec"
)

// Without process groups only the hook's shell itself can be killed.
func setGroup(*exec.Cmd) {}

func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
