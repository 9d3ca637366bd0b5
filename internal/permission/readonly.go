package permission

import (
	"strings"
)

// Claude Code runs read-only commands without asking; its documentation
// names ls, cat, git status and git diff among them but gives no complete
// list. This set keeps to commands that only look: each either has no
// option that writes or runs something, or a check refuses the forms that
// do (find -delete/-exec, sort -o, rg --pre, git branch -d, …).
var readOnly = map[string]func(args []string) bool{
	"ls": nil, "cat": nil, "head": nil, "tail": nil, "wc": nil, "pwd": nil, "echo": nil, "printf": nil,
	"grep": nil, "egrep": nil, "fgrep": nil, "rg": rgReadOnly, "find": findReadOnly,
	"which": nil, "type": nil, "file": nil, "stat": nil, "true": nil, "false": nil, "test": nil, "[": nil, ":": nil,
	"cd": nil, "basename": nil, "dirname": nil, "realpath": nil, "readlink": nil, "du": nil, "df": nil,
	"tree": noShort('o'), "diff": nil, "cmp": nil, "sort": sortReadOnly, "uniq": positionals(1), "cut": nil, "tr": nil,
	"nl": nil, "od": nil, "xxd": positionals(1), "hexdump": nil, "strings": nil, "base64": noShort('o'),
	"md5sum": nil, "sha1sum": nil, "sha256sum": nil, "sha512sum": nil, "cksum": nil,
	"whoami": nil, "id": nil, "uname": nil, "hostname": positionals(0), "date": dateReadOnly,
	"printenv": nil, "env": positionals(0), "jq": nil, "column": nil, "less": nil, "more": nil, "tac": nil,
	"rev": nil, "comm": nil, "paste": nil, "fold": nil, "expand": nil, "seq": nil, "sleep": nil,
	"ps": nil, "uptime": nil, "free": nil, "git": gitReadOnly, "command": commandReadOnly,
}

// isReadOnly reports whether a command only reads. A command with words
// the line does not give is read-only only when no option could change
// that (xargs cat, not xargs find).
func isReadOnly(c command) bool {
	if c.unknown() || strings.ContainsRune(c.words[0], '/') {
		return false // ./ls is whatever the workspace holds
	}
	check, ok := readOnly[c.words[0]]
	if !ok {
		return false
	}
	if check == nil {
		return true
	}
	if c.open() {
		return false
	}
	return check(c.args())
}

func rgReadOnly(args []string) bool {
	for _, a := range args {
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "--pre") {
			return false // runs a preprocessor
		}
	}
	return true
}

func findReadOnly(args []string) bool {
	for _, a := range args {
		switch a {
		case "-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls":
			return false
		}
	}
	return true
}

func sortReadOnly(args []string) bool {
	for _, a := range args {
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "--output") || strings.HasPrefix(a, "--compress-program") ||
			len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.ContainsRune(a, 'o') {
			return false
		}
	}
	return true
}

func dateReadOnly(args []string) bool {
	for _, a := range args {
		if a == "-s" || strings.HasPrefix(a, "--set") || len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.ContainsRune(a, 's') {
			return false
		}
	}
	return true
}

func commandReadOnly(args []string) bool {
	for _, a := range args {
		if a == "-v" || a == "-V" {
			return true
		}
	}
	return false
}

// noShort refuses a short option (tree -o FILE writes FILE).
func noShort(o byte) func([]string) bool {
	return func(args []string) bool {
		for _, a := range args {
			if a == "--" {
				break
			}
			if len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.IndexByte(a, o) >= 0 || strings.HasPrefix(a, "--output") {
				return false
			}
		}
		return true
	}
}

// positionals allows at most n operands (uniq IN OUT writes OUT).
func positionals(n int) func([]string) bool {
	return func(args []string) bool {
		return len(operands(args)) <= n
	}
}

