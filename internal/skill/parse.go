package skill

import (
	"fmt"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// NamePattern is what a skill name must match: it is typed by the model and
// shown in prompts, so it stays short, lowercase and free of spaces.
const NamePattern = `^[a-z0-9][a-z0-9-]{0,63}$`

var nameRE = regexp.MustCompile(NamePattern)

// frontMatter is the part of the YAML header troupe uses. Other keys
// (license, allowed-tools, metadata, ...) are allowed and ignored, so that
// skills written for other agents load unchanged.
type frontMatter struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
}

// Parse reads the text of a SKILL.md: YAML front matter between two "---"
// lines, then a markdown body. It returns the skill with Name, Description
// and Body set (Path and Dir are left to the caller). A UTF-8 byte order
// mark and CRLF line endings are accepted.
func Parse(data []byte) (Skill, error) {
	s := strings.TrimPrefix(string(data), "\ufeff")
	s = strings.ReplaceAll(s, "\r\n", "\n")

	first, rest, ok := strings.Cut(s, "\n")
	if !isDelimiter(first) {
		return Skill{}, ErrNoFrontMatter
	}
	if !ok {
		return Skill{}, ErrUnclosedFrontMatter
	}
	var front, body string
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

	var fm frontMatter
	if err := yaml.Unmarshal([]byte(front), &fm); err != nil {
		return Skill{}, fmt.Errorf("%w: %s", ErrInvalidYAML, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	sk := Skill{
		Name:        fm.Name,
		Description: strings.TrimSpace(fm.Description),
		Body:        strings.TrimRight(strings.TrimLeft(body, "\n"), " \t\n"),
	}
	switch {
	case sk.Name == "":
		return Skill{}, ErrMissingName
	case !nameRE.MatchString(sk.Name):
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
