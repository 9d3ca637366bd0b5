package permission

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/troupe-dev/troupe/internal/tool/kind"
)

// flagForm is a command's words with its options taken apart, so that
// rm -fr d, rm -r -f d and rm --recursive --force d read as one.
type flagForm struct {
	pos   []string // the name, then the operands in order
	flags map[string]bool
}

// longAliases are the long options of rm that a short one names.
var longAliases = map[string]map[string]string{
	"rm": {"recursive": "r", "force": "f", "dir": "d", "verbose": "v", "interactive": "i"},
}

func hasOption(words []string) bool {
	for _, w := range words[min(1, len(words)):] {
		if len(w) > 1 && w[0] == '-' {
			return true
		}
	}
	return false
}

func splitFlags(words []string) *flagForm {
	f := &flagForm{flags: map[string]bool{}}
	if len(words) == 0 {
		return f
	}
	name := cmdName(words[0])
	f.pos = append(f.pos, name)
	for i := 1; i < len(words); i++ {
		w := words[i]
		switch {
		case w == "--":
			f.pos = append(f.pos, words[i+1:]...)
			return f
		case strings.HasPrefix(w, "--") && len(w) > 2:
			long := w[2:]
			if short, ok := longAliases[name][long]; ok {
				f.flags[short] = true
			} else {
				f.flags["--"+long] = true
			}
		case len(w) > 1 && w[0] == '-':
			for _, c := range w[1:] {
				if name == "rm" && c == 'R' {
					c = 'r'
				}
				f.flags[string(c)] = true
			}
		default:
			f.pos = append(f.pos, w)
		}
	}
	return f
}

