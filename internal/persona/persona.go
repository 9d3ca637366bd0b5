// Package persona is seed 004's characters: themes of characters that team
// members play (a display name, a role and a voice over their unchanged
// internal names), read from .claude/team-themes/*.json, and the user-level
// theme history that lets a lead avoid the themes and characters it used
// recently.
//
// It must never depend on teams, agents or the store: the team runtime
// picks from it and enforces the rest (the artifact guard, the prompts).
package persona

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Dir is where a workspace's themes live, as seed 004 keeps them.
const Dir = ".claude/team-themes"

// Character is one persona a member can play.
type Character struct {
	// Name is the display name: what the character is called when it
	// speaks. It never replaces a member's internal name.
	Name string `json:"name"`
	// Aliases are other names the character goes by (a nickname); they are
	// guarded like the name.
	Aliases []string `json:"aliases,omitempty"`
	// Role is the part the character suits ("lead", "implementer",
	// "reviewer", …); it guides the pick, it restricts nothing.
	Role string `json:"role,omitempty"`
	// Voice is a short style note: how the character talks.
	Voice string `json:"voice,omitempty"`
}

// Theme is a set of characters from one world.
type Theme struct {
	// Name is the theme's id ("example"): what a user or the lead names.
	// It is not guarded, so keep it plain.
	Name string `json:"name"`
	// Title is the theme's display name; it is guarded.
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	// Words are more theme words that must not leave the team (places,
	// catch phrases).
	Words      []string    `json:"words,omitempty"`
	Characters []Character `json:"characters"`
	// Source is "builtin" or the file the theme came from.
	Source string `json:"source,omitempty"`
}

