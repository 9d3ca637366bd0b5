package permission

import (
	"os"
	"path/filepath"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// This file takes a bash command line apart into the simple commands it
// runs, the way bash itself will see them: mvdan.cc/sh parses it, and every
// simple command anywhere in the tree (if/for/while/case bodies, functions,
// subshells, pipelines, substitutions, here-strings) is collected. Commands
// hidden behind a wrapper (env, nice, timeout, xargs, sudo, sh -c '…',
// eval '…', find -exec …) are taken out and collected as well, so a deny
// rule sees them. What the line does not say literally (a command name
// built from an expansion, eval "$x", sh -c "$x") is kept as an unknown
// command that any rule could match: it errs towards seeing more, never
// less.

// command is one simple command of a line.
type command struct {
	// words are its words with quotes removed; a word that expands at run
	// time ($x, $(…), a glob in the command name) is "".
	words []string
	// known counts the leading words known literally.
	known int
	// tail reports that words the line does not show follow (xargs
	// appends its input).
	tail bool
	// why says how it was found when not as written: "unknown: …" for a
	// command that cannot be vouched for, "find -delete" for the rm it
	// stands for.
	why string
	// synthetic commands (find -delete's rm -rf) only serve deny and ask
	// rules: the command that runs is the one that contains them.
	synthetic bool
	// wrapper reports a wrapper whose inner command was found and
	// collected as a command of its own.
	wrapper bool
}

// open reports whether the command has words the line does not give.
func (c command) open() bool { return c.known < len(c.words) || c.tail }

// unknown reports a command whose name itself is not known.
func (c command) unknown() bool { return c.known == 0 }

// name is the command's name, an absolute path reduced to its base name
// ("/bin/rm" is rm), or "" when not known.
func (c command) name() string {
	if c.known == 0 {
		return ""
	}
	return cmdName(c.words[0])
}

func cmdName(w string) string {
	if filepath.IsAbs(w) {
		return filepath.Base(w)
	}
	return w
}

// args are the words after the name.
func (c command) args() []string {
	if len(c.words) == 0 {
		return nil
	}
	return c.words[1:]
}

// target is a path a redirection or a command reads or writes.
type target struct {
	path  string
	known bool
}

// line is a command line taken apart.
type line struct {
	cmds   []command
	writes []target // redirection targets written
	reads  []target // redirection targets read
}

// maxDepth bounds sh -c / eval / wrapper nesting; deeper is unknown.
const maxDepth = 8

var parsers = sync.Pool{New: func() any { return syntax.NewParser(syntax.Variant(syntax.LangBash)) }}

// parseLine takes a command line apart.
func parseLine(src string) *line {
	l := &line{}
	l.parse(src, 0)
	return l
}

func (l *line) addUnknown(why string) {
	l.cmds = append(l.cmds, command{tail: true, why: "unknown: " + why})
}

func (l *line) parse(src string, depth int) {
	if depth > maxDepth {
		l.addUnknown("nested too deeply")
		return
	}
	p := parsers.Get().(*syntax.Parser)
	f, err := p.Parse(strings.NewReader(src), "")
	parsers.Put(p)
	if err != nil {
		l.addUnknown("the command does not parse: " + err.Error())
		return
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Stmt:
			l.redirects(n.Redirs)
		case *syntax.CallExpr:
			l.call(n, depth)
		}
		return true
	})
}

func (l *line) redirects(rs []*syntax.Redirect) {
	for _, r := range rs {
		if r.Word == nil {
			continue
		}
		s, ok, _ := literal(r.Word)
		t := target{path: s, known: ok}
		switch r.Op {
		case syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.AppClob,
			syntax.RdrAll, syntax.RdrAllClob, syntax.AppAll, syntax.AppAllClob:
			if !ok || !isDevice(s) {
				l.writes = append(l.writes, t)
			}
		case syntax.RdrInOut:
			l.reads = append(l.reads, t)
			if !ok || !isDevice(s) {
				l.writes = append(l.writes, t)
			}
		case syntax.RdrIn:
			l.reads = append(l.reads, t)
		case syntax.DplOut:
			// >&2 and 2>&1 copy a stream; >&word with a word that is
			// not a number writes the file, as &> does.
			if !ok || !isFD(s) && !isDevice(s) {
				l.writes = append(l.writes, t)
			}
		case syntax.DplIn:
			if !ok || !isFD(s) {
				l.reads = append(l.reads, t)
			}
		}
	}
}

