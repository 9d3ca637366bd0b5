// Package pattern describes team patterns: the roles a team is made of, its
// size, and whether the lead also works or only manages (seed 004's
// fixed-theme and mixed-genius). Built-in patterns come first; user
// patterns are read from .troupe/patterns/*.yaml. The default pattern is
// read from seed 004's .claude/team-themes/config.json or troupe's
// settings, and is fixed-theme when nothing names one.
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
	"sync"

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
	// MinSize and MaxSize bound the whole team, the lead counted, as seed
	// 004 counts it ("4〜6人"); 0: not bounded.
	MinSize int `yaml:"min_size,omitempty" json:"min_size,omitempty"`
	MaxSize int `yaml:"max_size,omitempty" json:"max_size,omitempty"`
	// Personas: members play characters from a theme (display names and
	// voices over their unchanged internal names).
	Personas bool `yaml:"personas,omitempty" json:"personas,omitempty"`
	// Roles are assigned to teammates in order, starting again from the
	// first when there are more teammates than roles.
	Roles []Role `yaml:"roles" json:"roles"`
	// Isolation is where the pattern's teammates work: "worktree" (each
	// in its own git worktree and branch) or "shared" (the lead's
	// checkout); empty leaves it to the team's default. A spawn's own
	// isolation wins over it.
	Isolation string `yaml:"isolation,omitempty" json:"isolation,omitempty"`
	// Aliases are other names the pattern answers to.
	Aliases []string `yaml:"aliases,omitempty" json:"aliases,omitempty"`
	// Source is "builtin" or the file the pattern came from.
	Source string `yaml:"-" json:"source"`
}

// A pattern's isolation values (the team package's, spelled again: this
// package must not depend on it).
const (
	IsolationShared   = "shared"
	IsolationWorktree = "worktree"
)

// ManageOnly reports whether the lead only manages under this pattern.
func (p Pattern) ManageOnly() bool { return !p.LeadWorks }

// SizeText says how big the team is, the lead counted ("4-6 members").
func (p Pattern) SizeText() string {
	switch {
	case p.MinSize > 0 && p.MaxSize > p.MinSize:
		return fmt.Sprintf("%d-%d members", p.MinSize, p.MaxSize)
	case p.MinSize > 0:
		return fmt.Sprintf("%d members", p.MinSize)
	}
	return fmt.Sprintf("%d members", p.Size+1)
}

// The built-in patterns' names: seed 004's.
const (
	// FixedTheme: a full team of four to six, all from one theme; the lead
	// only manages (delegate mode recommended).
	FixedTheme = "fixed-theme"
	// MixedGenius: a light team of two or three, the session's own
	// character plus "genius" characters; the lead works too.
	MixedGenius = "mixed-genius"
	// FullTeam and SmallTeam are the names troupe used first; they stay as
	// aliases of FixedTheme and MixedGenius.
	FullTeam  = "full-team"
	SmallTeam = "small-team"
	// DefaultName is the pattern used when nothing names one (seed 004:
	// "未設定時は fixed-theme").
	DefaultName = FixedTheme
)

// Builtins returns the built-in patterns.
func Builtins() []Pattern {
	return []Pattern{
		{
			Name:        FixedTheme,
			Description: "A full team from one theme: the lead only breaks the work down, assigns it and reports (delegate mode recommended); teammates do all the work.",
			LeadWorks:   false,
			Size:        4,
			MinSize:     4,
			MaxSize:     6,
			Roles: []Role{
				{Name: "implementer", Description: "Writes the code of one area, with its tests."},
				{Name: "implementer", Description: "Writes the code of another area, with its tests."},
				{Name: "tester", Description: "Writes and runs tests across the work; reports failures to their owners."},
				{Name: "reviewer", Description: "Reviews each change for correctness, style and risk before it is done."},
			},
			Personas: true,
			Aliases:  []string{FullTeam},
			Source:   "builtin",
		},
		{
			Name:        MixedGenius,
			Description: "A light team: the session's own character leads and works too, with one or two \"genius\" characters for parallel or second-opinion work.",
			LeadWorks:   true,
			Size:        2,
			MinSize:     2,
			MaxSize:     3,
			Roles: []Role{
				{Name: "implementer", Description: "Takes a self-contained part of the work."},
				{Name: "reviewer", Description: "Reviews and tests what the lead and the implementer write."},
			},
			Personas: true,
			Aliases:  []string{SmallTeam},
			Source:   "builtin",
		},
	}
}

var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,39}$`) })

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
	case !nameRE().MatchString(p.Name):
		return Pattern{}, fmt.Errorf("name %q: want lower-case letters, digits, '.', '_' or '-', at most 40", p.Name)
	case p.Size < 0:
		return Pattern{}, fmt.Errorf("size %d: want zero or more teammates", p.Size)
	case p.MinSize < 0 || p.MaxSize < 0 || (p.MaxSize > 0 && p.MaxSize < p.MinSize):
		return Pattern{}, fmt.Errorf("min_size %d, max_size %d: want 0 <= min_size <= max_size", p.MinSize, p.MaxSize)
	}
	switch p.Isolation = strings.ToLower(strings.TrimSpace(p.Isolation)); p.Isolation {
	case "", IsolationShared, IsolationWorktree:
	default:
		return Pattern{}, fmt.Errorf("isolation %q: want %s or %s", p.Isolation, IsolationShared, IsolationWorktree)
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

// Default returns the pattern configured as the default (see
// DefaultSource), or DefaultName when none is configured. A
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
