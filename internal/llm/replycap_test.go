package llm

import (
	"errors"
	"strings"
	"testing"
)

func TestReplyCap(t *testing.T) {
	for _, tc := range []struct {
		configured int64
		adds       []int
		wantErrAt  int // index of the Add that fails, -1 for none
		wantText   string
	}{
		{configured: 10, adds: []int{4, 6, 1}, wantErrAt: 2, wantText: "10 bytes"},
		{configured: 2048, adds: []int{2048, 1}, wantErrAt: 1, wantText: "2 KiB"},
		{configured: -1, adds: []int{1 << 30, 1 << 30}, wantErrAt: -1},
		{configured: 0, adds: []int{DefaultMaxReplyBytes, 1}, wantErrAt: 1, wantText: "32 MiB"},
	} {
		c := ReplyCap{Max: ReplyCapOf(tc.configured)}
		failed := -1
		var err error
		for i, n := range tc.adds {
			if err = c.Add(n); err != nil {
				failed = i
				break
			}
		}
		if failed != tc.wantErrAt {
			t.Errorf("cap %d: failed at add %d, want %d", tc.configured, failed, tc.wantErrAt)
		}
		if err != nil && (!errors.Is(err, ErrReplyTooLarge) || !strings.Contains(err.Error(), tc.wantText)) {
			t.Errorf("cap %d: err = %v, want ErrReplyTooLarge naming %s", tc.configured, err, tc.wantText)
		}
	}
}
