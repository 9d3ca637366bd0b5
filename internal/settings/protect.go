package settings

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// projectDirVars are the variables a hook command may use for the
// workspace: Claude Code's and troupe's.
var projectDirVars = []string{"CLAUDE_PROJECT_DIR", "TROUPE_PROJECT_DIR"}

// HookScripts returns the files the hook commands of s run, as absolute
// paths, sorted, without repeats: every word of a command that names an
// existing regular file once $CLAUDE_PROJECT_DIR, $TROUPE_PROJECT_DIR and
// "~" are expanded (a relative word is taken from workspace, where hooks
// run). It is a best effort: a script reached through a variable troupe does
// not know, or built at run time, is missed; programs of the system
// (/usr, /bin, /sbin) are left out.
func (s *Settings) HookScripts(workspace string) []string {
	home := s.opts.HomeDir()
	var out []string
	for _, h := range s.Hooks {
		if h.Type != "command" {
			continue
		}
		for _, w := range commandWords(h.Command) {
			p := expandWord(w, workspace, home)
			if p == "" || systemPath(p) || slices.Contains(out, p) {
				continue
			}
			if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// ProtectedPaths lists what an agent working in workspace must not rewrite:
// every settings file troupe reads or would read there (present or not,
// inline --settings aside), the hook scripts of s (HookScripts), and the
// folders Claude Code's agents, commands and skills are read from, in the
// workspace and the user's Claude Code directory. Memory files (CLAUDE.md)
// are left out: agents may rightly edit them. The permission engine is
// given these; this package enforces nothing.
func (s *Settings) ProtectedPaths(workspace string) []string {
	o := s.opts
	o.Workspace = workspace
	var out []string
	add := func(p string) {
		if p != "" && !slices.Contains(out, p) {
			out = append(out, filepath.Clean(p))
		}
	}
	for _, src := range o.Paths() {
		if src.Path != FlagSource {
			add(src.Path)
		}
	}
	dirs := []string{filepath.Join(workspace, ".claude")}
	if d := o.ClaudeUserDir(); d != "" && !o.NoUser {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		for _, sub := range []string{"agents", "commands", "skills"} {
			add(filepath.Join(d, sub))
		}
	}
	for _, p := range s.HookScripts(workspace) {
		add(p)
	}
	return out
}

// commandWords splits a shell command into words, best effort: quotes are
// removed, and the operators ; & | ( ) < > end a word. It never fails.
func commandWords(cmd string) []string {
	var (
		words []string
		cur   strings.Builder
		quote rune
		any   bool
	)
	flush := func() {
		if any {
			words = append(words, cur.String())
		}
		cur.Reset()
		any = false
	}
	for _, r := range cmd {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote, any = r, true
		case r == ' ' || r == '\t' || r == '\n' || strings.ContainsRune(";&|()<>`", r):
			flush()
		default:
			cur.WriteRune(r)
			any = true
		}
	}
	flush()
	return words
}

// expandWord turns a command word into the absolute path it would name, or
// "" when it cannot name a file troupe can find.
func expandWord(w, workspace, home string) string {
	for _, v := range projectDirVars {
		w = strings.ReplaceAll(w, "${"+v+"}", workspace)
		w = strings.ReplaceAll(w, "$"+v, workspace)
	}
	if w == "" || strings.ContainsAny(w, "$*?[=") || strings.HasPrefix(w, "-") {
		return ""
	}
	if (w == "~" || strings.HasPrefix(w, "~/")) && home == "" {
		return ""
	}
	return ExpandPath(w, home, workspace)
}

func systemPath(p string) bool {
	for _, d := range []string{"/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/"} {
		if strings.HasPrefix(p, d) {
			return true
		}
	}
	return false
}
