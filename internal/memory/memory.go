// Package memory finds the project memory files (AGENTS.md, CLAUDE.md,
// TROUPE.md and Claude Code's other memory files) that apply to a workspace
// and renders them for the system prompt: standing instructions a team
// writes once for every agent that works in the project.
//
// The order is Claude Code's, least specific first, with troupe's names
// beside Claude Code's: managed memory (/etc/claude-code/CLAUDE.md on
// Linux), the user's (~/.claude/CLAUDE.md, then ~/.claude/rules/**/*.md),
// then every directory from the outermost down to the workspace, each with
// AGENTS.md, CLAUDE.md, .claude/CLAUDE.md, .claude/rules/**/*.md, TROUPE.md
// and CLAUDE.local.md. A file's @path imports follow it (see Imports).
//
// It reads files only; it must never depend on agents, tools, teams or the
// store.
package memory

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"
)

// Names are the memory file names looked for in each directory, in the
// order they are listed when a directory has several. Claude Code's
// .claude/CLAUDE.md and .claude/rules come after CLAUDE.md, and
// CLAUDE.local.md (personal, more specific) after all of them.
var Names = []string{"AGENTS.md", "CLAUDE.md", "TROUPE.md"}

// MaxFileSize is how much of one memory file goes into the prompt; every
// request carries it, so a larger file is cut with a note saying so.
const MaxFileSize = 40 << 10

// MaxImportDepth is how many @path hops are followed from a memory file, as
// in Claude Code.
const MaxImportDepth = 5

// File is one memory file.
type File struct {
	// Path is absolute.
	Path    string
	Content string
	// ImportedBy is the file whose @path import brought this one in.
	ImportedBy string
	// Paths are the globs a .claude/rules file's "paths:" front matter
	// scopes it to (empty: it applies everywhere). Claude Code loads such a
	// rule only when files matching them are worked on; troupe loads it at
	// start, saying which files it is for.
	Paths []string
}

// Options adjusts Load. The zero value reads every default place.
//
// A project file's imports may reach the workspace, the importing chain's
// own directory and the user's Claude Code directory (the documented
// @~/.claude/my-instructions.md); anything else, ~/.ssh say, is skipped
// unless ExternalImports is set.
type Options struct {
	// Home is the user's home directory; empty means os.UserHomeDir().
	Home string
	// ClaudeDir is the user's Claude Code directory; empty means
	// $CLAUDE_CONFIG_DIR, else <Home>/.claude.
	ClaudeDir string
	// ManagedFile replaces the managed memory file of the system
	// (ManagedFile()).
	ManagedFile string
	// NoUser and NoManaged leave the user's and the managed files out.
	NoUser, NoManaged bool
	// Top is the outermost directory searched (see FindUpTo); empty means
	// the home directory when the workspace is inside it, else the root.
	Top string
	// ExternalImports lets a project file import a file outside both the
	// workspace and its own directory. Claude Code asks before it follows
	// such imports; troupe, which cannot ask at start, skips them with an
	// error unless this is set.
	ExternalImports bool
}

// ManagedFile is where the organisation's memory file lives on this system.
func ManagedFile() string {
	switch runtime.GOOS {
	case "darwin":
		return "/Library/Application Support/ClaudeCode/CLAUDE.md"
	case "windows":
		return `C:\ProgramData\ClaudeCode\CLAUDE.md`
	}
	return "/etc/claude-code/CLAUDE.md"
}

// Find returns the memory files that apply to workspace: Load with the
// default options.
//
// The walk stops at the user's home directory, included, when the workspace
// is inside it: a personal ~/AGENTS.md applies to all of one's projects,
// while /home or / belong to other people or to the system. A workspace
// outside the home directory (a container's /work, a CI checkout) is walked
// up to /. The git root plays no part: a monorepo's parent directory may well
// hold instructions that apply to it.
//
// A file that cannot be read does not hide the others: Find returns every
// file it could read, plus an error naming the ones it could not.
func Find(workspace string) ([]File, error) {
	return Load(workspace, Options{})
}

// FindUpTo returns the memory files of workspace and its parents up to top
// (included), without the user's and the managed files: top must be
// workspace or one of its parents; "" or a directory that is neither means
// the filesystem root.
func FindUpTo(workspace, top string) ([]File, error) {
	if top == "" {
		top = string(filepath.Separator)
	}
	return Load(workspace, Options{Top: top, NoUser: true, NoManaged: true})
}

