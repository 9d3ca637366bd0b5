//go:build !unix

package shell

import "errors"

// Group is one running command as recorded for the case troupe dies
// without stopping it.
type Group struct {
	Pgid    int    `json:"pgid"`
	Start   uint64 `json:"start"`
	Cgroup  string `json:"cgroup,omitempty"`
	Command string `json:"command,omitempty"`
}

type tracker struct{}

var tracked tracker

func (tracker) reserve(string) int { return 0 }
func (tracker) release(int)        {}
func (tracker) add(Group, int)     {}
func (tracker) remove(int)         {}

// SetRecordDir records nothing on this platform.
func SetRecordDir(string) error { return nil }

// KillLeftovers cannot verify process identities on this platform.
func KillLeftovers(string) ([]Group, error) {
	return nil, errors.New("leftover commands cannot be verified on this platform")
}

func describeCommand(c string) string { return c }

func readStart(int) uint64 { return 0 }
