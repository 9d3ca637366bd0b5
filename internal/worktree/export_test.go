package worktree

// SetBeforeAdd sets the hook Add runs before each try of its git worktree
// add (nil: none).
func SetBeforeAdd(f func(top, branch string, try int)) { beforeAdd = f }