// Load returns the memory files that apply to workspace, in the order of
// the package comment.
func Load(workspace string, opts Options) ([]File, error) {
	ws, err := filepath.Abs(workspace)
	if err != nil {
		return nil, fmt.Errorf("find memory files: %w", err)
	}
	home := opts.Home
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	if home != "" {
		home = filepath.Clean(home)
	}
	top := opts.Top
	if top == "" && home != "" && within(ws, home) {
		top = home
	}
	if top != "" {
		if top, err = filepath.Abs(top); err != nil || !within(ws, top) {
			top = ""
		}
	}
	l := &loader{ws: ws, home: home, external: opts.ExternalImports}

	if !opts.NoManaged {
		m := opts.ManagedFile
		if m == "" {
			m = ManagedFile()
		}
		l.add(m, false)
	}
	if !opts.NoUser {
		cd := opts.ClaudeDir
		if cd == "" {
			if d := os.Getenv("CLAUDE_CONFIG_DIR"); d != "" && opts.Home == "" {
				cd = d
			} else if home != "" {
				cd = filepath.Join(home, ".claude")
			}
		}
		l.claudeDir = cd
		if cd != "" {
			l.add(filepath.Join(cd, "CLAUDE.md"), false)
			l.rules(filepath.Join(cd, "rules"), false)
		}
	}

	var dirs []string // innermost first
	for d := ws; ; {
		dirs = append(dirs, d)
		parent := filepath.Dir(d)
		if d == top || parent == d {
			break
		}
		d = parent
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		l.add(filepath.Join(d, "AGENTS.md"), true)
		l.add(filepath.Join(d, "CLAUDE.md"), true)
		l.add(filepath.Join(d, ".claude", "CLAUDE.md"), true)
		l.rules(filepath.Join(d, ".claude", "rules"), true)
		l.add(filepath.Join(d, "TROUPE.md"), true)
		l.add(filepath.Join(d, "CLAUDE.local.md"), true)
	}
	return l.files, errors.Join(l.errs...)
}

// loader gathers files, following imports, reading each file once.
type loader struct {
	ws, home  string
	claudeDir string // the user's: imports from it are the documented personal ones
	external  bool
	files     []File
	seen      []os.FileInfo // CLAUDE.md is often a link to AGENTS.md
	errs      []error
}

// add reads path and its imports. project says it lies in the directory
// walk, whose imports are confined (Options.ExternalImports).
func (l *loader) add(path string, project bool) {
	l.addFile(path, "", project, false, filepath.Dir(path), 0, nil)
}

// addFile reads path (a rule file when rule) and, depth hops from its
// chain's first file in rootDir, its imports; chain are the files that
// imported it.
func (l *loader) addFile(path, importedBy string, project, rule bool, rootDir string, depth int, chain []os.FileInfo) {
	f, info, err := read(path)
	if err != nil {
		l.errs = append(l.errs, err)
		return
	}
	if info == nil {
		// Absent; for an import, "@alice" in prose is no import at all,
		// so there is nothing worth a warning.
		return
	}
	if sameAsAny(info, chain) {
		l.errs = append(l.errs, fmt.Errorf("memory file %s: import of %s refused: it is one of the files importing it (a cycle of %d)", importedBy, path, len(chain)))
		return
	}
	if sameAsAny(info, l.seen) {
		return
	}
	l.seen = append(l.seen, info)
	if rule {
		f.Paths, f.Content = ruleFrontMatter(f.Content)
	}
	f.ImportedBy = importedBy
	if strings.TrimSpace(f.Content) != "" {
		l.files = append(l.files, f)
	}
	chain = append(chain, info)
	for _, imp := range Imports(f.Content) {
		target := resolveImport(imp, filepath.Dir(path), l.home)
		if target == "" {
			continue
		}
		if project && !l.external && !within(target, l.ws) && !within(target, rootDir) && !within(target, l.claudeDir) {
			l.errs = append(l.errs, fmt.Errorf("memory file %s: import of %s skipped: it is outside the workspace (Claude Code asks before following it)", path, target))
			continue
		}
		if depth+1 > MaxImportDepth {
			l.errs = append(l.errs, fmt.Errorf("memory file %s: import of %s skipped: imports are followed %d hops deep at most", path, target, MaxImportDepth))
			continue
		}
		l.addFile(target, path, project, false, rootDir, depth+1, chain)
	}
}

