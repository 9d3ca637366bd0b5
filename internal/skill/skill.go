// Package skill finds SKILL.md files (instructions for a kind of work, with
// a name and a description in YAML front matter), offers their names and
// descriptions to a model through the system prompt, and loads a skill's
// body when the model asks for it with the Skill tool. Claude Code's
// commands (.claude/commands/*.md, ~/.claude/commands/*.md) are skills too,
// and any skill can be typed as "/name args" (Expand).
//
// It reads files only; it must never depend on agents, tools, teams or the
// store.
package skill

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/troupe-dev/troupe/internal/text"
)

// MaxFileSize is the largest SKILL.md that is read. A skill body goes into
// the model's context whole, so a bigger file is a mistake, not a skill.
const MaxFileSize = 256 << 10

// maxPromptDescription caps a description in Prompt, which every request
// carries; the full description is still in Skill.Description.
const maxPromptDescription = 250

// Skill is one parsed SKILL.md.
type Skill struct {
	// Name and Description come from the front matter.
	Name        string
	Description string
	// Body is the markdown after the front matter, without surrounding
	// blank lines.
	Body string
	// Path is the absolute path of the SKILL.md.
	Path string
	// Dir is the skill's directory as the model should see it: relative
	// to the workspace when inside it, absolute otherwise. Skills often
	// refer to files next to them ("run scripts/fill.py").
	Dir string
	// ArgumentHint is the front matter's argument-hint ("[issue]"), shown
	// beside the command in the UI.
	ArgumentHint string
	// UserOnly is disable-model-invocation: the skill is typed by the user
	// as a command and never offered to the model.
	UserOnly bool
	// Command says it came from a commands folder rather than a SKILL.md.
	Command bool
	// Arguments are the names of the positional arguments ($name in the
	// body is the argument at that place).
	Arguments []string
}

// Warning is a SKILL.md (or skills directory) that was skipped, and why.
type Warning struct {
	Path string
	Err  error
}

func (w Warning) String() string { return w.Path + ": " + w.Err.Error() }

// Options adjusts Discover. The zero value searches every default place.
type Options struct {
	// UserDir replaces the user's skills directory,
	// os.UserConfigDir()/troupe/skills. Tests point it at a temporary
	// directory.
	UserDir string
	// ClaudeDir replaces the user's Claude Code directory ($CLAUDE_CONFIG_DIR,
	// else ~/.claude), whose skills/ and commands/ are read.
	ClaudeDir string
	// NoUser leaves the user's directories out.
	NoUser bool
}

func (o Options) claudeDir() string {
	if o.ClaudeDir != "" {
		return o.ClaudeDir
	}
	if d := os.Getenv("CLAUDE_CONFIG_DIR"); d != "" {
		return d
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".claude")
	}
	return ""
}

// CommandDirs returns the folders of Claude Code commands Discover reads,
// highest precedence first: the workspace's .claude/commands, then the
// user's. A command is <dir>/<name>.md, or deeper in a subfolder (which
// only groups files: the name is still the file's).
func CommandDirs(workspace string, opts Options) []string {
	dirs := []string{filepath.Join(absDir(workspace), ".claude", "commands")}
	if !opts.NoUser {
		if d := opts.claudeDir(); d != "" {
			dirs = append(dirs, filepath.Join(absDir(d), "commands"))
		}
	}
	return dirs
}

// Dirs returns the directories Discover searches, highest precedence
// first: the workspace's .troupe/skills, skills and .claude/skills, then the
// user's troupe directory and ~/.claude/skills. Skills live one level below,
// in <dir>/<skill>/SKILL.md.
func Dirs(workspace string, opts Options) []string {
	ws := absDir(workspace)
	dirs := []string{
		filepath.Join(ws, ".troupe", "skills"),
		filepath.Join(ws, "skills"),
		filepath.Join(ws, ".claude", "skills"),
	}
	if opts.NoUser {
		return dirs
	}
	user := opts.UserDir
	if user == "" {
		if cfg, err := os.UserConfigDir(); err == nil {
			user = filepath.Join(cfg, "troupe", "skills")
		}
	}
	if user != "" {
		dirs = append(dirs, absDir(user))
	}
	if d := opts.claudeDir(); d != "" {
		dirs = append(dirs, filepath.Join(absDir(d), "skills"))
	}
	return dirs
}