// operands are the words that are not options (all after --).
func operands(args []string) []string {
	var out []string
	for i, a := range args {
		if a == "--" {
			return append(out, args[i+1:]...)
		}
		if len(a) > 1 && a[0] == '-' {
			continue
		}
		out = append(out, a)
	}
	return out
}

// gitReadOnly accepts git's inspection subcommands.
func gitReadOnly(args []string) bool {
	i := 0
	for i < len(args) {
		a := args[i]
		switch {
		case a == "-C":
			i += 2
			continue
		case a == "--no-pager" || a == "-P" || a == "--no-optional-locks" || a == "--literal-pathspecs":
			i++
			continue
		case strings.HasPrefix(a, "-"):
			return false // -c core.pager=…, --exec-path, … can run anything
		}
		break
	}
	if i >= len(args) {
		return false
	}
	sub, rest := args[i], args[i+1:]
	for _, a := range rest {
		if strings.HasPrefix(a, "--output") || strings.HasPrefix(a, "--open-files-in-pager") || a == "-O" || strings.HasPrefix(a, "--ext-diff") {
			return false
		}
	}
	switch sub {
	case "status", "diff", "log", "show", "blame", "rev-parse", "ls-files", "ls-tree", "cat-file",
		"describe", "shortlog", "grep", "rev-list", "merge-base", "name-rev", "whatchanged", "version", "help":
		return true
	case "branch":
		return gitBranchList(rest)
	case "tag":
		return len(rest) == 0 || rest[0] == "-l" || rest[0] == "--list" || rest[0] == "-n"
	case "remote":
		return len(rest) == 0 || len(rest) == 1 && (rest[0] == "-v" || rest[0] == "--verbose") || rest[0] == "get-url"
	case "config":
		return len(rest) > 0 && (rest[0] == "--get" || rest[0] == "--get-all" || rest[0] == "--list" || rest[0] == "-l" || rest[0] == "--get-regexp")
	case "reflog":
		return len(rest) == 0 || rest[0] == "show"
	case "stash":
		return len(rest) > 0 && (rest[0] == "list" || rest[0] == "show")
	case "worktree":
		return len(rest) > 0 && rest[0] == "list"
	}
	return false
}

var gitBranchFlags = map[string]bool{
	"-a": true, "-r": true, "-l": true, "-v": true, "-vv": true, "--all": true, "--remotes": true, "--list": true,
	"--verbose": true, "--show-current": true, "--no-color": true, "--color": true, "--column": true, "--no-column": true,
}

func gitBranchList(args []string) bool {
	list := false
	for _, a := range args {
		if a == "-l" || a == "--list" {
			list = true
		}
	}
	for _, a := range args {
		switch {
		case gitBranchFlags[a]:
		case strings.HasPrefix(a, "--contains") || strings.HasPrefix(a, "--no-contains") || strings.HasPrefix(a, "--merged") ||
			strings.HasPrefix(a, "--no-merged") || strings.HasPrefix(a, "--points-at") || strings.HasPrefix(a, "--sort=") ||
			strings.HasPrefix(a, "--format=") || strings.HasPrefix(a, "--color=") || strings.HasPrefix(a, "--abbrev="):
		case !strings.HasPrefix(a, "-") && list:
		default:
			return false
		}
	}
	return true
}

// readers read the files their operands name, whether or not the files
// exist yet when the command is checked. Other commands' words count as
// reads only when they name an existing file.
var readers = map[string]bool{
	"cat": true, "head": true, "tail": true, "less": true, "more": true, "grep": true, "egrep": true, "fgrep": true,
	"rg": true, "cp": true, "mv": true, "tar": true, "zip": true, "gzip": true, "base64": true, "xxd": true, "od": true,
	"hexdump": true, "strings": true, "sed": true, "awk": true, "sort": true, "uniq": true, "cut": true, "diff": true,
	"cmp": true, "wc": true, "nl": true, "tac": true, "file": true, "md5sum": true, "sha1sum": true, "sha256sum": true,
	"sha512sum": true, "scp": true, "rsync": true, "source": true, ".": true, "jq": true, "vim": true, "vi": true, "nano": true,
}

