// Package guard is the artifact guard: a list of words (persona names, a
// client's code name) that must never reach what the team leaves behind,
// the files it writes and its commit messages. Writes, edits and `git
// commit` through bash that would add one are refused, naming the word.
// Which calls it reads, and how, follows the kind their tool declares
// (edit, execute, …), so a tool it has never heard of (an MCP tool, of
// network or unknown kind) is refused on any listed word in its input.
//
// It reads the workspace only to see a file's old content and a commit
// message file; it must never depend on teams.
package guard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

// ErrListedWord is wrapped by every refusal.
var ErrListedWord = errors.New("artifact guard")

// maxMessageFile bounds how much of a commit message file is read.
const maxMessageFile = 1 << 20

// Guard checks writes against a word list. A nil or empty Guard allows
// everything.
type Guard struct {
	words  []string
	exempt []string

	// run are the words of the running team (its personas and theme),
	// added at TeamCreate and taken off at TeamDelete; runMu guards it, as
	// every agent's gate reads it while the lead's tools change it.
	runMu sync.RWMutex
	run   []string
}

// DefaultExempt are the operational guides seed 004 lets name the
// characters, since they hold the rules of playing them: CLAUDE.md, the
// team specs and the themes themselves.
var DefaultExempt = []string{"CLAUDE.md", "**/CLAUDE.md", ".claude/team-themes/**", "docs/specs/agentic/teams/**"}

// New returns a guard for words (blank ones are dropped); exempt are
// workspace-relative doublestar globs of files it leaves alone (a team's
// operating guide that must name the personas), added to DefaultExempt.
// An invalid glob is an error naming it.
func New(words, exempt []string) (*Guard, error) {
	g := &Guard{}
	for _, w := range words {
		if w = strings.TrimSpace(w); w != "" {
			g.words = append(g.words, w)
		}
	}
	for _, e := range append(slices.Clone(DefaultExempt), exempt...) {
		e = strings.TrimPrefix(strings.TrimSpace(e), "./")
		if !doublestar.ValidatePattern(e) {
			return nil, fmt.Errorf("artifact guard: exempt pattern %q is not a valid glob", e)
		}
		g.exempt = append(g.exempt, e)
	}
	return g, nil
}

// SetRunWords replaces the running team's words (persona names, theme
// words): they are refused as the listed words are, until the next call
// (nil: the team is gone). A nil guard ignores them.
func (g *Guard) SetRunWords(words []string) {
	if g == nil {
		return
	}
	var run []string
	for _, w := range words {
		if w = strings.TrimSpace(w); w != "" && !slices.Contains(run, w) {
			run = append(run, w)
		}
	}
	g.runMu.Lock()
	g.run = run
	g.runMu.Unlock()
}

// RunWords returns the running team's words.
func (g *Guard) RunWords() []string {
	if g == nil {
		return nil
	}
	g.runMu.RLock()
	defer g.runMu.RUnlock()
	return slices.Clone(g.run)
}

// all is every word the guard refuses now: the listed ones, then the
// running team's.
func (g *Guard) all() []string {
	if g == nil {
		return nil
	}
	g.runMu.RLock()
	defer g.runMu.RUnlock()
	if len(g.run) == 0 {
		return g.words
	}
	return append(slices.Clone(g.words), g.run...)
}

// Empty reports whether the guard has no words, listed or of the running
// team.
func (g *Guard) Empty() bool { return len(g.all()) == 0 }

// Find returns the words text contains, each once, in list order.
func (g *Guard) Find(text string) []string {
	var out []string
	for _, w := range g.all() {
		if count(text, w) > 0 {
			out = append(out, w)
		}
	}
	return out
}

// added returns the first word newText has more often than oldText.
func (g *Guard) added(newText, oldText string) (string, bool) {
	for _, w := range g.all() {
		if count(newText, w) > count(oldText, w) {
			return w, true
		}
	}
	return "", false
}

// why says where a refused word comes from.
func (g *Guard) why(w string) string {
	if g != nil && slices.Contains(g.words, w) {
		return "a word listed in artifactGuard.words"
	}
	return "a persona name or theme word of the running team"
}

