package fakeapi

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// With DeltaBytes, text streams in pieces of at most that many bytes that
// never split a rune (one longer than a piece stays whole) and add up to
// the text.
func TestSplitDeltaBytes(t *testing.T) {
	for _, tc := range []struct {
		text string
		n    int
		want []string
	}{
		{"hello world", 4, []string{"hell", "o wo", "rld"}},
		{"héllo", 2, []string{"h", "é", "ll", "o"}},
		{"日本", 1, []string{"日", "本"}},
		{"", 3, []string{""}},
	} {
		got := (&sse{deltaBytes: tc.n}).split(tc.text)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("split(%q, %d) (-want +got):\n%s", tc.text, tc.n, diff)
		}
		if strings.Join(got, "") != tc.text {
			t.Errorf("split(%q, %d) loses bytes: %q", tc.text, tc.n, got)
		}
	}
}
