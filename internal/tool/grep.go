package tool

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"strings"
	"syscall"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

//go:embed grep.md
var grepDescription string

const (
	grepDefaultMax = 200
	grepMaxContext = 20
	// grepMaxFile is the largest file grep reads; bigger ones are skipped
	// and counted in the result.
	grepMaxFile = 20 << 20
)

type grepArgs struct {
	Pattern    string `json:"pattern" required:"true" desc:"The regular expression to search for (Go RE2 syntax)."`
	Path       string `json:"path" desc:"The file or directory to search, relative to the workspace; default the workspace itself."`
	Glob       string `json:"glob" desc:"Only search files whose name matches this glob (e.g. *.go); with a slash, it matches the path under the searched directory (e.g. internal/**/*.go)."`
	IgnoreCase bool   `json:"ignore_case" desc:"Match without regard to case."`
	OutputMode string `json:"output_mode" enum:"content|files_with_matches|count" desc:"content: matching lines as path:line:text; files_with_matches (default): paths of files that match; count: matches per file."`
	Context    int    `json:"context" desc:"Lines of context before and after each match, in content mode; at most 20."`
	MaxResults *int   `json:"max_results" desc:"At most this many lines (content) or files (other modes); default 200."`
}

type grepTool struct{}

var grepSpec = lazySpec[grepArgs]("grep", grepDescription)

func (grepTool) Spec() llm.ToolSpec { return grepSpec() }
func (grepTool) ReadOnly() bool     { return true }
func (grepTool) Kind() kind.Kind    { return kind.Read }

func (grepTool) Run(ctx context.Context, env *Env, input json.RawMessage) Result {
	args, res, ok := decodeArgs[grepArgs]("grep", input)
	if !ok {
		return res
	}
	mode := args.OutputMode
	switch mode {
	case "":
		mode = "files_with_matches"
	case "content", "files_with_matches", "count":
	default:
		return Errorf(`invalid arguments for grep: "output_mode" must be content, files_with_matches or count, got %q`, mode)
	}
	if args.Context < 0 || args.Context > grepMaxContext {
		return Errorf(`invalid arguments for grep: "context" must be between 0 and %d, got %d`, grepMaxContext, args.Context)
	}
	maxResults := grepDefaultMax
	if args.MaxResults != nil {
		maxResults = *args.MaxResults
		if maxResults < 1 {
			return Errorf(`invalid arguments for grep: "max_results" must be at least 1, got %d`, maxResults)
		}
	}
	expr := args.Pattern
	if args.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return Errorf("grep: the pattern is not a valid regular expression: %v", err)
	}
	if args.Glob != "" && !doublestar.ValidatePattern(args.Glob) {
		return Errorf("grep: glob %q is not a valid glob pattern", args.Glob)
	}
	ws, res, ok := workspaceOf(env, "grep")
	if !ok {
		return res
	}
	given := args.Path
	if given == "" {
		given = "."
	}
	place, err := ws.Locate(given)
	if err != nil {
		return Errorf("grep: %v", err)
	}
	base := place.Rel
	fi, err := place.Root().Stat(base)
	if err != nil {
		return Errorf("grep: %v", ws.Explain(given, err))
	}

	s := &grepSearch{place: place, re: re, mode: mode, context: args.Context, max: maxResults}
	if !fi.IsDir() {
		if err := s.file(base, true); err != nil {
			return Errorf("grep: %v", ws.Explain(given, err))
		}
	} else {
		err = walk(ctx, place.Root(), base, func(rel string, d fs.DirEntry) error {
			if env.hidden("grep", place.Show(rel)) {
				s.hidden++
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() || !globMatches(args.Glob, base, rel) {
				return nil
			}
			if err := s.file(rel, false); err != nil {
				return nil // vanished or unreadable: not this search's concern
			}
			if s.full {
				return fs.SkipAll
			}
			return nil
		})
		if err != nil {
			return Errorf("grep: %v", ws.Explain(given, err))
		}
	}
	return OK(s.result(args.Pattern))
}

// globMatches applies grep's glob filter: on the base name, or with a
// slash on the path below the searched directory.
func globMatches(glob, base, rel string) bool {
	if glob == "" {
		return true
	}
	if !strings.Contains(glob, "/") {
		return doublestar.MatchUnvalidated(glob, path.Base(rel))
	}
	sub := rel
	if base != "." {
		sub = strings.TrimPrefix(rel, base+"/")
	}
	return doublestar.MatchUnvalidated(glob, sub)
}