func (g *Guard) exempted(path string) bool {
	p := filepath.ToSlash(filepath.Clean(path))
	for _, e := range g.exempt {
		if ok, _ := doublestar.Match(e, p); ok {
			return true
		}
	}
	return false
}

// CheckWrite refuses newContent for path when it adds a listed word to
// oldContent (the file's content before, "" for a new file).
func (g *Guard) CheckWrite(path, newContent, oldContent string) error {
	if g.Empty() || g.exempted(path) {
		return nil
	}
	if w, ok := g.added(newContent, oldContent); ok {
		return fmt.Errorf("%w: %s would contain %q, %s; files the team writes must not contain it", ErrListedWord, path, w, g.why(w))
	}
	return nil
}

// CheckEdit refuses an edit of path whose replacement adds a listed word.
func (g *Guard) CheckEdit(path, oldString, newString string) error {
	if g.Empty() || g.exempted(path) {
		return nil
	}
	if w, ok := g.added(newString, oldString); ok {
		return fmt.Errorf("%w: the edit of %s would add %q, %s; files the team writes must not contain it", ErrListedWord, path, w, g.why(w))
	}
	return nil
}

// ReadFile reads a workspace file for CheckBash (a commit message given
// with -F); it returns fs.ErrNotExist for a missing file.
type ReadFile func(path string) (string, error)

// CheckBash refuses a command that runs `git commit` with a message (-m,
// --message, -F/--file, or a message on stdin with -F -) holding a listed
// word. read, which may be nil, reads a message file.
func (g *Guard) CheckBash(command string, read ReadFile) error {
	if g.Empty() {
		return nil
	}
	for _, words := range permission.SimpleCommands(command) {
		msgs, files, ok := commitMessages(words)
		if !ok {
			continue
		}
		for _, m := range msgs {
			if m == "" {
				// A message made at run time ("$(cat <<EOF …)"): what it
				// will say is somewhere on the line.
				m = command
			}
			if w := g.Find(m); len(w) > 0 {
				return g.commitErr(w[0])
			}
		}
		for _, f := range files {
			if f == "-" {
				// The message comes on stdin: a here-document or a pipe
				// somewhere on the line.
				if w := g.Find(command); len(w) > 0 {
					return g.commitErr(w[0])
				}
				continue
			}
			if read == nil {
				continue
			}
			text, err := read(f)
			if err != nil {
				continue // git itself will fail on a missing file
			}
			if w := g.Find(text); len(w) > 0 {
				return g.commitErr(w[0])
			}
		}
	}
	return nil
}

func (g *Guard) commitErr(w string) error {
	return fmt.Errorf("%w: the commit message would contain %q, %s; commit messages must not contain it", ErrListedWord, w, g.why(w))
}

// commitMessages finds `git [global options] commit ...` in words and
// returns its message arguments and message files.
func commitMessages(words []string) (msgs, files []string, ok bool) {
	i := 0
	if len(words) == 0 || filepath.Base(words[0]) != "git" {
		return nil, nil, false
	}
	for i = 1; i < len(words); i++ {
		w := words[i]
		if w == "-C" || w == "-c" || w == "--git-dir" || w == "--work-tree" || w == "--namespace" {
			i++
			continue
		}
		if strings.HasPrefix(w, "-") {
			continue
		}
		break
	}
	if i >= len(words) || words[i] != "commit" {
		return nil, nil, false
	}
	args := words[i+1:]
	for j := 0; j < len(args); j++ {
		a := args[j]
		next := func() (string, bool) {
			if j+1 < len(args) {
				j++
				return args[j], true
			}
			return "", false
		}
		switch {
		case a == "--":
			return msgs, files, true
		case a == "--message" || a == "--file":
			if v, ok := next(); ok {
				if a == "--message" {
					msgs = append(msgs, v)
				} else {
					files = append(files, v)
				}
			}
		case strings.HasPrefix(a, "--message="):
			msgs = append(msgs, strings.TrimPrefix(a, "--message="))
		case strings.HasPrefix(a, "--file="):
			files = append(files, strings.TrimPrefix(a, "--file="))
		case strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(a) > 1:
			// A cluster of short options: -am "msg", -m"msg", -F file.
			for k := 1; k < len(a); k++ {
				if a[k] != 'm' && a[k] != 'F' {
					continue
				}
				v := a[k+1:]
				if v == "" {
					v, _ = next()
				}
				if a[k] == 'm' {
					msgs = append(msgs, v)
				} else {
					files = append(files, v)
				}
				break
			}
		}
	}
	return msgs, files, true
}

