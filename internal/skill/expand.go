package skill

import (
	"path/filepath"
	"strconv"
	"strings"
)

// Command is a skill as the user's "/name" sees it.
type Command struct {
	Name, Description, ArgumentHint string
}

// Commands returns every skill and command, in name order, for the UI's
// list of slash commands.
func (s *Set) Commands() []Command {
	var out []Command
	for _, n := range s.Names() {
		sk := s.byName[n]
		out = append(out, Command{Name: sk.Name, Description: sk.Description, ArgumentHint: sk.ArgumentHint})
	}
	return out
}

// Expand returns the prompt that "/name args" sends to the model: the body
// of the named skill or command with Claude Code's placeholders filled in.
// $ARGUMENTS is args as typed; $ARGUMENTS[N] and $N are its N-th word
// (from 0, split like a shell would, quotes removed), a positional that is
// not given staying as written; $name is the argument the front matter's
// "arguments" puts at that place; ${CLAUDE_SKILL_DIR} is the skill's folder.
// When the body names no placeholder and args is
// not empty, it is appended as a last "ARGUMENTS: …" line, as Claude Code
// does, so the arguments are never lost. ok is false for an unknown name.
func (s *Set) Expand(name, args string) (prompt string, ok bool) {
	sk, ok := s.Get(strings.TrimSpace(name))
	if !ok {
		return "", false
	}
	args = strings.TrimSpace(args)
	words := splitArgs(args)
	body := strings.ReplaceAll(sk.Body, "${CLAUDE_SKILL_DIR}", filepath.Dir(sk.Path))
	body, used := substitute(body, args, words, sk.Arguments)
	if !used && args != "" {
		if body != "" {
			body += "\n\n"
		}
		body += "ARGUMENTS: " + args
	}
	return body, true
}

// substitute fills the placeholders of body; used says there was one.
func substitute(body, args string, words, names []string) (string, bool) {
	var b strings.Builder
	used := false
	for i := 0; i < len(body); {
		if body[i] != '$' {
			b.WriteByte(body[i])
			i++
			continue
		}
		rest := body[i+1:]
		switch {
		case strings.HasPrefix(rest, "ARGUMENTS["):
			end := strings.IndexByte(rest, ']')
			if n, err := strconv.Atoi(rest[len("ARGUMENTS["):max(end, len("ARGUMENTS["))]); end > 0 && err == nil && n >= 0 {
				used = true
				if n < len(words) {
					b.WriteString(words[n])
					i += 1 + end + 1
					continue
				}
			}
		case strings.HasPrefix(rest, "ARGUMENTS"):
			b.WriteString(args)
			i += 1 + len("ARGUMENTS")
			used = true
			continue
		case len(rest) > 0 && rest[0] >= '0' && rest[0] <= '9':
			j := 0
			for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
				j++
			}
			used = true
			if n, err := strconv.Atoi(rest[:j]); err == nil && n < len(words) {
				b.WriteString(words[n])
				i += 1 + j
				continue
			}
		default:
			if n, name := namedAt(rest, names); n >= 0 {
				used = true
				if n < len(words) {
					b.WriteString(words[n])
					i += 1 + len(name)
					continue
				}
			}
		}
		b.WriteByte('$')
		i++
	}
	return b.String(), used
}

// namedAt returns the place and name of the longest argument name that
// rest starts with, followed by no name character; -1 when none.
func namedAt(rest string, names []string) (int, string) {
	best, bestName := -1, ""
	for i, n := range names {
		if strings.HasPrefix(rest, n) && len(n) > len(bestName) {
			if after := rest[len(n):]; after != "" && isNameByte(after[0]) {
				continue
			}
			best, bestName = i, n
		}
	}
	return best, bestName
}

func isNameByte(c byte) bool {
	return c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// splitArgs splits args into words the way a shell would for plain text:
// blanks separate, single and double quotes group and are removed.
func splitArgs(args string) []string {
	var (
		out   []string
		cur   strings.Builder
		quote rune
		in    bool
	)
	for _, r := range args {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}