// rules adds the *.md files under dir, recursively, in lexical order of
// their paths.
func (l *loader) rules(dir string, project bool) {
	var found []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if d.Type().IsRegular() && strings.HasSuffix(d.Name(), ".md") {
			found = append(found, p)
		} else if d.Type()&fs.ModeSymlink != 0 && strings.HasSuffix(d.Name(), ".md") {
			found = append(found, p) // a shared rule linked in
		}
		return nil
	})
	if err != nil {
		l.errs = append(l.errs, fmt.Errorf("memory rules %s: %w", dir, err))
	}
	slices.Sort(found)
	for _, p := range found {
		l.addFile(p, "", project, true, dir, 0, nil)
	}
}

// resolveImport is the file an @path names: relative to the importing
// file's directory, "~" the home directory.
func resolveImport(imp, dir, home string) string {
	switch {
	case imp == "~" || imp == "":
		return ""
	case strings.HasPrefix(imp, "~/"):
		if home == "" {
			return ""
		}
		return filepath.Join(home, imp[2:])
	case filepath.IsAbs(imp):
		return filepath.Clean(imp)
	}
	return filepath.Join(dir, imp)
}

// read reads at most MaxFileSize bytes of path. It returns a nil FileInfo and
// no error when there is no such regular file.
func read(path string) (File, os.FileInfo, error) {
	fh, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrInvalid) {
		return File{}, nil, nil
	}
	if err != nil {
		if errors.Is(err, syscall.ENOTDIR) {
			return File{}, nil, nil // a parent is a file: no such memory file
		}
		return File{}, nil, fmt.Errorf("read memory file: %w", err)
	}
	defer fh.Close()
	info, err := fh.Stat()
	if err != nil {
		return File{}, nil, fmt.Errorf("read memory file: %w", err)
	}
	if !info.Mode().IsRegular() {
		return File{}, nil, nil
	}
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileSize+1))
	if err != nil {
		return File{}, nil, fmt.Errorf("read memory file %s: %w", path, err)
	}
	content := string(data)
	if len(data) > MaxFileSize {
		cut := MaxFileSize
		for cut > 0 && !utf8.RuneStart(data[cut]) {
			cut--
		}
		size := info.Size()
		if size < int64(len(data)) {
			size = int64(len(data))
		}
		content = string(data[:cut]) + fmt.Sprintf("\n\n[truncated: %s is %d bytes; only the first %d are shown]", filepath.Base(path), size, cut)
	}
	return File{Path: path, Content: content}, info, nil
}

func sameAsAny(info os.FileInfo, seen []os.FileInfo) bool {
	for _, s := range seen {
		if os.SameFile(info, s) {
			return true
		}
	}
	return false
}

// within reports whether dir is top or lies below it.
func within(dir, top string) bool {
	rel, err := filepath.Rel(top, dir)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// Prompt renders files for the system prompt, in the order given, each in a
// <project-memory path="..."> element (with imported-by and applies-to when
// they apply). It is "" when there are none, so that the caller can leave
// it out.
func Prompt(files []File) string {
	if len(files) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Project instructions from memory files follow, outermost directory first. Follow them; where they disagree, the later (more specific) file wins.\n")
	for _, f := range files {
		fmt.Fprintf(&b, "\n<project-memory path=\"%s\"", attrEscaper.Replace(f.Path))
		if f.ImportedBy != "" {
			fmt.Fprintf(&b, " imported-by=\"%s\"", attrEscaper.Replace(f.ImportedBy))
		}
		if len(f.Paths) > 0 {
			fmt.Fprintf(&b, " applies-to=\"%s\"", attrEscaper.Replace(strings.Join(f.Paths, ", ")))
		}
		fmt.Fprintf(&b, ">\n%s\n</project-memory>\n", strings.TrimRight(f.Content, "\n"))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

var attrEscaper = strings.NewReplacer(`&`, "&amp;", `"`, "&quot;", `<`, "&lt;", `>`, "&gt;", "\n", " ")
