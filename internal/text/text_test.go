package text

import "testing"

func TestOneLine(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"a\n  b\tc", 10, "a b c"},
		{"abcdefghij", 5, "abcd…"},
		{"héllo wörld", 7, "héllo…"},
		{"日本語のテキスト", 4, "日本語…"},
		{"abc", 0, ""},
	} {
		if got := OneLine(tc.in, tc.n); got != tc.want {
			t.Errorf("OneLine(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
