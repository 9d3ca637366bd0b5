package permission

// Written is a file a bash command line writes, as the line names it.
type Written struct {
	// Path is the target as written: relative to the command's
	// directory unless absolute, and possibly a shell glob (rm src/*.go).
	Path string
	// Removes reports a command that takes the path away with whatever
	// lies below it (rm -r, mv), so a folder stands for its contents.
	Removes bool
}

// Writes returns the files a bash command line writes, read the way the
// permission engine reads a line for protected paths: redirection targets
// and the operands of writing commands (tee, sed -i, cp, mv, rm, touch,
// mkdir, dd of=, …), through wrappers and sh -c literals. unknown reports
// a target only known at run time ($f, a command name built from an
// expansion). It is a best-effort reading; a sandbox is the wall.
func Writes(cmdline string) (out []Written, unknown bool) {
	l := parseLine(cmdline)
	for _, t := range l.writes {
		if !t.known {
			unknown = true
			continue
		}
		out = append(out, Written{Path: t.path})
	}
	for _, c := range l.cmds {
		if c.unknown() {
			unknown = true
			continue
		}
		ts, unk, removes := writeTargets(c)
		unknown = unknown || unk
		for _, t := range ts {
			out = append(out, Written{Path: t, Removes: removes})
		}
	}
	return out, unknown
}