func isFD(s string) bool {
	if s == "-" {
		return true
	}
	s = strings.TrimSuffix(s, "-") // 3>&1- moves the descriptor
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isDevice reports the special files a redirection may name without
// writing anything that lasts.
func isDevice(p string) bool {
	switch p {
	case "/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero":
		return true
	}
	return strings.HasPrefix(p, "/dev/fd/")
}

func (l *line) call(ce *syntax.CallExpr, depth int) {
	if len(ce.Args) == 0 {
		return // assignments only
	}
	c := command{words: make([]string, len(ce.Args)), known: len(ce.Args)}
	for i, w := range ce.Args {
		s, ok, pattern := literal(w)
		if i == 0 && pattern {
			ok = false // a glob or brace expansion picks the command at run time
		}
		if !ok {
			s = ""
			if c.known == len(ce.Args) {
				c.known = i
			}
		}
		c.words[i] = s
	}
	if c.known == 0 {
		c.why = "unknown: the command name is built at run time"
	}
	l.add(c, depth)
}

// add collects a command and what it wraps.
func (l *line) add(c command, depth int) {
	i := len(l.cmds)
	l.cmds = append(l.cmds, c)
	if c.known == 0 {
		return
	}
	if depth >= maxDepth {
		l.addUnknown("nested too deeply")
		return
	}
	if l.unwrap(c, depth+1) {
		l.cmds[i].wrapper = true
	}
}

// sub is the command that starts at word i of c.
func sub(c command, i int) command {
	if i > len(c.words) {
		i = len(c.words)
	}
	k := c.known - i
	if k < 0 {
		k = 0
	}
	return command{words: c.words[i:], known: k, tail: c.tail}
}

// optSpec says how a wrapper's options read.
type optSpec struct {
	val      string   // short options that take a value
	flags    string   // short options that take none
	longVal  []string // long options that take a value (--x=v or --x v)
	longFlag []string
	assigns  bool // NAME=value words may stand among the options (env, sudo)
	skip     int  // positional words before the command (timeout's duration)
	digits   bool // -5 (nice)
}

var wrappers = map[string]optSpec{
	"env":     {val: "uC", flags: "i0v", longVal: []string{"unset", "chdir"}, longFlag: []string{"ignore-environment", "null", "debug"}, assigns: true},
	"nice":    {val: "n", longVal: []string{"adjustment"}, digits: true},
	"nohup":   {},
	"time":    {val: "fo", flags: "pvaq", longVal: []string{"format", "output"}, longFlag: []string{"append", "portability", "verbose", "quiet"}},
	"exec":    {val: "a", flags: "cl"},
	"timeout": {val: "sk", flags: "v", longVal: []string{"signal", "kill-after"}, longFlag: []string{"preserve-status", "foreground", "verbose"}, skip: 1},
	"stdbuf":  {val: "ioe", longVal: []string{"input", "output", "error"}},
	"xargs": {val: "aEdILnPs", flags: "0rtpxile", longVal: []string{"arg-file", "delimiter", "max-lines", "max-args", "max-procs", "max-chars", "process-slot-var"},
		longFlag: []string{"null", "no-run-if-empty", "verbose", "interactive", "exit", "show-limits", "open-tty", "eof", "replace"}},
	"sudo": {val: "ugphCDrtTRU", flags: "AbEHKknPSsiVvl", longVal: []string{"user", "group", "host", "prompt", "close-from", "chdir", "role", "type", "command-timeout", "chroot", "other-user"},
		longFlag: []string{"preserve-env", "login", "shell", "non-interactive", "stdin", "background", "set-home", "reset-timestamp", "remove-timestamp", "list", "validate", "askpass", "bell", "preserve-groups"}, assigns: true},
	"doas":    {val: "uC", flags: "ns"},
	"setsid":  {flags: "cfw", longFlag: []string{"ctty", "fork", "wait"}},
	"ionice":  {val: "cnpPu", flags: "t"},
	"builtin": {},
	"busybox": {},
	"chroot":  {longVal: []string{"userspec", "groups"}, longFlag: []string{"skip-chdir"}, skip: 1},
	"command": {flags: "pvV"},
	"watch":   {val: "nq", flags: "bcdegptwxhvr", longVal: []string{"interval"}, longFlag: []string{"differences", "no-title", "beep", "errexit", "chgexit", "exec", "precise", "color", "no-wrap"}},
}

// shells run their -c argument as a command line.
var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "ash": true, "yash": true}

