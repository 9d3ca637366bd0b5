// Package text holds the small text helpers the user-facing parts share.
//
// It must never depend on anything else of troupe.
package text

import (
	"strings"
	"unicode/utf8"
)

// OneLine folds s onto one line (runs of white space become one space) and
// cuts it to at most n characters, the last of them an ellipsis when
// something was cut. It never splits a character.
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if n <= 0 {
		return ""
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimRight(string(r[:n-1]), " ") + "…"
}
