// Package shellwords takes a bash command line apart well enough to reason
// about it: the simple commands it runs (split at ;, &&, ||, |, &, newlines
// and parentheses, including those inside $(...) and backticks) and the
// words of each. It is not a shell: it errs towards seeing more commands,
// never fewer, and it says when a line does things (substitutions,
// redirections) that a prefix rule cannot vouch for.
//
// It must never depend on anything but the standard library.
package shellwords

import "strings"

// Segment is one simple command of a line.
type Segment struct {
	// Text is the command as written, trimmed.
	Text string
	// Words are its words with quotes removed.
	Words []string
	// Nested reports that the segment comes from inside a $(...) or
	// backtick substitution.
	Nested bool
}

// Line is a command line taken apart.
type Line struct {
	Segments []Segment
	// Substitution reports a $(...), `...`, <(...) or >(...) anywhere.
	Substitution bool
	// Redirect reports a redirection other than between standard streams
	// (2>&1, >&2), which may write a file.
	Redirect bool
}

// Parse splits a command line.
func Parse(cmd string) Line {
	var l Line
	parse(cmd, &l, false, 0)
	return l
}

const maxDepth = 16

func parse(cmd string, l *Line, nested bool, depth int) {
	var cur strings.Builder
	flush := func() {
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			return
		}
		l.Segments = append(l.Segments, Segment{Text: text, Words: Words(text), Nested: nested})
	}
	rs := []rune(cmd)
	inSingle, inDouble := false, false
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case inSingle:
			cur.WriteRune(c)
			if c == '\'' {
				inSingle = false
			}
			continue
		case c == '\\' && i+1 < len(rs):
			cur.WriteRune(c)
			cur.WriteRune(rs[i+1])
			i++
			continue
		case (c == '$' || c == '<' || c == '>') && i+1 < len(rs) && rs[i+1] == '(' && (c == '$' || !inDouble):
			end := closing(rs, i+2)
			l.Substitution = true
			if depth < maxDepth {
				parse(string(rs[i+2:end]), l, true, depth+1)
			}
			cur.WriteString(string(rs[i:min(end+1, len(rs))]))
			i = end
			continue
		case c == '`':
			end := i + 1
			for end < len(rs) && rs[end] != '`' {
				if rs[end] == '\\' {
					end++
				}
				end++
			}
			end = min(end, len(rs))
			l.Substitution = true
			if depth < maxDepth {
				parse(string(rs[i+1:end]), l, true, depth+1)
			}
			cur.WriteString(string(rs[i:min(end+1, len(rs))]))
			i = end
			continue
		case inDouble:
			cur.WriteRune(c)
			if c == '"' {
				inDouble = false
			}
			continue
		case c == '\'':
			inSingle = true
		case c == '"':
			inDouble = true
		case c == ';' || c == '&' || c == '|' || c == '\n' || c == '(' || c == ')' || c == '{' && atWordStart(rs, i) || c == '}' && atWordStart(rs, i):
			if c == '&' && i > 0 && (rs[i-1] == '>' || rs[i-1] == '<') {
				break // 2>&1, >&2: part of a redirection
			}
			if c == '&' && i+1 < len(rs) && rs[i+1] == '>' {
				l.Redirect = true // &>file
				break
			}
			flush()
			continue
		case c == '>' || c == '<':
			if !streamRedirect(rs, i) {
				l.Redirect = true
			}
		}
		cur.WriteRune(c)
	}
	flush()
}

// atWordStart reports whether rs[i] stands alone as a word ({ and } are
// only reserved words there).
func atWordStart(rs []rune, i int) bool {
	before := i == 0 || isSpace(rs[i-1]) || strings.ContainsRune(";&|(", rs[i-1])
	after := i+1 == len(rs) || isSpace(rs[i+1]) || strings.ContainsRune(";&|)", rs[i+1])
	return before && after
}

func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' }

// streamRedirect reports whether the redirection at rs[i] only joins
// standard streams: 2>&1, >&2, 1>&2.
func streamRedirect(rs []rune, i int) bool {
	return rs[i] == '>' && i+2 < len(rs) && rs[i+1] == '&' && (rs[i+2] >= '0' && rs[i+2] <= '9' || rs[i+2] == '-')
}

// closing returns the index of the ')' closing a substitution whose body
// starts at start (or len(rs) when it is not closed).
func closing(rs []rune, start int) int {
	depth := 1
	inSingle, inDouble := false, false
	for i := start; i < len(rs); i++ {
		c := rs[i]
		switch {
		case inSingle:
			if c == '\'' {
				inSingle = false
			}
		case c == '\\':
			i++
		case inDouble:
			if c == '"' {
				inDouble = false
			}
		case c == '\'':
			inSingle = true
		case c == '"':
			inDouble = true
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return len(rs)
}

// Words splits one simple command into words, removing quotes and
// backslashes as bash would. Substitutions stay as written.
func Words(s string) []string {
	var words []string
	var cur strings.Builder
	have := false
	inSingle, inDouble := false, false
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case inSingle:
			if c == '\'' {
				inSingle = false
			} else {
				cur.WriteRune(c)
			}
		case inDouble && c == '"':
			inDouble = false
		case c == '\\' && i+1 < len(rs):
			i++
			if !inDouble || strings.ContainsRune("$`\"\\\n", rs[i]) {
				if rs[i] != '\n' {
					cur.WriteRune(rs[i])
				}
			} else {
				cur.WriteRune('\\')
				cur.WriteRune(rs[i])
			}
		case c == '$' && i+1 < len(rs) && rs[i+1] == '(':
			end := closing(rs, i+2)
			cur.WriteString(string(rs[i:min(end+1, len(rs))]))
			have = true
			i = end
		case inDouble:
			cur.WriteRune(c)
		case c == '\'':
			inSingle, have = true, true
		case c == '"':
			inDouble, have = true, true
		case isSpace(c):
			if have || cur.Len() > 0 {
				words = append(words, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(c)
		}
	}
	if have || cur.Len() > 0 {
		words = append(words, cur.String())
	}
	return words
}

// StripAssignments drops leading VAR=value words (FOO=1 rm x runs rm).
func StripAssignments(words []string) []string {
	for len(words) > 0 && isAssignment(words[0]) {
		words = words[1:]
	}
	return words
}

func isAssignment(w string) bool {
	eq := strings.IndexByte(w, '=')
	if eq <= 0 {
		return false
	}
	for i, c := range w[:eq] {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
