//go:build !unix

package worktree

// lowerPriority does nothing where there is no nice.
func lowerPriority(int) {}
