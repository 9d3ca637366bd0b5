//go:build !linux

package shell

import (
	"errors"
	"os"
	"os/exec"
)

// Containment reports how a command's processes are held together: on this
// platform by their process group only, which a setsid child escapes.
func Containment() (string, error) {
	return "process group", errors.New("cgroups exist only on Linux")
}

func newCgroup() (string, *os.File, bool) { return "", nil, false }
func cgroupKill(string) bool              { return false }
func cgroupRemove(string)                 {}
func intoCgroup(*exec.Cmd, *os.File)      {}
func disableCgroups()                     {}
func ownCgroup(string) bool               { return false }
