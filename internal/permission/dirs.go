package permission

import (
	"path/filepath"
	"strings"
)

// AddDirs adds the session's additional directories (settings'
// additionalDirectories, --add-dir), which Claude Code treats as it treats
// the workspace: acceptEdits accepts edits and filesystem commands there
// too, and the built-in protected paths (.claude/settings.json,
// .git/hooks, …) are protected in each of them as in the workspace. Rules
// are not re-rooted: a workspace-relative rule still names the workspace's
// files only; write //abs/path for a file in an additional directory.
func (p *Policy) AddDirs(dirs ...string) {
	if p == nil {
		return
	}
	for _, d := range dirs {
		if d = strings.TrimSpace(d); d == "" || !filepath.IsAbs(d) {
			continue
		}
		for _, f := range workspaceForms(d) {
			p.dirs = append(p.dirs, filepath.ToSlash(f))
		}
	}
}

// inExtra returns an absolute slash form relative to the additional
// directory holding it.
func (p *Policy) inExtra(form string) (string, bool) {
	if !strings.HasPrefix(form, "/") {
		return "", false
	}
	for _, d := range p.dirs {
		if form == d {
			return ".", true
		}
		if rel, ok := strings.CutPrefix(form, strings.TrimSuffix(d, "/")+"/"); ok {
			return rel, true
		}
	}
	return "", false
}

// inside reports whether a path form lies inside the workspace or one of
// the additional directories.
func (p *Policy) inside(form string) bool {
	if inside(form) {
		return true
	}
	_, ok := p.inExtra(form)
	return ok
}

// protectedExtra reports whether a form is one of the built-in protected
// paths of an additional directory, or (removes) a folder holding one, or
// an additional directory itself.
func (p *Policy) protectedExtra(form string, removes bool) bool {
	if rel, ok := p.inExtra(form); ok {
		for _, pat := range builtinProtected {
			if matchUp(pat, rel) {
				return true
			}
			if removes && (rel == "." || strings.HasPrefix(pat, strings.TrimSuffix(rel, "/")+"/")) {
				return true
			}
		}
	}
	if removes && strings.HasPrefix(form, "/") {
		for _, d := range p.dirs {
			if form == "/" || strings.HasPrefix(d+"/", strings.TrimSuffix(form, "/")+"/") {
				return true
			}
		}
	}
	return false
}