// Discover finds the skills of workspace and of the user. A file that cannot
// be used is skipped with a Warning naming it and the reason; a directory
// without a SKILL.md is skipped silently, since a project's skills/ folder
// may hold other things. When two skills share a name, the one from the
// earlier directory of Dirs wins (within a directory, the first in
// lexical order of the subdirectory names) and the other gets a Warning.
// The result is the same for the same files, whatever the run.
func Discover(workspace string, opts Options) (*Set, []Warning) {
	ws := absDir(workspace)
	set := &Set{byName: map[string]*Skill{}}
	var warns []Warning
	for _, dir := range Dirs(ws, opts) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			// Absent, or a file that happens to be called "skills":
			// nothing to say. Present but unreadable: worth a warning.
			if isDir(dir) {
				warns = append(warns, Warning{Path: dir, Err: err})
			}
			continue
		}
		for _, e := range entries { // ReadDir sorts by name
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			if info, err := os.Stat(filepath.Join(dir, e.Name())); err != nil || !info.IsDir() {
				continue // a plain file, or a broken link
			}
			path := filepath.Join(dir, e.Name(), "SKILL.md")
			sk, err := readSkill(path, e.Name())
			if sk == nil && err == nil {
				continue
			}
			if err != nil {
				warns = append(warns, Warning{Path: path, Err: err})
				continue
			}
			if prev, ok := set.byName[sk.Name]; ok {
				warns = append(warns, Warning{Path: path, Err: fmt.Errorf("%w %q: already defined by %s, which takes precedence", ErrDuplicate, sk.Name, prev.Path)})
				continue
			}
			sk.Path = path
			sk.Dir = displayDir(ws, filepath.Dir(path))
			set.byName[sk.Name] = sk
			set.names = append(set.names, sk.Name)
		}
	}
	// Commands come after skills: a skill of the same name wins, as in
	// Claude Code.
	for _, dir := range CommandDirs(ws, opts) {
		found, err := MarkdownFiles(dir)
		if err != nil {
			warns = append(warns, Warning{Path: dir, Err: err})
		}
		for _, path := range found {
			sk, err := readSkill(path, strings.TrimSuffix(filepath.Base(path), ".md"))
			if sk == nil && err == nil {
				continue
			}
			if err != nil {
				warns = append(warns, Warning{Path: path, Err: err})
				continue
			}
			if prev, ok := set.byName[sk.Name]; ok {
				warns = append(warns, Warning{Path: path, Err: fmt.Errorf("%w %q: already defined by %s, which takes precedence", ErrDuplicate, sk.Name, prev.Path)})
				continue
			}
			sk.Path, sk.Command = path, true
			sk.Dir = displayDir(ws, filepath.Dir(path))
			set.byName[sk.Name] = sk
			set.names = append(set.names, sk.Name)
		}
	}
	sort.Strings(set.names)
	return set, warns
}

// readSkill reads and parses one SKILL.md or command file, named name when
// its front matter names nothing. It returns nil and no error when there is
// no such file.
func readSkill(path, name string) (*Skill, error) {
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) || err == nil && info.IsDir() {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if info.Size() > MaxFileSize {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, info.Size(), MaxFileSize)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize { // grew since Stat
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, len(data), MaxFileSize)
	}
	sk, err := ParseNamed(data, name)
	if err != nil {
		return nil, err
	}
	return &sk, nil
}

// Set is the skills found by Discover. A nil *Set is an empty set. It is
// never changed after Discover returns, so it is safe for concurrent use.
type Set struct {
	byName map[string]*Skill
	names  []string // sorted
}

// Len returns the number of skills.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.names)
}

// Names returns the skill names in lexical order.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s.names...)
}

// Get returns the named skill.
func (s *Set) Get(name string) (Skill, bool) {
	if s == nil {
		return Skill{}, false
	}
	sk, ok := s.byName[name]
	if !ok {
		return Skill{}, false
	}
	return *sk, true
}

// Prompt returns the block of the system prompt that tells the model which
// skills exist: one line per skill, name and description on one line, in
// name order so that the prompt is byte-identical between runs. It is ""
// when there are no skills, so that the caller can leave it out.
func (s *Set) Prompt() string {
	if s.Len() == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("<available-skills>\n")
	b.WriteString("Skills are instructions for particular kinds of work. When a task matches a skill's description, load it with the Skill tool before you start, then follow it.\n")
	offered := 0
	for _, n := range s.names {
		if s.byName[n].UserOnly {
			continue
		}
		offered++
		fmt.Fprintf(&b, "- %s: %s\n", n, text.OneLine(s.byName[n].Description, maxPromptDescription))
	}
	b.WriteString("</available-skills>")
	if offered == 0 {
		return ""
	}
	return b.String()
}

// Load returns the body of the named skill wrapped for the model:
//
//	<skill name="pdf" dir=".troupe/skills/pdf">
//	...markdown...
//	</skill>
//
// dir is where the skill's own files are, for skills that refer to them.
// The body is the one read by Discover; edits made since are not seen. An
// unknown name is an error wrapping ErrUnknown that lists the known names.
func (s *Set) Load(name string) (string, error) {
	name = strings.TrimSpace(name)
	sk, ok := s.Get(name)
	if !ok {
		if s.Len() == 0 {
			return "", fmt.Errorf("%w %q: no skills are installed", ErrUnknown, name)
		}
		return "", fmt.Errorf("%w %q; the skills available are: %s", ErrUnknown, name, strings.Join(s.names, ", "))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<skill name=\"%s\" dir=\"%s\">\n", sk.Name, escapeAttr(sk.Dir))
	if sk.Body != "" {
		b.WriteString(sk.Body)
		b.WriteByte('\n')
	}
	b.WriteString("</skill>")
	return b.String(), nil
}

var attrEscaper = strings.NewReplacer(`&`, "&amp;", `"`, "&quot;", `<`, "&lt;", `>`, "&gt;", "\n", " ")

func escapeAttr(s string) string { return attrEscaper.Replace(s) }

// absDir makes dir absolute and resolves symlinks where it can, the way the
// tool workspace does, so that relative skill directories agree with the
// paths the file tools accept.
func absDir(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return filepath.Clean(dir)
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	return abs
}

func displayDir(workspace, dir string) string {
	rel, err := filepath.Rel(workspace, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return dir
	}
	return filepath.ToSlash(rel)
}

func isDir(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.IsDir()
}

// MarkdownFiles returns the *.md files under dir (its subfolders too),
// sorted, leaving out hidden files and folders: how .claude/commands and
// .claude/agents are read. A dir that does not exist has none; a folder
// that cannot be read is the error, beside what was found elsewhere.
func MarkdownFiles(dir string) ([]string, error) {
	var found []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == dir {
				return fs.SkipAll
			}
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && p != dir {
			return fs.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".md") && !strings.HasPrefix(d.Name(), ".") {
			found = append(found, p)
		}
		return nil
	})
	sort.Strings(found)
	return found, err
}