// grepSearch accumulates the results of one search.
type grepSearch struct {
	place   Place
	re      *regexp.Regexp
	mode    string
	context int
	max     int

	out      strings.Builder
	results  int // lines (content) or files (other modes) written
	files    int // files that matched
	matches  int // matching lines in all
	full     bool
	skipped  int // files too big
	hidden   int // entries a permission rule keeps out
	binaries int
}

// file searches one file. explicit says the model named it, so that a
// binary or too big file is reported rather than silently skipped.
func (s *grepSearch) file(rel string, explicit bool) error {
	// A FIFO would block the open and the read forever, a device could
	// do anything when opened: only regular files are opened, a link to
	// anything else is not followed into it, and the open itself does not
	// wait, should the file be swapped for a FIFO after the check.
	if fi, err := s.place.Root().Stat(rel); err != nil {
		return err
	} else if !fi.Mode().IsRegular() {
		return namedErrorf("%q is not a regular file", rel)
	}
	f, err := s.place.Root().OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return namedErrorf("%q is not a regular file", rel)
	}
	if fi.Size() > grepMaxFile {
		s.skipped++
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(f, grepMaxFile+1))
	if err != nil {
		return err
	}
	if isBinary(data) {
		if explicit {
			return namedErrorf("%q is a binary file", rel)
		}
		s.binaries++
		return nil
	}
	if !s.re.Match(data) {
		return nil
	}
	lines := strings.Split(string(data), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var hits []int
	for i, l := range lines {
		if s.re.MatchString(strings.TrimSuffix(l, "\r")) {
			hits = append(hits, i)
		}
	}
	if len(hits) == 0 { // the match spanned lines
		return nil
	}
	s.files++
	s.matches += len(hits)
	rel = s.place.Show(rel)
	switch s.mode {
	case "files_with_matches":
		s.emit(rel + "\n")
	case "count":
		s.emit(fmt.Sprintf("%s:%d\n", rel, len(hits)))
	case "content":
		s.content(rel, lines, hits)
	}
	return nil
}

// content writes the matching lines of one file with their context, in
// groups separated by "--" like grep -C. Only matching lines count towards
// the cap.
func (s *grepSearch) content(rel string, lines []string, hits []int) {
	isHit := make(map[int]bool, len(hits))
	for _, h := range hits {
		isHit[h] = true
	}
	if s.context > 0 && s.results > 0 && !s.full {
		s.out.WriteString("--\n")
	}
	last := -1 // last line written
	for _, h := range hits {
		if s.full {
			return
		}
		from, to := max(0, h-s.context), min(len(lines)-1, h+s.context)
		if last >= 0 && from > last+1 {
			s.out.WriteString("--\n")
		}
		for i := max(from, last+1); i <= to && !s.full; i++ {
			line := cutLine(strings.TrimSuffix(lines[i], "\r"))
			if isHit[i] {
				s.emit(fmt.Sprintf("%s:%d:%s\n", rel, i+1, line))
			} else {
				fmt.Fprintf(&s.out, "%s-%d-%s\n", rel, i+1, line)
			}
			last = i
		}
	}
}

// emit writes one result and notes when the cap is reached.
func (s *grepSearch) emit(line string) {
	if s.full {
		return
	}
	s.out.WriteString(line)
	s.results++
	if s.results >= s.max || s.out.Len() >= OutputCap {
		s.full = true
	}
}

func (s *grepSearch) result(pattern string) string {
	if s.files == 0 {
		msg := fmt.Sprintf("No matches for %q.", pattern)
		if s.skipped > 0 {
			msg += fmt.Sprintf(" (%s over 20 MB not searched)", plural(s.skipped, "file"))
		}
		return msg + hiddenNote(s.hidden)
	}
	out := s.out.String()
	if len(out) > OutputCap {
		out = out[:OutputCap]
		if i := strings.LastIndexByte(out, '\n'); i >= 0 {
			out = out[:i+1]
		}
	}
	var notes []string
	if s.full {
		notes = append(notes, "results were capped; narrow the pattern, path or glob, or raise max_results")
	}
	if s.skipped > 0 {
		notes = append(notes, fmt.Sprintf("%s over 20 MB not searched", plural(s.skipped, "file")))
	}
	if s.hidden > 0 {
		notes = append(notes, hiddenText(s.hidden))
	}
	if s.mode == "count" && !s.full {
		notes = append(notes, fmt.Sprintf("%s in %s", plural(s.matches, "matching line"), plural(s.files, "file")))
	}
	if len(notes) > 0 {
		out += "\n(" + strings.Join(notes, "; ") + ")\n"
	}
	return out
}