// unwrap collects the commands c runs on its behalf; it reports whether c
// is a wrapper whose inner command it found.
func (l *line) unwrap(c command, depth int) bool {
	name := c.name()
	switch {
	case name == "eval":
		if c.open() {
			l.addUnknown("eval of words only known at run time")
			return false
		}
		l.parse(strings.Join(c.args(), " "), depth)
		return true
	case name == "source" || name == ".":
		l.addUnknown(name + " runs the commands of a file")
		return false
	case shells[name]:
		return l.shell(c, depth)
	case name == "find":
		l.find(c, depth)
		return false
	case name == "git":
		l.git(c)
		return false
	}
	spec, ok := wrappers[name]
	if !ok {
		return false
	}
	i, flags, ok := options(spec, c)
	if !ok {
		l.addUnknown(name + " with options this check does not know")
		return false
	}
	switch name {
	case "command":
		if flags['v'] || flags['V'] {
			return false // only looks the name up
		}
	case "sudo":
		if flags['e'] {
			l.addUnknown("sudo -e edits files")
			return false
		}
		if i >= len(c.words) && (flags['s'] || flags['i']) {
			l.addUnknown("sudo opens a shell that reads its input")
			return false
		}
	case "watch":
		if i < len(c.words) {
			if i >= c.known {
				l.addUnknown("watch of words only known at run time")
				return false
			}
			in := sub(c, i)
			if in.open() {
				l.addUnknown("watch of words only known at run time")
				return false
			}
			l.parse(strings.Join(in.words, " "), depth)
			return true
		}
	case "xargs":
		in := sub(c, i)
		if i >= len(c.words) {
			in = command{words: []string{"echo"}, known: 1}
		}
		in.tail = true
		l.add(in, depth)
		return true
	}
	if i >= len(c.words) {
		return false // env alone prints, nice alone prints its niceness
	}
	l.add(sub(c, i), depth)
	return true
}

