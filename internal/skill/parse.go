package skill

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// NamePattern is what a skill name must match: it is typed by the model and
// shown in prompts, so it stays short, lowercase and free of spaces.
const NamePattern = `^[a-z0-9][a-z0-9-]{0,63}$`

var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(NamePattern) })

// frontMatter is the part of the YAML header troupe uses. Other keys
// (license, allowed-tools, metadata, ...) are allowed and ignored, so that
// skills written for other agents load unchanged.
type frontMatter struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// ArgumentHint and DisableModelInvocation are Claude Code's, for
	// skills and commands typed as /name.
	ArgumentHint           string `yaml:"argument-hint"`
	DisableModelInvocation bool   `yaml:"disable-model-invocation"`
	// Arguments names the positional arguments: a list, or one string of
	// names separated by blanks.
	Arguments any `yaml:"arguments"`
}

// Parse reads the text of a SKILL.md: YAML front matter between two "---"
// lines, then a markdown body. It returns the skill with Name, Description
// and Body set (Path and Dir are left to the caller). A UTF-8 byte order
// mark and CRLF line endings are accepted.
func Parse(data []byte) (Skill, error) {
	return parse(data, "", true)
}

// ParseNamed is Parse for a file whose name Claude Code takes from where it
// lies (a skill's folder, a command's file name): front matter is then
// optional, a missing name is name, and a missing description is the first
// paragraph of the body.
func ParseNamed(data []byte, name string) (Skill, error) {
	return parse(data, name, false)
}

func parse(data []byte, name string, strict bool) (Skill, error) {
	s := strings.TrimPrefix(string(data), "\ufeff")
	s = strings.ReplaceAll(s, "\r\n", "\n")

	var front, body string
	first, rest, ok := strings.Cut(s, "\n")
	switch {
	case !isDelimiter(first) && strict:
		return Skill{}, ErrNoFrontMatter
	case !isDelimiter(first):
		body = s
	case !ok:
		return Skill{}, ErrUnclosedFrontMatter
	default:
		for pos := 0; ; {
			line, after, more := strings.Cut(rest[pos:], "\n")
			if isDelimiter(line) {
				front, body = rest[:pos], after
				break
			}
			if !more {
				return Skill{}, ErrUnclosedFrontMatter
			}
			pos += len(line) + 1
		}
	}

	var fm frontMatter
	if err := yaml.Unmarshal([]byte(front), &fm); err != nil {
		// Claude Code's own examples write "argument-hint: [issue] [n]",
		// which YAML reads as a broken list: take it as the text it is.
		fm = frontMatter{}
		if err2 := yaml.Unmarshal([]byte(quoteHints(front)), &fm); err2 != nil {
			return Skill{}, fmt.Errorf("%w: %s", ErrInvalidYAML, strings.TrimPrefix(err.Error(), "yaml: "))
		}
	}
	sk := Skill{
		Name:         fm.Name,
		Description:  strings.TrimSpace(fm.Description),
		Body:         strings.TrimRight(strings.TrimLeft(body, "\n"), " \t\n"),
		ArgumentHint: strings.TrimSpace(fm.ArgumentHint),
		UserOnly:     fm.DisableModelInvocation,
		Arguments:    argumentNames(fm.Arguments),
	}
	if !strict {
		if sk.Name == "" {
			sk.Name = name
		}
		if sk.Description == "" {
			sk.Description = firstParagraph(sk.Body)
		}
	}
	switch {
	case sk.Name == "":
		return Skill{}, ErrMissingName
	case !nameRE().MatchString(sk.Name):
		return Skill{}, fmt.Errorf("%w %q: it must match %s (lowercase letters, digits and hyphens, at most 64)", ErrInvalidName, sk.Name, NamePattern)
	case sk.Description == "":
		return Skill{}, ErrMissingDescription
	}
	return sk, nil
}

// isDelimiter reports whether line is a front matter fence; trailing blanks
// are forgiven because editors leave them.
func isDelimiter(line string) bool {
	return strings.TrimRight(line, " \t") == "---"
}

// firstParagraph is the first paragraph of a markdown body, heading marks
// removed, on one line.
func firstParagraph(body string) string {
	var lines []string
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			if len(lines) > 0 {
				break
			}
			continue
		}
		lines = append(lines, strings.TrimSpace(strings.TrimLeft(line, "#")))
	}
	return strings.TrimSpace(strings.Join(lines, " "))
}

// quoteHints quotes the value of argument-hint lines.
func quoteHints(front string) string {
	lines := strings.Split(front, "\n")
	for i, l := range lines {
		if v, ok := strings.CutPrefix(l, "argument-hint:"); ok {
			v = strings.TrimSpace(v)
			if !strings.HasPrefix(v, "'") && !strings.HasPrefix(v, `"`) {
				lines[i] = "argument-hint: '" + strings.ReplaceAll(v, "'", "''") + "'"
			}
		}
	}
	return strings.Join(lines, "\n")
}

// argumentNames reads the arguments field: a list of names or one string.
func argumentNames(v any) []string {
	var out []string
	switch v := v.(type) {
	case string:
		out = strings.Fields(v)
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok && strings.TrimSpace(s) != "" {
				out = append(out, strings.TrimSpace(s))
			}
		}
	}
	return out
}