// count counts whole-word, case-insensitive occurrences of word in text.
// A word edge made of a letter of a script written without spaces (Han,
// kana, Hangul, Thai) needs no boundary there.
func count(text, word string) int {
	if word == "" {
		return 0
	}
	lt, lw := strings.ToLower(text), strings.ToLower(word)
	first, _ := utf8.DecodeRuneInString(lw)
	last, _ := utf8.DecodeLastRuneInString(lw)
	needStart, needEnd := wordRune(first) && !unspaced(first), wordRune(last) && !unspaced(last)
	n := 0
	for off := 0; off <= len(lt); {
		i := strings.Index(lt[off:], lw)
		if i < 0 {
			break
		}
		start, end := off+i, off+i+len(lw)
		before, _ := utf8.DecodeLastRuneInString(lt[:start])
		after, _ := utf8.DecodeRuneInString(lt[end:])
		if (!needStart || start == 0 || !wordRune(before)) && (!needEnd || end == len(lt) || !wordRune(after)) {
			n++
			off = end
			continue
		}
		_, size := utf8.DecodeRuneInString(lt[start:])
		off = start + size
	}
	return n
}

func wordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }

func unspaced(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul, unicode.Thai)
}

// Gate returns an agent.Gate that refuses the calls the guard refuses
// (CheckCall), then defers to next (nil: allow). The workspace is where
// old contents and message files are read.
func (g *Guard) Gate(ws *tool.Workspace, next agent.Gate) agent.Gate {
	return func(ctx context.Context, call agent.Call) agent.Decision {
		if err := g.CheckCall(ws, call); err != nil {
			return agent.Decision{Reason: err.Error()}
		}
		if next == nil {
			return agent.Decision{Allow: true}
		}
		return next(ctx, call)
	}
}

// CheckCall checks one tool call by what its tool declares it does
// (call.Kind): an edit is checked on what it writes (a whole file's
// content, or an edit's replacement); a command on the commit messages it
// gives; a network call, and a tool of unknown kind, on every string of
// its input, since whatever it sends may be left behind somewhere. Reads
// and management (messages and tasks stay in .troupe) pass.
func (g *Guard) CheckCall(ws *tool.Workspace, call agent.Call) error {
	if g.Empty() {
		return nil
	}
	var in struct {
		Path      string  `json:"path"`
		Content   *string `json:"content"`
		OldString string  `json:"old_string"`
		NewString *string `json:"new_string"`
		Command   *string `json:"command"`
	}
	if json.Unmarshal(call.Input, &in) != nil {
		return nil // the tool refuses bad input itself
	}
	rel := in.Path
	var place *tool.Place
	if ws != nil {
		// An additional directory's file is named by its absolute path
		// (exemptions are workspace-relative) and read through its root.
		if p, err := ws.Locate(in.Path); err == nil {
			place, rel = &p, p.Show(p.Rel)
		}
	}
	switch call.Kind {
	case kind.Read, kind.Manage:
		return nil
	case kind.Edit:
		switch {
		case in.Content != nil:
			old := ""
			if place != nil {
				old, _ = readRoot(place.Root(), place.Rel)
			}
			return g.CheckWrite(rel, *in.Content, old)
		case in.NewString != nil:
			return g.CheckEdit(rel, in.OldString, *in.NewString)
		case rel != "" && g.exempted(rel):
			return nil
		}
	case kind.Execute:
		if in.Command != nil {
			return g.CheckBash(*in.Command, func(p string) (string, error) {
				if ws == nil {
					return "", fs.ErrNotExist
				}
				r, err := ws.Resolve(p)
				if err != nil {
					return "", err
				}
				return readWS(ws, r)
			})
		}
	}
	return g.checkInput(call)
}

