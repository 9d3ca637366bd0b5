package permission

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"
)

// A path rule must hold for a path as written and for the file it really
// is: a symlink inside the workspace must not reach a denied file, nor a
// hard link (a second name for the same inode).

// builtinProtected are the runtime's own files, which an agent's file
// tools never write unless an allow rule names them: its settings, its
// state, the MCP configuration and what git runs on its own.
var builtinProtected = []string{
	".troupe/**", ".troupe/settings*.json", ".claude/settings.json", ".claude/settings.local.json",
	".mcp.json", ".git/hooks/**", ".git/config",
}

// Protect adds paths that write_file, edit_file and (best effort) bash
// writes never touch, in any mode, unless an allow rule names them: the
// settings and hook scripts troupe read at start, for instance. A path is
// absolute (it may lie outside the workspace, like ~/.claude/settings.json),
// ~/-relative, or a workspace-relative glob.
func (p *Policy) Protect(paths ...string) {
	if p == nil {
		return
	}
	for _, s := range paths {
		if pat := p.protectPattern(strings.TrimSpace(s)); pat != "" {
			p.protected = append(p.protected, pat)
		}
	}
}

func (p *Policy) protectPattern(s string) string {
	if s == "" {
		return ""
	}
	if s == "~" || strings.HasPrefix(s, "~/") {
		if home() == "" {
			return ""
		}
		s = home() + s[1:]
	}
	if filepath.IsAbs(s) {
		s = p.relPath(s)
	} else {
		s = path.Clean(filepath.ToSlash(strings.TrimPrefix(s, "./")))
	}
	if !doublestar.ValidatePattern(s) {
		s = escapeGlob(s)
	}
	return s
}

func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]{}\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// protectedPatterns are the built-in set and those given to Protect.
func (p *Policy) protectedPatterns() []string {
	return append(builtinProtected[:len(builtinProtected):len(builtinProtected)], p.protected...)
}

// isProtected reports whether a path form (or a folder above it) is
// protected.
func (p *Policy) isProtected(form string) bool {
	for _, pat := range p.protectedPatterns() {
		if matchUp(pat, form) {
			return true
		}
	}
	return false
}

// matchUp matches a pattern against a path and each folder above it: a
// rule on a folder covers what is inside.
func matchUp(pattern, form string) bool {
	for f := form; ; {
		if ok, _ := doublestar.Match(pattern, f); ok {
			return true
		}
		parent := path.Dir(f)
		if parent == f || parent == "." || parent == "/" {
			return false
		}
		f = parent
	}
}

// pathForms are the forms a rule must see of a tool's path: as written,
// and after symlinks resolve (for a path that does not exist yet, its
// deepest existing folder resolves). abs is the resolved absolute path, ""
// when it could not be made.
func (p *Policy) pathForms(raw string) (forms []string, abs string) {
	if raw == "" {
		raw = "."
	}
	written := p.relPath(raw)
	forms = []string{written}
	full := raw
	if !filepath.IsAbs(full) {
		if p.workspace == "" {
			return forms, ""
		}
		// Not Join: Join cleans link/.. lexically, the kernel does not.
		full = strings.TrimRight(p.workspace, string(filepath.Separator)) + string(filepath.Separator) + raw
	}
	r, ok := resolveDeepest(full)
	if !ok {
		return forms, ""
	}
	if rf := p.relPath(r); rf != written {
		forms = append(forms, rf)
	}
	return forms, r
}

// resolveDeepest resolves the symlinks of a path's deepest existing
// ancestor and appends the rest.
func resolveDeepest(full string) (string, bool) {
	cur := full
	var rest []string
	for range 4096 {
		r, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(append([]string{r}, rest...)...), true
		}
		if !errors.Is(err, fs.ErrNotExist) && !isNotDir(err) {
			return "", false // a loop or no permission: the written form alone
		}
		dir := filepath.Dir(cur)
		if dir == cur {
			return "", false
		}
		rest = append([]string{filepath.Base(cur)}, rest...)
		cur = dir
	}
	return "", false
}

func isNotDir(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "not a directory")
}

// maxLinkScan bounds the walk that looks for the other names of a
// hard-linked file.
const maxLinkScan = 200_000

// linkTTL is how long a scan's result stands: a grep over a tree of
// hard-linked files (a pnpm node_modules) pays for one walk, not one per
// file. A file a rule covers that appears within that time is missed for
// that long; a new link to a file that was covered is not.
const linkTTL = 2 * time.Second

type inode struct{ dev, ino uint64 }

// linkScan is the identities of the files some patterns cover.
type linkScan struct {
	at  time.Time
	ids map[inode]string // the file's form, for messages
}

// hardLinked reports whether abs, when it is a file with more than one
// link, is the same file as one covered says a rule covers. Only
// multi-link files pay for the walk, which visits the workspace and the
// literal folders of absolute patterns, and is kept for linkTTL.
func (p *Policy) hardLinked(abs string, patterns []string, covered func(form string) bool) bool {
	if abs == "" {
		return false
	}
	fi, err := os.Stat(abs)
	if err != nil || !fi.Mode().IsRegular() || nlink(fi) < 2 {
		return false
	}
	id, ok := fileKey(fi)
	if !ok {
		return false
	}
	key := strings.Join(patterns, "\x00")
	p.linkMu.Lock()
	scan := p.links[key]
	if scan == nil || time.Since(scan.at) > linkTTL {
		scan = p.scanLinks(patterns, covered)
		if p.links == nil {
			p.links = map[string]*linkScan{}
		}
		p.links[key] = scan
	}
	p.linkMu.Unlock()
	form, hit := scan.ids[id]
	return hit && covered(form)
}

func (p *Policy) scanLinks(patterns []string, covered func(form string) bool) *linkScan {
	s := &linkScan{at: time.Now(), ids: map[inode]string{}}
	seen := 0
	for _, base := range p.scanBases(patterns) {
		_ = filepath.WalkDir(base, func(name string, d fs.DirEntry, err error) error {
			seen++
			if seen > maxLinkScan {
				return filepath.SkipAll
			}
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			form := p.relPath(name)
			if !covered(form) {
				return nil
			}
			if fi, err := os.Stat(name); err == nil {
				if id, ok := fileKey(fi); ok {
					s.ids[id] = form
				}
			}
			return nil
		})
	}
	return s
}

// scanBases are the folders a hard-link scan walks: the workspace for
// relative patterns, the literal leading folders of absolute ones.
func (p *Policy) scanBases(patterns []string) []string {
	var out []string
	add := func(b string) {
		for _, x := range out {
			if x == b {
				return
			}
		}
		out = append(out, b)
	}
	for _, pat := range patterns {
		if !strings.HasPrefix(pat, "/") {
			if p.workspace != "" {
				add(p.workspace)
			}
			continue
		}
		base := "/"
		for _, part := range strings.Split(pat, "/")[1:] {
			if strings.ContainsAny(part, `*?[{\`) {
				break
			}
			base = path.Join(base, part)
		}
		if base == "/" {
			continue // a pattern over the whole disk is not scanned
		}
		add(filepath.FromSlash(base))
	}
	return out
}
