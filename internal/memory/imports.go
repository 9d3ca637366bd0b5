package memory

import (
	"strings"

	"gopkg.in/yaml.v3"
)

// Imports returns the @path imports of a memory file's content, in order:
// an "@" at the start of a line or after a blank, followed by a path up to
// the next blank, trailing punctuation removed. As in Claude Code, nothing
// inside a code span (`…`) or a fenced code block counts, so "@" in code
// and e-mail addresses are not imports.
func Imports(content string) []string {
	var out []string
	fence := ""
	for _, line := range strings.Split(content, "\n") {
		trimmed := strings.TrimLeft(line, " \t")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]+" \t\r") == "" {
				fence = ""
			}
			continue
		}
		if f := fenceOf(trimmed); f != "" {
			fence = f
			continue
		}
		out = append(out, lineImports(line)...)
	}
	return out
}

// fenceOf returns the fence a line opens (``` or ~~~, or longer), or "".
func fenceOf(line string) string {
	for _, c := range []byte{'`', '~'} {
		n := 0
		for n < len(line) && line[n] == c {
			n++
		}
		if n >= 3 {
			return line[:n]
		}
	}
	return ""
}

// lineImports finds the imports of one line outside code spans.
func lineImports(line string) []string {
	var out []string
	for i := 0; i < len(line); {
		switch c := line[i]; {
		case c == '`':
			// A code span: a run of n backticks up to the next run of
			// exactly n; an unmatched run is literal text.
			n := 0
			for i+n < len(line) && line[i+n] == '`' {
				n++
			}
			if end := closingRun(line[i+n:], n); end >= 0 {
				i += n + end + n
			} else {
				i += n
			}
		case c == '@' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			j := i + 1
			for j < len(line) && line[j] != ' ' && line[j] != '\t' && line[j] != '`' && line[j] != '\r' {
				j++
			}
			if p := strings.TrimRight(line[i+1:j], ".,;:!?)]}\"'"); p != "" && p[0] != '@' {
				out = append(out, p)
			}
			i = j
		default:
			i++
		}
	}
	return out
}

// closingRun returns the index in s of a run of exactly n backticks, or -1.
func closingRun(s string, n int) int {
	for i := 0; i < len(s); {
		if s[i] != '`' {
			i++
			continue
		}
		m := 0
		for i+m < len(s) && s[i+m] == '`' {
			m++
		}
		if m == n {
			return i
		}
		i += m
	}
	return -1
}

// ruleFrontMatter splits a .claude/rules file into the globs of its
// "paths:" front matter (a list, or one string of comma-separated globs)
// and the body. A file without front matter, or whose front matter does not
// parse, is returned whole with no globs.
func ruleFrontMatter(content string) ([]string, string) {
	s := strings.TrimPrefix(content, "\ufeff")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	first, rest, ok := strings.Cut(s, "\n")
	if !ok || strings.TrimRight(first, " \t") != "---" {
		return nil, content
	}
	front, body, found := "", "", false
	for pos := 0; pos <= len(rest); {
		line, _, more := strings.Cut(rest[pos:], "\n")
		if strings.TrimRight(line, " \t") == "---" {
			front, found = rest[:pos], true
			if more {
				body = rest[pos+len(line)+1:]
			}
			break
		}
		if !more {
			break
		}
		pos += len(line) + 1
	}
	if !found {
		return nil, content
	}
	var fm struct {
		Paths any `yaml:"paths"`
	}
	if err := yaml.Unmarshal([]byte(front), &fm); err != nil {
		return nil, content
	}
	var globs []string
	switch v := fm.Paths.(type) {
	case string:
		for _, g := range strings.Split(v, ",") {
			if g = strings.TrimSpace(g); g != "" {
				globs = append(globs, g)
			}
		}
	case []any:
		for _, x := range v {
			if g, ok := x.(string); ok && strings.TrimSpace(g) != "" {
				globs = append(globs, strings.TrimSpace(g))
			}
		}
	}
	return globs, strings.TrimLeft(body, "\n")
}