func subset(a, b map[string]bool) bool {
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// compatible reports whether two word lists agree where both have words.
func compatible(a, b []string) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func hasPrefix(words, prefix []string) bool {
	return len(words) >= len(prefix) && compatible(words, prefix)
}

func equal(a, b []string) bool { return len(a) == len(b) && compatible(a, b) }

// literalMatch matches a command whose every word is known.
func (r *Rule) literalMatch(words []string) bool {
	switch r.kind {
	case specPrefix:
		return hasPrefix(words, r.prefix)
	case specExact:
		return equal(words, r.exact)
	case specWild:
		return r.wild.MatchString(strings.Join(words, " "))
	}
	return false
}

// allowMatch: an allow rule vouches for a command only on its literal
// words (/bin/ls is not ls here: it might be anything).
func (r *Rule) allowMatch(c command) bool {
	if c.unknown() {
		return false
	}
	if r.kind == specPrefix {
		return c.known >= len(r.prefix) && hasPrefix(c.words[:c.known], r.prefix)
	}
	return !c.open() && r.literalMatch(c.words)
}

// couldMatch: a deny or ask rule matches a command when it matches its
// words with the name's path dropped and its options in any order, or,
// for words the line does not give, when those words could make it match.
func (r *Rule) couldMatch(c command) bool {
	if r.kind == specAll {
		return true
	}
	if r.kind != specPrefix && r.kind != specExact && r.kind != specWild {
		return false
	}
	known := c.words[:c.known]
	words := known
	if len(words) > 0 && filepath.IsAbs(words[0]) {
		words = append([]string{cmdName(words[0])}, words[1:]...)
	}
	if !c.open() {
		if r.literalMatch(words) || r.literalMatch(known) {
			return true
		}
		if r.flags == nil || r.kind == specWild {
			return false
		}
		cf := splitFlags(words)
		if !subset(r.flags.flags, cf.flags) {
			return false
		}
		if r.kind == specPrefix {
			return hasPrefix(cf.pos, r.flags.pos)
		}
		return equal(cf.pos, r.flags.pos) && subset(cf.flags, r.flags.flags)
	}
	if compatible(words, r.lead) && (r.kind != specExact || len(words) <= len(r.exact)) {
		return true
	}
	if r.flags == nil || r.kind == specWild {
		return false
	}
	cf := splitFlags(words)
	return compatible(cf.pos, r.flags.pos) && (r.kind == specPrefix || subset(cf.flags, r.flags.flags))
}

// bashRules are the rules of rules that cover bash.
func bashRules(rules []Rule) []Rule {
	var out []Rule
	for _, r := range rules {
		if r.covers("bash") && r.kind != specOther {
			out = append(out, r)
		}
	}
	return out
}

// transparent wrappers only change how their inner command runs; an allow
// decision is the inner command's. sudo and doas change who runs it and
// stay the user's to allow.
var transparent = map[string]bool{
	"env": true, "nice": true, "nohup": true, "time": true, "timeout": true, "stdbuf": true, "command": true,
	"exec": true, "builtin": true, "ionice": true, "setsid": true, "xargs": true, "eval": true, "watch": true,
	"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "ash": true, "yash": true,
}

func (p *Policy) checkBash(mode Mode, k kind.Kind, cmdline string) Verdict {
	l := parseLine(cmdline)
	deny := bashRules(p.deny)
	for _, c := range l.cmds {
		for _, r := range deny {
			if r.couldMatch(c) {
				return denied(r, matchWhy(c, r))
			}
		}
	}
	if v, ok := p.bashReads(l); ok {
		return v
	}
	targets, wv, ok := p.bashWrites(l)
	if ok {
		return wv
	}
	readOnly := len(l.writes) == 0
	for _, c := range l.cmds {
		if !c.synthetic && !isReadOnly(c) && !(c.wrapper && transparent[c.name()]) {
			readOnly = false
		}
	}
	if v, ok := modeLimit(mode, k, readOnly); ok {
		return v
	}
	for _, c := range l.cmds {
		for _, r := range bashRules(p.ask) {
			if r.couldMatch(c) {
				return asked(r, matchWhy(c, r))
			}
		}
	}
	allow := bashRules(p.allow)
	var first *Rule
	var missing *command
	for i, c := range l.cmds {
		if c.synthetic {
			continue
		}
		if r := firstAllow(allow, c); r != nil {
			if first == nil {
				first = r
			}
			continue
		}
		if isReadOnly(c) || c.wrapper && transparent[c.name()] ||
			mode == AcceptEdits && editCommands[c.name()] && p.insideOnly(c) {
			continue
		}
		if missing == nil || c.unknown() && !missing.unknown() {
			missing = &l.cmds[i] // a command nobody can vouch for says more
		}
	}
	badWrite, writesOK := p.writesAccepted(mode, targets)
	if missing == nil && writesOK {
		if first != nil {
			return allowed(*first)
		}
		return Verdict{Effect: Allow, Reason: "a read-only command (or one the mode allows) runs without asking"}
	}
	if mode == Bypass {
		return Verdict{Effect: Allow, Reason: "permission mode bypassPermissions allows bash"}
	}
	switch {
	case missing != nil && missing.unknown():
		return Verdict{Effect: Ask, Reason: fmt.Sprintf("the command cannot be vouched for before it runs (%s), so it needs approval", strings.TrimPrefix(missing.why, "unknown: "))}
	case missing != nil:
		v := Verdict{Effect: Ask, Reason: fmt.Sprintf("permission mode %s: %q is not allowed by a rule and needs approval", mode, strings.Join(missing.words, " "))}
		v.suggest(suggestBash(*missing))
		return v
	}
	if badWrite == "" {
		return Verdict{Effect: Ask, Reason: fmt.Sprintf("permission mode %s: the command writes a file only known at run time and needs approval", mode)}
	}
	v := Verdict{Effect: Ask, Reason: fmt.Sprintf("permission mode %s: the command writes %s, which no Edit allow rule covers, and needs approval", mode, badWrite)}
	v.suggest(editRule(badWrite))
	return v
}

func firstAllow(rules []Rule, c command) *Rule {
	for i, r := range rules {
		if r.kind == specAll || r.allowMatch(c) {
			return &rules[i]
		}
	}
	return nil
}

// matchWhy says how a rule came to match a command that is not as the
// rule wrote it.
func matchWhy(c command, r Rule) string {
	switch {
	case r.kind == specAll:
		return ""
	case c.unknown():
		return fmt.Sprintf(": the command cannot be vouched for before it runs (%s), and the rule could match it", strings.TrimPrefix(c.why, "unknown: "))
	case c.synthetic && c.why == "find -delete":
		return fmt.Sprintf(": find -delete removes files as %q does", strings.Join(c.words, " "))
	case c.synthetic:
		return fmt.Sprintf(" (it matches %q, with %s)", strings.Join(c.words[:c.known], " "), c.why)
	case c.open():
		return fmt.Sprintf(": %q has words only known at run time that could match it", strings.Join(c.words[:c.known], " "))
	}
	return fmt.Sprintf(" (it matches %q)", strings.Join(c.words, " "))
}

// suggestBash is the prefix rule that would allow a command: its name and,
// when the next word reads as a subcommand, that word too.
func suggestBash(c command) string {
	if c.unknown() || c.known == 0 {
		return ""
	}
	words := c.words[:1]
	if c.known > 1 && subcommand().MatchString(c.words[1]) {
		words = c.words[:2]
	}
	return "Bash(" + strings.Join(words, " ") + ":*)"
}

var subcommand = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]*(:[a-z0-9_-]+)*$`) })

// bashReads refuses a command whose words or input redirections name a
// file a Read deny covers: the files reading commands name, any word that
// names an existing file, globs expanded in the workspace.
func (p *Policy) bashReads(l *line) (Verdict, bool) {
	rules := pathRules(p.deny, "read_file")
	if len(rules) == 0 {
		return Verdict{}, false
	}
	check := func(word string, mustExist bool) (Verdict, bool) {
		if word == "" {
			return Verdict{}, false
		}
		words := []string{word}
		if strings.ContainsAny(word, "*?[") && p.workspace != "" {
			pat := word
			if !filepath.IsAbs(pat) {
				pat = filepath.Join(p.workspace, pat)
			}
			m, complete := globBounded(pat, maxGlobVisit)
			if !complete {
				r := rules[0]
				return denied(r, fmt.Sprintf(": the glob %s reaches too many files to check them against Read deny rules", word)), true
			}
			words = append(words, m...)
		}
		for _, w := range words {
			if mustExist {
				full := w
				if !filepath.IsAbs(full) {
					if p.workspace == "" {
						continue
					}
					full = filepath.Join(p.workspace, full)
				}
				if _, err := os.Lstat(full); err != nil {
					continue // cheap: most words name no file
				}
			}
			forms, abs := p.pathForms(w)
			if r, why, ok := p.denyPath(rules, forms, abs); ok {
				return denied(r, fmt.Sprintf(": the command reads %s%s", w, why)), true
			}
		}
		return Verdict{}, false
	}
	for _, t := range l.reads {
		if v, ok := check(t.path, false); ok {
			return v, true
		}
	}
	for _, c := range l.cmds {
		if c.synthetic || c.unknown() {
			continue
		}
		reader := readers[c.name()]
		for i, w := range c.words {
			switch {
			case i == 0:
				if !strings.ContainsRune(w, '/') {
					continue
				}
			case strings.HasPrefix(w, "-"):
				_, v, ok := strings.Cut(w, "=")
				if !ok {
					continue
				}
				w = v
			}
			if v, ok := check(w, i == 0 || !reader); ok {
				return v, true
			}
		}
	}
	return Verdict{}, false
}

// written is a file a command line writes.
type written struct {
	path    string
	known   bool
	removes bool
}

// bashWrites collects the files a line writes and refuses those an Edit
// deny covers or that are protected.
func (p *Policy) bashWrites(l *line) ([]written, Verdict, bool) {
	var out []written
	for _, t := range l.writes {
		out = append(out, written{path: t.path, known: t.known})
	}
	var cmdTargets []written
	for _, c := range l.cmds {
		ts, unknown, removes := writeTargets(c)
		for _, t := range ts {
			cmdTargets = append(cmdTargets, written{path: t, known: true, removes: removes})
		}
		if unknown {
			cmdTargets = append(cmdTargets, written{})
		}
	}
	rules := pathRules(p.deny, "edit_file", "write_file")
	for _, t := range append(out[:len(out):len(out)], cmdTargets...) {
		if !t.known {
			if len(rules) > 0 {
				r := rules[0]
				return nil, denied(r, ": the command writes a file only known at run time, which the rule could cover"), true
			}
			continue
		}
		forms, abs := p.pathForms(t.path)
		if r, why, ok := p.denyPath(rules, forms, abs); ok {
			return nil, denied(r, fmt.Sprintf(": the command writes %s%s", t.path, why)), true
		}
		if p.protects(forms, abs, t.removes) {
			if _, ok := p.explicitAllow("edit_file", forms); !ok {
				v := protectedVerdict(forms[0])
				v.Reason = "the command writes " + t.path + ", which " + strings.TrimPrefix(v.Reason, forms[0]+" ") +
					" (bash writes are caught on a best-effort reading of the command; the sandbox is the wall)"
				return nil, v, true
			}
		}
	}
	return out, Verdict{}, false
}

// writesAccepted reports whether the mode or Edit allow rules accept every
// redirection target; when not, the first one that is not (or "" for one
// only known at run time).
func (p *Policy) writesAccepted(mode Mode, targets []written) (string, bool) {
	for _, t := range targets {
		if mode == Bypass {
			return "", true
		}
		if !t.known {
			return "", false
		}
		forms, _ := p.pathForms(t.path)
		if _, ok := p.allowPath("edit_file", forms); ok {
			continue
		}
		if mode == AcceptEdits && p.allInside(forms) {
			continue
		}
		return forms[0], false
	}
	return "", true
}

func (p *Policy) allInside(forms []string) bool {
	for _, f := range forms {
		if !p.inside(f) {
			return false
		}
	}
	return true
}

// insideOnly reports whether every file a filesystem command names lies
// inside the workspace.
func (p *Policy) insideOnly(c command) bool {
	if c.open() {
		return false
	}
	for _, o := range operands(c.args()) {
		if forms, _ := p.pathForms(o); !p.allInside(forms) {
			return false
		}
	}
	return true
}

// maxGlobVisit bounds the directory entries a glob in a command may make
// the check read: /*/*/*/* is the whole disk.
const maxGlobVisit = 20_000

// maxGlobMatches bounds the files a glob's matches make the check look at.
const maxGlobMatches = 1000

// globBounded expands a shell glob as bash would without globstar, reading
// at most limit directory entries; complete is false when it stopped
// early.
func globBounded(pattern string, limit int) (matches []string, complete bool) {
	parts := strings.Split(filepath.ToSlash(pattern), "/")
	root := "."
	if filepath.IsAbs(pattern) {
		root, parts = "/", parts[1:]
	}
	visited := 0
	complete = true
	var walk func(dir string, parts []string)
	walk = func(dir string, parts []string) {
		if !complete {
			return
		}
		if len(parts) == 0 {
			if len(matches) >= maxGlobMatches {
				complete = false
				return
			}
			matches = append(matches, dir)
			return
		}
		part := parts[0]
		if part == "" || !strings.ContainsAny(part, "*?[") {
			walk(filepath.Join(dir, part), parts[1:])
			return
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return // opening a FIFO would block
		}
		f, err := os.Open(dir)
		if err != nil {
			return
		}
		defer f.Close()
		for complete {
			entries, err := f.ReadDir(256) // a huge folder is read only as far as needed
			for _, e := range entries {
				visited++
				if visited > limit {
					complete = false
					return
				}
				if ok, _ := filepath.Match(part, e.Name()); ok && (e.Name()[0] != '.' || part[0] == '.') {
					walk(filepath.Join(dir, e.Name()), parts[1:])
				}
			}
			if err != nil {
				return
			}
		}
	}
	walk(root, parts)
	return matches, complete
}

// ReadOnly reports whether a bash command line only reads: every command
// in it is a read-only one (ls, cat, git status, …, or a wrapper of one)
// and it redirects output to no file. Rules are not consulted; plan-mode
// gates that refuse bash outright can use it to let such commands run.
func ReadOnly(cmdline string) bool {
	l := parseLine(cmdline)
	if len(l.writes) > 0 || len(l.cmds) == 0 {
		return false
	}
	for _, c := range l.cmds {
		if !c.synthetic && !isReadOnly(c) && !(c.wrapper && transparent[c.name()]) {
			return false
		}
	}
	return true
}