// writeTargets are the files a command writes or removes, as far as its
// words tell; unknown reports a target only known at run time, removes a
// command that takes whole folders away (what is inside goes with them).
func writeTargets(c command) (targets []string, unknown, removes bool) {
	name, args := c.name(), c.args()
	if c.unknown() {
		return nil, false, false
	}
	removes = removers[name]
	open := c.open()
	ops := func(a []string) []string {
		var out []string
		for _, o := range operands(a) {
			if o == "" {
				unknown = true
				continue
			}
			out = append(out, o)
		}
		return out
	}
	switch name {
	case "rm", "rmdir", "touch", "truncate", "mkdir", "tee", "shred", "unlink", "chmod", "chown", "chgrp", "mv":
		targets = ops(args)
	case "cp", "ln", "install":
		for i, a := range args {
			if (a == "-t" || a == "--target-directory") && i+1 < len(args) {
				return []string{args[i+1]}, open, false
			}
			if v, ok := strings.CutPrefix(a, "--target-directory="); ok {
				return []string{v}, open, false
			}
		}
		if o := ops(args); len(o) > 0 {
			dst := o[len(o)-1]
			targets = []string{dst}
			for _, src := range o[:len(o)-1] {
				targets = append(targets, strings.TrimSuffix(dst, "/")+"/"+baseName(src))
			}
		}
	case "sed", "perl":
		for _, a := range args {
			if a == "--in-place" || strings.HasPrefix(a, "--in-place=") || len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.ContainsRune(a, 'i') {
				targets = ops(args)
				break
			}
		}
	case "dd":
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "of="); ok {
				targets = append(targets, v)
			}
		}
	case "curl", "wget":
		for i, a := range args {
			if (a == "-o" || a == "--output" || a == "-O" && name == "wget" || a == "--output-document") && i+1 < len(args) {
				targets = append(targets, args[i+1])
			}
		}
	case "find":
		for i, a := range args {
			if (a == "-fprint" || a == "-fprint0" || a == "-fprintf" || a == "-fls") && i+1 < len(args) {
				targets = append(targets, args[i+1])
			}
		}
	case "git":
		targets = gitWrites(args)
	}
	if open && len(targets) == 0 && writesAny[name] {
		unknown = true
	}
	return targets, unknown || open && writesAny[name], removes
}

// removers take folders away with their contents.
var removers = map[string]bool{"rm": true, "rmdir": true, "mv": true, "shred": true, "unlink": true}

// writesAny are the commands whose every operand may be a target.
var writesAny = map[string]bool{
	"rm": true, "rmdir": true, "touch": true, "truncate": true, "mkdir": true, "tee": true, "shred": true,
	"unlink": true, "chmod": true, "chown": true, "chgrp": true, "mv": true, "cp": true, "ln": true, "install": true,
}

// gitWrites: git config without a read-only option writes the repository's
// config, the file that names its hooks.
func gitWrites(args []string) []string {
	dir := ""
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		if args[i] == "-C" && i+1 < len(args) {
			dir = args[i+1]
			i++
		}
		i++
	}
	if i >= len(args) || args[i] != "config" {
		return nil
	}
	rest := args[i+1:]
	for j, a := range rest {
		switch {
		case a == "--get" || a == "--get-all" || a == "--list" || a == "-l" || a == "--get-regexp" || a == "--global" || a == "--system":
			return nil
		case (a == "--file" || a == "-f") && j+1 < len(rest):
			return []string{rest[j+1]}
		}
	}
	if dir != "" {
		return []string{strings.TrimSuffix(dir, "/") + "/.git/config"}
	}
	return []string{".git/config"}
}

func baseName(p string) string {
	p = strings.TrimRight(p, "/")
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// editCommands are the filesystem commands acceptEdits mode runs without
// asking when everything they touch is inside the workspace, as Claude
// Code's acceptEdits does.
var editCommands = map[string]bool{"mkdir": true, "touch": true, "mv": true, "cp": true}
