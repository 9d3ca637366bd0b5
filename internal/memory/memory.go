// Package memory finds the project memory files (AGENTS.md, CLAUDE.md,
// TROUPE.md) that apply to a workspace and renders them for the system
// prompt: standing instructions a team writes once for every agent that
// works in the project.
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
	"strings"
	"unicode/utf8"
)

// Names are the memory file names looked for in each directory, in the
// order they are listed when a directory has several.
var Names = []string{"AGENTS.md", "CLAUDE.md", "TROUPE.md"}

// MaxFileSize is how much of one memory file goes into the prompt; every
// request carries it, so a larger file is cut with a note saying so.
const MaxFileSize = 40 << 10

// File is one memory file.
type File struct {
	// Path is absolute.
	Path    string
	Content string
}

// Find returns the memory files that apply to workspace: those in the
// workspace and in each of its parent directories, outermost first, so that
// the nearest (most specific) instructions come last in the prompt.
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
	ws, err := filepath.Abs(workspace)
	if err != nil {
		return nil, fmt.Errorf("find memory files: %w", err)
	}
	top := ""
	if home, err := os.UserHomeDir(); err == nil && within(ws, filepath.Clean(home)) {
		top = filepath.Clean(home)
	}
	return FindUpTo(ws, top)
}

// FindUpTo is Find with the outermost directory searched given: top must be
// workspace or one of its parents; "" or a directory that is neither means
// the filesystem root.
func FindUpTo(workspace, top string) ([]File, error) {
	ws, err := filepath.Abs(workspace)
	if err != nil {
		return nil, fmt.Errorf("find memory files: %w", err)
	}
	if top != "" {
		if top, err = filepath.Abs(top); err != nil || !within(ws, top) {
			top = ""
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

	var (
		files []File
		seen  []os.FileInfo // CLAUDE.md is often a link to AGENTS.md
		errs  []error
	)
	for i := len(dirs) - 1; i >= 0; i-- {
		for _, name := range Names {
			path := filepath.Join(dirs[i], name)
			f, info, err := read(path)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if info == nil || strings.TrimSpace(f.Content) == "" || sameAsAny(info, seen) {
				continue
			}
			seen = append(seen, info)
			files = append(files, f)
		}
	}
	return files, errors.Join(errs...)
}

// read reads at most MaxFileSize bytes of path. It returns a nil FileInfo and
// no error when there is no such regular file.
func read(path string) (File, os.FileInfo, error) {
	fh, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return File{}, nil, nil
	}
	if err != nil {
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
// <project-memory path="..."> element. It is "" when there are none, so that
// the caller can leave it out.
func Prompt(files []File) string {
	if len(files) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Project instructions from memory files follow, outermost directory first. Follow them; where they disagree, the later (more specific) file wins.\n")
	for _, f := range files {
		fmt.Fprintf(&b, "\n<project-memory path=\"%s\">\n%s\n</project-memory>\n", attrEscaper.Replace(f.Path), strings.TrimRight(f.Content, "\n"))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

var attrEscaper = strings.NewReplacer(`&`, "&amp;", `"`, "&quot;", `<`, "&lt;", `>`, "&gt;", "\n", " ")