// GuardWords are the words of t that the artifact guard refuses while a
// team plays it: its title, its words, and every character's name and
// aliases.
func (t Theme) GuardWords() []string {
	var out []string
	add := func(w string) {
		if w = strings.TrimSpace(w); w != "" && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	add(t.Title)
	for _, w := range t.Words {
		add(w)
	}
	for _, c := range t.Characters {
		add(c.Name)
		for _, a := range c.Aliases {
			add(a)
		}
	}
	return out
}

// Character returns the theme's character called name (or by an alias),
// case-insensitively.
func (t Theme) Character(name string) (Character, bool) {
	name = strings.TrimSpace(name)
	for _, c := range t.Characters {
		if strings.EqualFold(c.Name, name) {
			return c, true
		}
		for _, a := range c.Aliases {
			if strings.EqualFold(a, name) {
				return c, true
			}
		}
	}
	return Character{}, false
}

//go:embed themes/*.json
var builtinFS embed.FS

var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,39}$`) })

// Builtins returns the themes troupe ships: one neutral example, made up
// for troupe, with no characters from any published work.
func Builtins() []Theme {
	entries, _ := builtinFS.ReadDir("themes")
	var out []Theme
	for _, e := range entries {
		data, err := builtinFS.ReadFile("themes/" + e.Name())
		if err != nil {
			continue
		}
		t, err := Parse(data, strings.TrimSuffix(e.Name(), ".json"))
		if err != nil {
			panic(fmt.Sprintf("persona: built-in theme %s: %v", e.Name(), err)) // a build mistake, caught by the tests
		}
		t.Source = "builtin"
		out = append(out, t)
	}
	return out
}

// Parse reads one theme file; name is used when the file gives none.
func Parse(data []byte, name string) (Theme, error) {
	var t Theme
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return Theme{}, err
	}
	if t.Name == "" {
		t.Name = name
	}
	t.Name = strings.ToLower(strings.TrimSpace(t.Name))
	if !nameRE().MatchString(t.Name) {
		return Theme{}, fmt.Errorf("name %q: want lower-case letters, digits, '.', '_' or '-', at most 40", t.Name)
	}
	if len(t.Characters) == 0 {
		return Theme{}, errors.New("no characters")
	}
	seen := map[string]bool{}
	for i, c := range t.Characters {
		n := strings.ToLower(strings.TrimSpace(c.Name))
		if n == "" {
			return Theme{}, fmt.Errorf("characters[%d]: no name", i)
		}
		if seen[n] {
			return Theme{}, fmt.Errorf("characters[%d]: %q twice", i, c.Name)
		}
		seen[n] = true
		t.Characters[i].Name = strings.TrimSpace(c.Name)
	}
	return t, nil
}

// Set is the themes of a workspace.
type Set struct {
	themes []Theme
	// Warnings name the theme files that were skipped and why.
	Warnings []string
}

// Load returns the built-in themes and those in dir/*.json, config.json
// left out (it configures the patterns). A file that is not a valid theme
// is skipped with a warning naming it; a user theme with a built-in's name
// replaces it. A missing dir is no error.
func Load(dir string) *Set {
	s := &Set{themes: Builtins()}
	if dir == "" {
		return s
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	sort.Strings(paths)
	for _, path := range paths {
		if filepath.Base(path) == "config.json" {
			continue
		}
		data, err := os.ReadFile(path)
		if err == nil {
			var t Theme
			if t, err = Parse(data, strings.TrimSuffix(filepath.Base(path), ".json")); err == nil {
				t.Source = path
				s.add(t)
				continue
			}
		}
		s.Warnings = append(s.Warnings, fmt.Sprintf("theme file %s skipped: %v", path, err))
	}
	return s
}

func (s *Set) add(t Theme) {
	for i, q := range s.themes {
		if q.Name == t.Name {
			s.themes[i] = t
			return
		}
	}
	s.themes = append(s.themes, t)
}

// All returns every theme, built-ins first.
func (s *Set) All() []Theme {
	if s == nil {
		return nil
	}
	return append([]Theme(nil), s.themes...)
}

// Lookup finds a theme by name or title, case-insensitively.
func (s *Set) Lookup(name string) (Theme, bool) {
	name = strings.TrimSpace(name)
	if s == nil || name == "" {
		return Theme{}, false
	}
	for _, t := range s.themes {
		if strings.EqualFold(t.Name, name) || (t.Title != "" && strings.EqualFold(t.Title, name)) {
			return t, true
		}
	}
	return Theme{}, false
}

// Names lists the themes' names.
func (s *Set) Names() []string {
	var out []string
	for _, t := range s.All() {
		out = append(out, t.Name)
	}
	return out
}

// Pick chooses a theme: the one named, or else the one least recently used
// in history (never used first, then the oldest use), so that a new team
// does not repeat the last team's theme. The workspace's own themes are
// picked from when it has any; the built-in example only when it has
// none. An unknown name is an error naming the known ones.
func (s *Set) Pick(name string, history []Entry) (Theme, error) {
	if strings.TrimSpace(name) != "" {
		if t, ok := s.Lookup(name); ok {
			return t, nil
		}
		return Theme{}, fmt.Errorf("unknown theme %q (known: %s)", name, strings.Join(s.Names(), ", "))
	}
	all := s.All()
	if s.HasUser() {
		all = slices.DeleteFunc(all, func(t Theme) bool { return t.Source == "builtin" })
	}
	if len(all) == 0 {
		return Theme{}, errors.New("no themes")
	}
	last := func(t Theme) int { // how recent its last use is: -1 never
		for i, e := range history {
			if strings.EqualFold(e.Theme, t.Name) {
				return len(history) - i
			}
		}
		return -1
	}
	best := all[0]
	for _, t := range all[1:] {
		if last(t) < last(best) {
			best = t
		}
	}
	return best, nil
}

// Cast chooses n characters of t: those named first (each must be one of
// the theme's), then the theme's others in order, those the history used
// least recently preferred. Fewer than n come back when the theme has
// fewer.
func Cast(t Theme, named []string, n int, history []Entry) ([]Character, error) {
	var out []Character
	has := func(c Character) bool {
		return slices.ContainsFunc(out, func(o Character) bool { return o.Name == c.Name })
	}
	for _, nm := range named {
		if strings.TrimSpace(nm) == "" {
			continue
		}
		c, ok := t.Character(nm)
		if !ok {
			var names []string
			for _, c := range t.Characters {
				names = append(names, c.Name)
			}
			return nil, fmt.Errorf("theme %s has no character %q (it has: %s)", t.Name, nm, strings.Join(names, ", "))
		}
		if !has(c) {
			out = append(out, c)
		}
	}
	used := map[string]int{} // name -> recency, higher is more recent
	for i, e := range history {
		for _, c := range e.Characters {
			if _, ok := used[strings.ToLower(c)]; !ok {
				used[strings.ToLower(c)] = len(history) - i
			}
		}
	}
	rest := slices.Clone(t.Characters)
	sort.SliceStable(rest, func(i, j int) bool {
		return used[strings.ToLower(rest[i].Name)] < used[strings.ToLower(rest[j].Name)]
	})
	for _, c := range rest {
		if len(out) >= n {
			break
		}
		if !has(c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// HasUser reports whether the set has themes of the workspace's own (not
// only the built-in example).
func (s *Set) HasUser() bool {
	for _, t := range s.All() {
		if t.Source != "builtin" {
			return true
		}
	}
	return false
}