// options skips a wrapper's options; it returns the index of the inner
// command, the short flags seen, and false when an option is not known
// (its value might be taken for the command).
func options(spec optSpec, c command) (int, map[byte]bool, bool) {
	flags := map[byte]bool{}
	i := 1
	for i < len(c.words) {
		if i >= c.known {
			return i, flags, false
		}
		w := c.words[i]
		if spec.assigns && isAssign(w) {
			i++
			continue
		}
		if w == "--" {
			i++
			break
		}
		if strings.HasPrefix(w, "--") {
			name, _, hasVal := strings.Cut(w[2:], "=")
			switch {
			case contains(spec.longVal, name):
				if !hasVal {
					i++
				}
			case contains(spec.longFlag, name):
			default:
				return i, flags, false
			}
			i++
			continue
		}
		if len(w) < 2 || w[0] != '-' {
			break
		}
		for j := 1; j < len(w); j++ {
			ch := w[j]
			if strings.IndexByte(spec.val, ch) >= 0 {
				if j == len(w)-1 {
					i++ // the value is the next word
				}
				break
			}
			if spec.digits && ch >= '0' && ch <= '9' {
				continue
			}
			if strings.IndexByte(spec.flags, ch) < 0 {
				return i, flags, false
			}
			flags[ch] = true
		}
		i++
	}
	for k := 0; k < spec.skip && i < len(c.words); k++ {
		if i >= c.known {
			return i, flags, false
		}
		i++
	}
	return i, flags, true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func isAssign(w string) bool {
	eq := strings.IndexByte(w, '=')
	if eq <= 0 {
		return false
	}
	for i, r := range w[:eq] {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// shell handles sh -c '…': the script is parsed as a line of its own. A
// shell given no -c runs a script file (a command like ./x.sh) or, with no
// file either, reads its commands from its input, which no one can vouch
// for.
func (l *line) shell(c command, depth int) bool {
	cflag := false
	i := 1
	for i < len(c.words) {
		if i >= c.known {
			l.addUnknown(c.name() + " with options only known at run time")
			return false
		}
		w := c.words[i]
		if w == "--" || w == "-" {
			i++
			break
		}
		if strings.HasPrefix(w, "--") {
			if w == "--rcfile" || w == "--init-file" {
				i++
			}
			i++
			continue
		}
		if len(w) > 1 && (w[0] == '-' || w[0] == '+') {
			letters := w[1:]
			if w[0] == '-' && strings.ContainsRune(letters, 'c') {
				cflag = true
			}
			if last := letters[len(letters)-1]; last == 'o' || last == 'O' {
				i++ // -o pipefail
			}
			i++
			continue
		}
		break
	}
	switch {
	case !cflag && i >= len(c.words):
		l.addUnknown(c.name() + " reads its commands from its input")
		return false
	case !cflag:
		return false // runs a script file, as ./script would
	case i >= c.known:
		l.addUnknown(c.name() + " -c with a script only known at run time")
		return false
	}
	l.parse(c.words[i], depth)
	return true
}

// findPrimaryArgs are find's primaries that take one value.
var findPrimaryArgs = map[string]bool{
	"-name": true, "-iname": true, "-path": true, "-ipath": true, "-wholename": true, "-iwholename": true,
	"-regex": true, "-iregex": true, "-type": true, "-xtype": true, "-newer": true, "-anewer": true, "-cnewer": true,
	"-user": true, "-group": true, "-uid": true, "-gid": true, "-perm": true, "-size": true, "-links": true,
	"-mtime": true, "-mmin": true, "-atime": true, "-amin": true, "-ctime": true, "-cmin": true, "-inum": true,
	"-samefile": true, "-lname": true, "-ilname": true, "-maxdepth": true, "-mindepth": true, "-fstype": true,
	"-used": true, "-context": true, "-printf": true, "-regextype": true, "-D": true, "-O": true, "-newerXY": true,
}

// find collects the commands of -exec/-execdir/-ok/-okdir, and stands
// -delete for an rm -rf of the starting points.
func (l *line) find(c command, depth int) {
	i := 1
	var roots []string
	for ; i < len(c.words); i++ {
		w := c.words[i]
		if i >= c.known {
			l.addUnknown("find with arguments only known at run time")
			return
		}
		if w == "-H" || w == "-L" || w == "-P" {
			continue
		}
		if strings.HasPrefix(w, "-") || w == "(" || w == "!" || w == ")" {
			break
		}
		roots = append(roots, w)
	}
	if len(roots) == 0 {
		roots = []string{"."}
	}
	for ; i < len(c.words); i++ {
		w := c.words[i]
		if i >= c.known && (i == 0 || !findPrimaryArgs[c.words[i-1]]) {
			l.addUnknown("find with an expression only known at run time")
			return
		}
		switch w {
		case "-delete":
			l.cmds = append(l.cmds, command{words: append([]string{"rm", "-rf"}, roots...), known: 2 + len(roots), why: "find -delete", synthetic: true})
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(c.words) && (j >= c.known || c.words[j] != ";" && c.words[j] != "+") {
				j++
			}
			if j > i+1 {
				in := sub(command{words: c.words[:j], known: min(c.known, j)}, i+1)
				l.add(in, depth)
			}
			i = j
		}
	}
}

// gitGlobalVal are git's options before the subcommand that take a value
// as the next word.
var gitGlobalVal = map[string]bool{"-C": true, "-c": true, "--git-dir": true, "--work-tree": true, "--namespace": true, "--exec-path": true, "--config-env": true, "--super-prefix": true}

// git stands git -C dir -c k=v push for git push, so that a rule on git
// push sees it (deny and ask rules only: the options still run).
func (l *line) git(c command) {
	i := 1
	for i < len(c.words) {
		if i >= c.known {
			l.cmds = append(l.cmds, command{words: []string{"git"}, known: 1, tail: true, why: "git with options only known at run time", synthetic: true})
			return
		}
		w := c.words[i]
		if !strings.HasPrefix(w, "-") || w == "--" {
			break
		}
		if gitGlobalVal[w] {
			i++
		}
		i++
	}
	if i == 1 || i >= len(c.words) {
		return
	}
	in := sub(c, i)
	in.words = append([]string{c.words[0]}, in.words...)
	in.known++
	in.why, in.synthetic = "git's options dropped", true
	l.cmds = append(l.cmds, in)
}

var home = sync.OnceValue(func() string {
	h, _ := os.UserHomeDir()
	return h
})

// literal returns a word's value when it is known before it runs: quotes
// and backslashes removed, a leading ~/ expanded. pattern reports an
// unquoted glob or brace expression, which bash expands at run time.
func literal(w *syntax.Word) (s string, ok, pattern bool) {
	var b strings.Builder
	for i, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			v := p.Value
			if i == 0 && (v == "~" || strings.HasPrefix(v, "~/")) && home() != "" {
				v = home() + v[1:]
			}
			if isPattern(v) {
				pattern = true
			}
			unescape(&b, v, false)
		case *syntax.SglQuoted:
			if p.Dollar && strings.ContainsRune(p.Value, '\\') {
				return "", false, pattern // ANSI-C escapes: not worth decoding here
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				lit, isLit := q.(*syntax.Lit)
				if !isLit {
					return "", false, pattern
				}
				unescape(&b, lit.Value, true)
			}
		default:
			return "", false, pattern
		}
	}
	return b.String(), true, pattern
}

// isPattern reports an unquoted glob (*, ?, [..]) or brace expression
// ({a,b}, {1..3}); a lone [ is the test command.
func isPattern(v string) bool {
	if strings.ContainsAny(v, "*?") {
		return true
	}
	if i := strings.IndexByte(v, '['); i >= 0 && strings.IndexByte(v[i+1:], ']') >= 0 {
		return true
	}
	i := strings.IndexByte(v, '{')
	return i >= 0 && strings.IndexByte(v[i:], '}') > 0 && (strings.Contains(v[i:], ",") || strings.Contains(v[i:], ".."))
}

// unescape writes v without its backslash escapes: outside quotes a
// backslash quotes any character; inside double quotes only $ ` " \ and a
// newline.
func unescape(b *strings.Builder, v string, dq bool) {
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			n := v[i+1]
			if !dq || strings.IndexByte("$`\"\\\n", n) >= 0 {
				if n != '\n' {
					b.WriteByte(n)
				}
				i++
				continue
			}
		}
		b.WriteByte(v[i])
	}
}

// SimpleCommands returns the words of every simple command of cmdline the
// parser can read: inside compound commands and substitutions, through
// wrappers (env, nice, sudo, xargs, …) and `sh -c`/`eval` literals, with the
// command name of an absolute path reduced to its base name. Words that
// expand at run time are "". It is for callers that look for a command by
// its words (the artifact guard's `git commit -m`); synthetic commands (the
// rm that `find -delete` stands for) are left out.
func SimpleCommands(cmdline string) [][]string {
	var out [][]string
	for _, c := range parseLine(cmdline).cmds {
		if c.unknown() || c.synthetic || c.wrapper {
			continue
		}
		words := append([]string{c.name()}, c.args()...)
		out = append(out, words)
	}
	return out
}
