// Package kind names what a tool does: read, edit, execute, network or
// manage. Every tool declares one (tool.Tool.Kind), and the permission
// engine, the artifact guard and the subagent types judge a call by its
// kind, not by its name, so a new tool needs no entry in their tables.
//
// The zero Kind is Unknown: a tool that says nothing of itself, or a name
// no tool answers to, is treated as the most dangerous kind there is (it
// asks, and is refused where nothing may ask). New tools fail closed.
//
// It is a leaf: it imports nothing of troupe, so that packages which must
// not import tool (permission) can still speak of kinds.
package kind

import "fmt"

// Kind is what a tool does to the world.
type Kind uint8

// The kinds.
const (
	// Unknown is a tool that has not said what it does (or a name no tool
	// answers to); it is treated as able to do anything.
	Unknown Kind = iota
	// Read reads the workspace (files, searches, skills) and changes nothing.
	Read
	// Edit writes or changes files named by a path in its input.
	Edit
	// Execute runs commands: anything a program can do.
	Execute
	// Network reaches beyond the machine (a fetch, a search, a remote API).
	Network
	// Manage acts on the agent's own work or its team: tasks, messages,
	// teammates, subagents, background jobs, todos, its conversation. It
	// touches no file of the workspace by itself.
	Manage
)

var names = [...]string{Unknown: "unknown", Read: "read", Edit: "edit", Execute: "execute", Network: "network", Manage: "manage"}

// All are the kinds a tool may declare, Unknown last.
func All() []Kind { return []Kind{Read, Edit, Execute, Network, Manage, Unknown} }

// String is the kind's name ("read"); a value outside the list reads as
// "kind(9)".
func (k Kind) String() string {
	if int(k) < len(names) {
		return names[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Parse reads a kind's name.
func Parse(s string) (Kind, error) {
	for k, n := range names {
		if n == s {
			return Kind(k), nil
		}
	}
	return Unknown, fmt.Errorf("unknown tool kind %q (want read, edit, execute, network, manage or unknown)", s)
}

// MarshalText writes the kind's name, so JSON shows "read", not 1.
func (k Kind) MarshalText() ([]byte, error) {
	if int(k) >= len(names) {
		return nil, fmt.Errorf("tool kind %d is not one of the kinds", uint8(k))
	}
	return []byte(names[k]), nil
}

// UnmarshalText reads a kind's name.
func (k *Kind) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// Changes reports whether a call of this kind may change the workspace or
// run commands on the machine: Edit, Execute, and Unknown (which may do
// anything). Read, Network and Manage calls leave the workspace's files as
// they were.
func (k Kind) Changes() bool {
	switch k {
	case Read, Network, Manage:
		return false
	}
	return true
}
