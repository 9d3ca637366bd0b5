package subagent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/troupe-dev/troupe/internal/skill"
	"github.com/troupe-dev/troupe/internal/text"
	"github.com/troupe-dev/troupe/internal/todo"
)

// Definition is a subagent type written as Claude Code writes one: a
// markdown file in .claude/agents/ or ~/.claude/agents/ whose front matter
// gives its name, description, tools and model, and whose body is its
// system prompt.
type Definition struct {
	Name        string
	Description string
	// Prompt is the body: the subagent's instructions.
	Prompt string
	// Tools are the troupe tools it is given, in the order offered; nil
	// means every tool of a general-purpose subagent.
	Tools []string
	// AllMCP says the file lists no tools, so the type gets every MCP tool
	// its parent has (Runner.Extra) but those DisallowedMCP names; else it
	// gets the MCP tools Tools names.
	AllMCP bool
	// DisallowedMCP are the MCP tools or servers (mcp__github) its
	// disallowedTools names.
	DisallowedMCP []string
	// Model is the front matter's model: "" or "inherit" for the parent's,
	// an alias (ModelAliases) or a model id.
	Model string
	// MaxTurns caps its model calls (0: the Runner's cap).
	MaxTurns int
	// Path is the file it was read from.
	Path string
}

// ModelAliases are the model names Claude Code's agent files use for a
// family; the Runner's ResolveModel may replace them.
var ModelAliases = map[string]string{
	"sonnet": "claude-sonnet-4-5",
	"opus":   "claude-opus-4-5",
	"haiku":  "claude-haiku-4-5",
}

// claudeTools maps Claude Code's tool names to the tools a subagent can be
// given. Tools troupe's subagents lack (WebFetch, NotebookEdit, …) are
// reported and left out.
var claudeTools = map[string]string{
	"Bash": "bash", "Read": "read_file", "Write": "write_file", "Edit": "edit_file", "MultiEdit": "edit_file",
	"Glob": "glob", "Grep": "grep", "LS": "glob", "TodoWrite": todo.ToolName,
}

