package tool

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

//go:embed glob.md
var globDescription string

// special are the kinds of entries that glob does not list. Links are
// listed as links, never followed.
const special = fs.ModeNamedPipe | fs.ModeSocket | fs.ModeDevice | fs.ModeCharDevice | fs.ModeIrregular

// globCap bounds the number of paths glob returns.
const globCap = 1000

type globArgs struct {
	Pattern string `json:"pattern" required:"true" desc:"The glob pattern, e.g. **/*.go or src/**/*.{ts,tsx}."`
	Path    string `json:"path" desc:"The directory to search in, relative to the workspace; default the workspace itself."`
}

type globTool struct{}

var globSpec = lazySpec[globArgs]("glob", globDescription)

func (globTool) Spec() llm.ToolSpec { return globSpec() }
func (globTool) ReadOnly() bool     { return true }
func (globTool) Kind() kind.Kind    { return kind.Read }

func (globTool) Run(ctx context.Context, env *Env, input json.RawMessage) Result {
	args, res, ok := decodeArgs[globArgs]("glob", input)
	if !ok {
		return res
	}
	ws, res, ok := workspaceOf(env, "glob")
	if !ok {
		return res
	}
	pattern, base, place, err := ws.globPattern(args.Pattern, args.Path)
	if err != nil {
		return Errorf("glob: %v", err)
	}
	type match struct {
		rel string
		mod time.Time
	}
	var matches []match
	hidden := 0
	err = walk(ctx, place.Root(), base, func(rel string, d fs.DirEntry) error {
		if env.hidden("glob", place.Show(rel)) {
			hidden++
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || !doublestar.MatchUnvalidated(pattern, rel) {
			return nil
		}
		if d.Type()&special != 0 {
			return nil // FIFOs, sockets, devices: not files to work on
		}
		var mod time.Time
		if fi, err := d.Info(); err == nil {
			mod = fi.ModTime()
		}
		matches = append(matches, match{place.Show(rel), mod})
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Errorf("glob: %v", ws.Explain(displayBase(args.Path, place.Show(base)), err))
	}
	if len(matches) == 0 {
		return OK(fmt.Sprintf("No files match %q.%s", args.Pattern, hiddenNote(hidden)))
	}
	slices.SortStableFunc(matches, func(a, b match) int {
		if c := b.mod.Compare(a.mod); c != 0 {
			return c
		}
		return strings.Compare(a.rel, b.rel)
	})
	var b strings.Builder
	for i, m := range matches {
		if i == globCap {
			fmt.Fprintf(&b, "(showing the %d most recently modified of %d matches; use a narrower pattern or path)\n", globCap, len(matches))
			break
		}
		b.WriteString(m.rel)
		b.WriteByte('\n')
	}
	if hidden > 0 {
		b.WriteString("(" + hiddenText(hidden) + ")\n")
	}
	return OK(b.String())
}

func hiddenText(n int) string {
	return fmt.Sprintf("%s left out: a permission rule denies reading them", plural(n, "path"))
}

// hiddenNote is hiddenText as a sentence's tail, or "" when nothing was
// left out.
func hiddenNote(n int) string {
	if n == 0 {
		return ""
	}
	return " (" + hiddenText(n) + ")"
}

// globPattern turns the model's pattern and directory into a pattern over
// paths relative to the place searched (the workspace or an additional
// directory) and the directory to walk: the longest part of the pattern
// without metacharacters, so that src/**/*.go walks only src.
func (w *Workspace) globPattern(pattern, dir string) (full, base string, place Place, err error) {
	if pattern == "" {
		return "", "", Place{}, fmt.Errorf(`"pattern" is empty`)
	}
	if strings.IndexByte(pattern, 0) >= 0 {
		return "", "", Place{}, fmt.Errorf("%w: pattern %q contains a NUL byte", ErrBadPath, pattern)
	}
	if dir == "" {
		dir = "."
	}
	place, err = w.Locate(dir)
	if err != nil {
		return "", "", Place{}, err
	}
	if fi, err := place.Root().Stat(place.Rel); err != nil {
		return "", "", Place{}, w.Explain(dir, err)
	} else if !fi.IsDir() {
		return "", "", Place{}, fmt.Errorf("path %q is not a directory", dir)
	}
	relDir := place.Rel
	if filepath.IsAbs(pattern) {
		// An absolute pattern must lie inside the workspace or an
		// additional directory; its static prefix is checked like any
		// path.
		static, rest := doublestar.SplitPattern(filepath.ToSlash(pattern))
		at, err := w.Locate(static)
		if err != nil {
			return "", "", Place{}, fmt.Errorf("pattern %q: %w", pattern, err)
		}
		place, pattern, relDir = at, path.Join(filepath.ToSlash(at.Rel), rest), "."
	}
	for _, seg := range strings.Split(pattern, "/") {
		if seg == ".." {
			return "", "", Place{}, fmt.Errorf("pattern %q is %w %s: it may not contain \"..\"", pattern, ErrOutsideWorkspace, place.Dir())
		}
	}
	full = path.Join(filepath.ToSlash(relDir), pattern)
	if !doublestar.ValidatePattern(full) {
		return "", "", Place{}, fmt.Errorf("pattern %q is not a valid glob", pattern)
	}
	base, _ = doublestar.SplitPattern(full)
	if base == "" {
		base = "."
	}
	if base == ".." || strings.HasPrefix(base, "../") || path.IsAbs(base) {
		return "", "", Place{}, w.outside(pattern)
	}
	return full, base, place, nil
}

// displayBase names the searched directory in errors as the model gave it.
func displayBase(given, base string) string {
	if given != "" {
		return given
	}
	return base
}