// checkInput refuses a call whose input holds a listed word in any of its
// strings: what the guard does with a tool whose input it cannot read
// field by field.
func (g *Guard) checkInput(call agent.Call) error {
	var v any
	if json.Unmarshal(call.Input, &v) != nil {
		return nil
	}
	var text strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			text.WriteString(v)
			text.WriteByte('\n')
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
	if w := g.Find(text.String()); len(w) > 0 {
		return fmt.Errorf("%w: the input of %s (a tool of kind %s) contains %q, %s; what the team sends or leaves behind must not contain it", ErrListedWord, call.Name, call.Kind, w[0], g.why(w[0]))
	}
	return nil
}

func readWS(ws *tool.Workspace, rel string) (string, error) {
	if ws == nil || rel == "" {
		return "", fs.ErrNotExist
	}
	return readRoot(ws.Root(), rel)
}

func readRoot(root *os.Root, rel string) (string, error) {
	f, err := root.Open(rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMessageFile*64))
	return string(b), err
}

// Scan limits: a command's changes are looked for in at most this many
// entries of the workspace, in files of at most this size.
const (
	maxScanEntries = 50_000
	maxScanFile    = 1 << 20
)

// mtimeSlack allows for the file system's clock, which is coarser than the
// one a call's start is taken from (a kernel tick, a few milliseconds).
const mtimeSlack = 10 * time.Millisecond

// ScanChanged looks, after a bash command, at the workspace's files changed
// since it started (version control and troupe state left out) and returns
// a message for each one that now holds a listed word. A command's writes
// cannot be refused before it runs; this is how the guard sees them.
func (g *Guard) ScanChanged(ctx context.Context, ws *tool.Workspace, since time.Time) []string {
	if g.Empty() || ws == nil {
		return nil
	}
	var found []string
	seen := 0
	since = since.Add(-mtimeSlack)
	_ = fs.WalkDir(ws.Root().FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		seen++
		if seen > maxScanEntries || ctx.Err() != nil {
			return fs.SkipAll
		}
		if d.IsDir() {
			if n := d.Name(); rel != "." && (n == ".git" || n == ".troupe") {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || g.exempted(rel) {
			return nil
		}
		fi, err := d.Info()
		if err != nil || fi.ModTime().Before(since) || fi.Size() > maxScanFile {
			return nil
		}
		text, err := readWS(ws, rel)
		if err != nil {
			return nil
		}
		if w := g.Find(text); len(w) > 0 {
			found = append(found, fmt.Sprintf("%s: %s now contains %q, %s; files the team writes must not contain it: remove it", ErrListedWord, rel, w[0], g.why(w[0])))
		}
		return nil
	})
	return found
}

// AfterBash is an agent's AfterTool for the guard: after each call that may
// have run commands (kind execute, or unknown: a tool that has not said
// what it does may do anything) it reports, in the call's result, the
// changed files that now hold a listed word, and marks the result an error
// so the model acts on it.
//
// A guard with no words yet still gives one (nil only for a nil guard):
// a team's persona names may be added after the agent is made.
func (g *Guard) AfterBash(ws *tool.Workspace) func(ctx context.Context, call agent.Call, res *tool.Result) {
	if g == nil {
		return nil
	}
	return func(ctx context.Context, call agent.Call, res *tool.Result) {
		if g.Empty() {
			return
		}
		if call.Kind != kind.Execute && call.Kind != kind.Unknown || call.Started.IsZero() {
			return
		}
		if found := g.ScanChanged(ctx, ws, call.Started); len(found) > 0 {
			res.Content = strings.TrimRight(res.Content, "\n") + "\n\n" + strings.Join(found, "\n")
			res.IsError = true
		}
	}
}