// namePattern is what an agent type's name must match (Claude Code:
// lowercase letters and hyphens).
var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`) })

// Options adjusts Discover. The zero value reads the default places.
type Options struct {
	// ClaudeDir replaces the user's Claude Code directory
	// ($CLAUDE_CONFIG_DIR, else ~/.claude), whose agents/ is read.
	ClaudeDir string
	// NoUser leaves the user's agents out.
	NoUser bool
}

// Warning is an agent file that was skipped or partly used, and why.
type Warning struct {
	Path string
	Err  error
}

func (w Warning) String() string { return w.Path + ": " + w.Err.Error() }

// ErrInvalidAgent is wrapped by every reason an agent file is refused.
var ErrInvalidAgent = errors.New("invalid agent definition")

// Dirs are the folders Discover reads, the project's first: as in Claude
// Code, a project agent wins over a user agent of the same name.
func Dirs(workspace string, opts Options) []string {
	dirs := []string{filepath.Join(workspace, ".claude", "agents")}
	if opts.NoUser {
		return dirs
	}
	d := opts.ClaudeDir
	if d == "" {
		if env := os.Getenv("CLAUDE_CONFIG_DIR"); env != "" {
			d = env
		} else if h, err := os.UserHomeDir(); err == nil {
			d = filepath.Join(h, ".claude")
		}
	}
	if d != "" {
		dirs = append(dirs, filepath.Join(d, "agents"))
	}
	return dirs
}

// Catalog is the agent types found by Discover. A nil *Catalog is empty. It
// is never changed after Discover returns, so it is safe for concurrent use.
type Catalog struct {
	byName map[string]Definition
	names  []string // sorted
}

// Discover reads the *.md files of Dirs (subfolders included). A file that
// cannot be used is skipped with a Warning; a name already taken, by an
// earlier file or by a built-in type, too.
func Discover(workspace string, opts Options) (*Catalog, []Warning) {
	c := &Catalog{byName: map[string]Definition{}}
	var warns []Warning
	for _, dir := range Dirs(workspace, opts) {
		found, err := skill.MarkdownFiles(dir)
		if err != nil {
			warns = append(warns, Warning{Path: dir, Err: err})
		}
		for _, path := range found {
			data, err := os.ReadFile(path)
			if err != nil {
				warns = append(warns, Warning{Path: path, Err: err})
				continue
			}
			def, notes, err := ParseDefinition(data, strings.TrimSuffix(filepath.Base(path), ".md"))
			for _, n := range notes {
				warns = append(warns, Warning{Path: path, Err: errors.New(n)})
			}
			if err != nil {
				warns = append(warns, Warning{Path: path, Err: err})
				continue
			}
			def.Path = path
			if _, builtin := resolve(def.Name); builtin {
				warns = append(warns, Warning{Path: path, Err: fmt.Errorf("%w: %q is a built-in type; this file is ignored", ErrInvalidAgent, def.Name)})
				continue
			}
			if prev, ok := c.byName[def.Name]; ok {
				warns = append(warns, Warning{Path: path, Err: fmt.Errorf("%w: %q is already defined by %s, which takes precedence", ErrInvalidAgent, def.Name, prev.Path)})
				continue
			}
			c.byName[def.Name] = def
			c.names = append(c.names, def.Name)
		}
	}
	sort.Strings(c.names)
	return c, warns
}

// Names returns the custom types' names, sorted.
func (c *Catalog) Names() []string {
	if c == nil {
		return nil
	}
	return slices.Clone(c.names)
}

// Get returns the named type.
func (c *Catalog) Get(name string) (Definition, bool) {
	if c == nil {
		return Definition{}, false
	}
	d, ok := c.byName[name]
	return d, ok
}

// Prompt tells the parent which subagent types it may start with the Task
// tool, one line each; "" when there are no custom types.
func (c *Catalog) Prompt() string {
	if c == nil || len(c.names) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("<available-agents>\n")
	b.WriteString("Besides explore (read-only) and general-purpose, the Task tool's subagent_type may name one of these project agents; use one when the work matches its description.\n")
	for _, n := range c.names {
		fmt.Fprintf(&b, "- %s: %s\n", n, text.OneLine(c.byName[n].Description, 250))
	}
	b.WriteString("</available-agents>")
	return b.String()
}

// agentFront is the front matter of an agent file.
type agentFront struct {
	Name            string `yaml:"name"`
	Description     string `yaml:"description"`
	Tools           any    `yaml:"tools"`
	DisallowedTools any    `yaml:"disallowedTools"`
	Model           string `yaml:"model"`
	MaxTurns        int    `yaml:"maxTurns"`
}

// ParseDefinition reads an agent file. name is used when the front matter
// names none (the file's base name). notes are things Claude Code does that
// troupe does not (a tool it lacks), which do not stop the type loading.
func ParseDefinition(data []byte, name string) (Definition, []string, error) {
	s := strings.TrimPrefix(string(data), "\ufeff")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	first, rest, ok := strings.Cut(s, "\n")
	if strings.TrimRight(first, " \t") != "---" || !ok {
		return Definition{}, nil, fmt.Errorf("%w: no front matter (the file must begin with a --- line)", ErrInvalidAgent)
	}
	front, body, closed := "", "", false
	for pos := 0; ; {
		line, after, more := strings.Cut(rest[pos:], "\n")
		if strings.TrimRight(line, " \t") == "---" {
			front, body, closed = rest[:pos], after, true
			break
		}
		if !more {
			break
		}
		pos += len(line) + 1
	}
	if !closed {
		return Definition{}, nil, fmt.Errorf("%w: front matter is not closed by a --- line", ErrInvalidAgent)
	}
	var fm agentFront
	if err := yaml.Unmarshal([]byte(front), &fm); err != nil {
		return Definition{}, nil, fmt.Errorf("%w: front matter: %s", ErrInvalidAgent, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	def := Definition{
		Name:        strings.TrimSpace(fm.Name),
		Description: strings.TrimSpace(fm.Description),
		Prompt:      strings.TrimSpace(body),
		Model:       strings.TrimSpace(fm.Model),
		MaxTurns:    fm.MaxTurns,
	}
	if def.Name == "" {
		def.Name = name
	}
	switch {
	case !nameRE().MatchString(def.Name):
		return Definition{}, nil, fmt.Errorf("%w: name %q: use lowercase letters, digits and hyphens", ErrInvalidAgent, def.Name)
	case def.Description == "":
		return Definition{}, nil, fmt.Errorf("%w: no description (it tells the parent when to use the agent)", ErrInvalidAgent)
	case def.MaxTurns < 0:
		return Definition{}, nil, fmt.Errorf("%w: maxTurns %d: want a positive number", ErrInvalidAgent, def.MaxTurns)
	}
	var notes []string
	general := typeTools(General)
	allowed := general
	if fm.Tools != nil {
		allowed = []string{}
		for _, t := range toolList(fm.Tools) {
			mapped, known := mapTool(t)
			if !known {
				notes = append(notes, fmt.Sprintf("tool %q is not available to troupe's subagents; left out", t))
				continue
			}
			if mapped != "" && !slices.Contains(allowed, mapped) {
				allowed = append(allowed, mapped)
			}
		}
	}
	def.AllMCP = fm.Tools == nil
	for _, t := range toolList(fm.DisallowedTools) {
		if strings.HasPrefix(t, "mcp__") {
			def.DisallowedMCP = append(def.DisallowedMCP, t)
		}
		if mapped, known := mapTool(t); known && mapped != "" {
			allowed = slices.DeleteFunc(slices.Clone(allowed), func(x string) bool { return x == mapped })
		}
	}
	if fm.Tools != nil || fm.DisallowedTools != nil {
		// Offer them in the general type's order, whatever the file's.
		def.Tools = []string{}
		for _, t := range general {
			if slices.Contains(allowed, t) {
				def.Tools = append(def.Tools, t)
			}
		}
		for _, t := range allowed {
			if strings.HasPrefix(t, "mcp__") {
				def.Tools = append(def.Tools, t)
			}
		}
	}
	return def, notes, nil
}

// toolList reads a tools field: a list, or one comma-separated string.
func toolList(v any) []string {
	var raw []string
	switch v := v.(type) {
	case string:
		raw = strings.Split(v, ",")
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				raw = append(raw, s)
			}
		}
	}
	var out []string
	for _, t := range raw {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// mapTool maps a tool named in an agent file to a subagent tool. Agent and
// Task (no recursion: subagents never start subagents) map to "" and are
// known; an unknown tool is not known.
func mapTool(t string) (string, bool) {
	base, _, _ := strings.Cut(t, "(") // Bash(git:*), Agent(x)
	base = strings.TrimSpace(base)
	if m, ok := claudeTools[base]; ok {
		return m, true
	}
	if strings.HasPrefix(base, "mcp__") {
		return base, true // an MCP server's tool: given if the parent has it
	}
	if base == "Agent" || base == "Task" {
		return "", true
	}
	if slices.Contains(typeTools(General), base) {
		return base, true // troupe's own names
	}
	return "", false
}
