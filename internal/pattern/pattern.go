// Package pattern describes team patterns: the roles a team is made of, its
// size, and whether the lead also works or only manages (seed 004's two
// styles). Built-in patterns come first; user patterns are read from
// .troupe/patterns/*.yaml. A history file records the patterns and member
// names a workspace used, so that a user can avoid repeating them.
//
// It must never depend on agents or teams: the team runtime asks it
// questions (ManageOnly) and enforces the answers.
package pattern

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Role is one part a teammate plays.
type Role struct {
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	Model       string `yaml:"model,omitempty" json:"model,omitempty"`
	// MCPServers, when set, are the only MCP servers whose tools a
	// teammate of this role gets (a spawn's mcp_servers overrides it).
	MCPServers []string `yaml:"mcp_servers,omitempty" json:"mcp_servers,omitempty"`
}

// Pattern is a team shape.
type Pattern struct {
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	// LeadWorks: the lead also writes code. When false the lead only
	// manages, and its writing tools are refused (delegate mode).
	LeadWorks bool `yaml:"lead_works" json:"lead_works"`
	// Size is the number of teammates, the lead not counted.
	Size int `yaml:"size" json:"size"`
	// Roles are assigned to teammates in order, starting again from the
	// first when there are more teammates than roles.
	Roles []Role `yaml:"roles" json:"roles"`
	// Aliases are other names the pattern answers to.
	Aliases []string `yaml:"aliases,omitempty" json:"aliases,omitempty"`
	// Source is "builtin" or the file the pattern came from.
	Source string `yaml:"-" json:"source"`
}

// ManageOnly reports whether the lead only manages under this pattern.
func (p Pattern) ManageOnly() bool { return !p.LeadWorks }

// The built-in patterns' names.
const (
	// FullTeam: a lead that only manages and four teammates (seed 004's
	// first, default style).
	FullTeam = "full-team"
	// SmallTeam: a lead that also works with two teammates (seed 004's
	// light style).
	SmallTeam = "small-team"
	// DefaultName is the pattern used when settings name none.
	DefaultName = FullTeam
)

// Builtins returns the built-in patterns.
func Builtins() []Pattern {
	return []Pattern{
		{
			Name:        FullTeam,
			Description: "A full team: the lead only breaks the work down, assigns it, and reports; teammates do all the work.",
			LeadWorks:   false,
			Size:        4,
			Roles: []Role{
				{Name: "implementer", Description: "Writes the code of one area, with its tests."},
				{Name: "implementer", Description: "Writes the code of another area, with its tests."},
				{Name: "tester", Description: "Writes and runs tests across the work; reports failures to their owners."},
				{Name: "reviewer", Description: "Reviews each change for correctness, style and risk before it is done."},
			},
			Aliases: []string{"fixed-theme"},
			Source:  "builtin",
		},
		{
			Name:        SmallTeam,
			Description: "A light team: the lead works too, with a couple of teammates for parallel or second-opinion work.",
			LeadWorks:   true,
			Size:        2,
			Roles: []Role{
				{Name: "implementer", Description: "Takes a self-contained part of the work."},
				{Name: "reviewer", Description: "Reviews and tests what the lead and the implementer write."},
			},
			Aliases: []string{"mixed-genius"},
			Source:  "builtin",
		},
	}
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,39}$`)

// Set is the patterns of a workspace.
type Set struct {
	patterns []Pattern
	// Warnings name the pattern files that were skipped and why.
	Warnings []string
}

// Load returns the built-in patterns and those in dir/*.yaml (and
// *.yml). A file that cannot be read or is not a valid pattern is skipped
// with a warning naming it; a user pattern with a built-in's name
// replaces it. A missing dir is no error.
func Load(dir string) *Set {
	s := &Set{patterns: Builtins()}
	if dir == "" {
		return s
	}
	var paths []string
	for _, ext := range []string{"*.yaml", "*.yml"} {
		m, _ := filepath.Glob(filepath.Join(dir, ext))
		paths = append(paths, m...)
	}
	sort.Strings(paths)
	for _, path := range paths {
		p, err := readFile(path)
		if err != nil {
			s.Warnings = append(s.Warnings, fmt.Sprintf("pattern file %s skipped: %v", path, err))
			continue
		}
		s.add(p)
	}
	return s
}

func (s *Set) add(p Pattern) {
	for i, q := range s.patterns {
		if q.Name == p.Name {
			s.patterns[i] = p
			return
		}
	}
	s.patterns = append(s.patterns, p)
}

// Parse reads one pattern file's content; name is used when the file
// gives none.
func Parse(data []byte, name string) (Pattern, error) {
	var p Pattern
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		if errors.Is(err, io.EOF) {
			return Pattern{}, errors.New("the file is empty")
		}
		return Pattern{}, err
	}
	if p.Name == "" {
		p.Name = name
	}
	p.Name = strings.ToLower(p.Name)
	switch {
	case !nameRE.MatchString(p.Name):
		return Pattern{}, fmt.Errorf("name %q: want lower-case letters, digits, '.', '_' or '-', at most 40", p.Name)
	case p.Size < 0:
		return Pattern{}, fmt.Errorf("size %d: want zero or more teammates", p.Size)
	}
	for i, r := range p.Roles {
		if strings.TrimSpace(r.Name) == "" {
			return Pattern{}, fmt.Errorf("roles[%d]: no name", i)
		}
	}
	if p.Size == 0 {
		p.Size = len(p.Roles)
	}
	return p, nil
}

func readFile(path string) (Pattern, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Pattern{}, err
	}
	base := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), ".yaml"), ".yml")
	p, err := Parse(data, base)
	if err != nil {
		return Pattern{}, err
	}
	p.Source = path
	return p, nil
}

// All returns every pattern, built-ins first.
func (s *Set) All() []Pattern { return append([]Pattern(nil), s.patterns...) }

// Lookup finds a pattern by name or alias, case-insensitively.
func (s *Set) Lookup(name string) (Pattern, bool) {
	name = strings.ToLower(strings.TrimSpace(name))
	if s == nil || name == "" {
		return Pattern{}, false
	}
	for _, p := range s.patterns {
		if p.Name == name {
			return p, true
		}
	}
	for _, p := range s.patterns {
		for _, a := range p.Aliases {
			if strings.ToLower(a) == name {
				return p, true
			}
		}
	}
	return Pattern{}, false
}

// ManageOnly reports whether the named pattern's lead only manages. A
// missing or unknown pattern is false: nothing is blocked (fail open), as
// seed 004 explains: right after TeamCreate the pattern is not yet
// recorded, and blocking then would block recording it.
func (s *Set) ManageOnly(name string) bool {
	p, ok := s.Lookup(name)
	return ok && p.ManageOnly()
}

// Default returns the pattern configured as the default (settings'
// team.defaultPattern), or DefaultName when none is configured. A
// configured name that is unknown is an error naming the known ones.
func (s *Set) Default(configured string) (Pattern, error) {
	name := configured
	if strings.TrimSpace(name) == "" {
		name = DefaultName
	}
	if p, ok := s.Lookup(name); ok {
		return p, nil
	}
	var names []string
	for _, p := range s.patterns {
		names = append(names, p.Name)
	}
	return Pattern{}, fmt.Errorf("unknown team pattern %q (known: %s)", name, strings.Join(names, ", "))
}

// RoleFor is the role of the i-th teammate (from 0) under p.
func (p Pattern) RoleFor(i int) (Role, bool) {
	if len(p.Roles) == 0 || i < 0 {
		return Role{}, false
	}
	return p.Roles[i%len(p.Roles)], true
}
