package cassette

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"
)

var (
	errCanceled = context.Canceled
	errDeadline = context.DeadlineExceeded
)

// Divergence is a replayed call whose request differs from the recording,
// or a call the recording does not have.
type Divergence struct {
	Agent string
	Seq   int // the agent's call number, 1-based
	// Path is the first differing field, such as "system" or
	// "messages[3].content[0].text"; "" for a call beyond the recording.
	Path string
	// Want and Got are the recorded and the new value as JSON, shortened
	// around the first difference.
	Want, Got string
}

func (d *Divergence) Error() string {
	if d.Path == "" {
		return fmt.Sprintf("replay diverged: agent %q call %d: %s (got %s)", d.Agent, d.Seq, d.Want, d.Got)
	}
	return fmt.Sprintf("replay diverged: agent %q call %d: %s differs: recorded %s, now %s", d.Agent, d.Seq, d.Path, d.Want, d.Got)
}

// RecordedError is the error a recorded call ended with, served again. It
// matches the same llm sentinel with errors.Is as the original did.
type RecordedError struct {
	Message string
	kind    error
}

func (e *RecordedError) Error() string { return e.Message }

// Unwrap gives the sentinel the original error matched, if any.
func (e *RecordedError) Unwrap() error { return e.kind }

// shorten shows two JSON texts around their first difference, each at most
// about width runes.
func shorten(want, got string, width int) (string, string) {
	p := 0
	for p < len(want) && p < len(got) && want[p] == got[p] {
		p++
	}
	for p > 0 && !utf8.RuneStart(want[min(p, len(want)-1)]) {
		p--
	}
	return window(want, p, width), window(got, p, width)
}

func window(s string, at, width int) string {
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	start := max(0, at-width/4)
	for start > 0 && !utf8.RuneStart(s[start]) {
		start--
	}
	var b strings.Builder
	if start > 0 {
		b.WriteString("…")
	}
	n := 0
	for i, r := range s[start:] {
		if n == width {
			if start+i < len(s) {
				b.WriteString("…")
			}
			break
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}
