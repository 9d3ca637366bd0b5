package worktree

import (
	"errors"
	"testing"
)

// TestHalfMade: the error of a git that read a worktree record another
// git was writing is told apart from other failures, to be tried again.
func TestHalfMade(t *testing.T) {
	for _, tc := range []struct {
		stderr string
		want   bool
	}{
		{"fatal: failed to read .git/worktrees/10798-2/commondir: Success\n", true},
		{"fatal: failed to read /r/.git/worktrees/a/gitdir: No such file or directory\n", true},
		{"fatal: '/r/x' already exists\n", false},
		{"fatal: not a git repository\n", false},
	} {
		err := &gitError{args: []string{"worktree", "add"}, stderr: tc.stderr, err: errors.New("exit status 128")}
		if got := halfMade(err); got != tc.want {
			t.Errorf("halfMade(%q) = %t; want %t", tc.stderr, got, tc.want)
		}
	}
}
