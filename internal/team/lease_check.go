package team

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/tool"
)

// LeaseMode is what a write to a path another agent's task holds does
// (team.leases in the settings).
type LeaseMode string

const (
	// LeaseRefuse refuses the write before it happens (the default).
	LeaseRefuse LeaseMode = "refuse"
	// LeaseWarn lets the write go ahead and tells the writer and the
	// holder.
	LeaseWarn LeaseMode = "warn"
	// LeaseOff holds no leases: declared files only warn at creation.
	LeaseOff LeaseMode = "off"
)

// ParseLeaseMode reads team.leases ("": refuse).
func ParseLeaseMode(s string) (LeaseMode, error) {
	switch m := LeaseMode(strings.TrimSpace(s)); m {
	case "":
		return LeaseRefuse, nil
	case LeaseRefuse, LeaseWarn, LeaseOff:
		return m, nil
	}
	return "", fmt.Errorf("team.leases %q is unknown (want refuse, warn or off)", s)
}

func (r *Rules) leaseMode() LeaseMode {
	if r == nil || r.Leases == "" {
		return LeaseRefuse
	}
	return r.Leases
}

// maxLeaseFiles bounds the files a bash command's lease snapshot looks at:
// a glob like **/*.go held on a large repository must not make every
// command walk all of it more than once.
const maxLeaseFiles = 2000

// leaser checks one agent's writes against the leases others hold, and
// infers its own task's lease from its first edits.
type leaser struct {
	team func() (store.Team, error)
	self string
	mode LeaseMode
	// ws is the agent's workspace, against which bash targets resolve.
	ws *tool.Workspace
	em emitter
	// sandboxed: bash commands run in bubblewrap, where what others
	// lease can be bound read-only.
	sandboxed bool
	// told remembers the holders already messaged about a path (task id
	// and path; refusals apart from warnings), so a writer's every try
	// does not message again.
	told sync.Map
}

// leaseEnv adds the lease checks to an agent's tool environment: its
// write_file, edit_file and bash writes to a path another agent's
// in-progress task holds are refused (or warned, by the settings), and its
// own writes infer its task's lease when the task declared no files.
func (r *Rules) leaseEnv(env *tool.Env, team func() (store.Team, error), self string, em emitter) *tool.Env {
	mode := r.leaseMode()
	if mode == LeaseOff {
		return env
	}
	l := &leaser{team: team, self: self, mode: mode, ws: env.Workspace, em: em, sandboxed: env.Sandbox != nil}
	env.CheckWrite = l.checkWrite
	env.CheckCommand = l.checkCommand
	return env
}

func fixedTeam(t store.Team) func() (store.Team, error) {
	return func() (store.Team, error) { return t, nil }
}

// heldBy is a lease another agent holds on a path.
type heldBy struct {
	task store.Task
	glob string
}

// board is the team and its board, or ok false when there is none to
// check against (no team yet, or the board unreadable: leases advise, the
// merge queue still guards).
func (l *leaser) board(ctx context.Context) (store.Team, store.Board, bool) {
	t, err := l.team()
	if err != nil || t == nil {
		return nil, store.Board{}, false
	}
	b, err := t.Tasks().Board(ctx)
	if err != nil {
		return nil, store.Board{}, false
	}
	return t, b, true
}

// others are the leases held by tasks self does not own.
func (l *leaser) others(b store.Board) []store.Task {
	var out []store.Task
	for _, t := range Leases(b) {
		if t.Owner != l.self {
			out = append(out, t)
		}
	}
	return out
}

// holder is the first lease of others that covers rel: a path, a shell
// glob, or (removes) a folder taken away with what is below it.
func holder(others []store.Task, rel string, removes bool) (heldBy, bool) {
	pat := rel
	if removes {
		pat = path.Join(rel, "**")
		if rel == "." {
			pat = "**"
		}
	}
	glob := strings.ContainsAny(rel, "*?[{")
	for _, t := range others {
		for _, g := range TaskFiles(t) {
			hit := g == rel
			if !hit {
				hit, _ = doublestar.Match(g, rel)
			}
			if !hit && (removes || glob) {
				hit = globsOverlap(pat, g)
			}
			if hit {
				return heldBy{task: t, glob: g}, true
			}
		}
	}
	return heldBy{}, false
}

func (h heldBy) refusal(rel string) string {
	return fmt.Sprintf("refused before writing %s: it is leased to %s for task #%s (%s) by the glob %q; message %s or wait until that task is completed",
		rel, h.task.Owner, h.task.ID, h.task.Subject, h.glob, h.task.Owner)
}

// warn tells the holder (once per path and task) that self wrote rel
// anyway, and returns the writer's note.
func (l *leaser) warn(ctx context.Context, t store.Team, h heldBy, rel, how string) string {
	if _, dup := l.told.LoadOrStore(h.task.ID+"\x00"+rel, true); !dup {
		msg := store.Message{Type: store.TypeMessage, From: l.self, To: h.task.Owner, TaskID: h.task.ID,
			Summary: "lease warning: " + rel,
			Content: fmt.Sprintf("troupe: %s %s %s, which your task #%s (%s) holds a lease on by the glob %q (team.leases is warn, so the write was not refused). Check the file before you go on; agree with %s who changes it.",
				l.self, how, rel, h.task.ID, h.task.Subject, h.glob, l.self)}
		if sent, err := t.Mailbox().Send(context.WithoutCancel(ctx), msg); err == nil {
			l.em.emit(ctx, t, teamevent.Sent(sent))
		}
	}
	return fmt.Sprintf("troupe: warning: %s is leased to %s for task #%s (%s) by the glob %q; the write went ahead (team.leases is warn) and %s has been told. Agree with %s before changing it again.",
		rel, h.task.Owner, h.task.ID, h.task.Subject, h.glob, h.task.Owner, h.task.Owner)
}

// refuse tells the holder (once per path and task, for this writer) that
// self's write to rel was refused, so the two can agree who changes it,
// and returns the writer's error.
func (l *leaser) refuse(ctx context.Context, t store.Team, h heldBy, rel, how string) error {
	if _, dup := l.told.LoadOrStore("refused\x00"+h.task.ID+"\x00"+rel, true); !dup {
		msg := store.Message{Type: store.TypeMessage, From: l.self, To: h.task.Owner, TaskID: h.task.ID,
			Summary: "lease refusal: " + rel,
			Content: fmt.Sprintf("troupe: %s tried to %s %s, which your task #%s (%s) holds a lease on by the glob %q; the write was refused. If %s needs the change, agree with them who makes it.",
				l.self, how, rel, h.task.ID, h.task.Subject, h.glob, l.self)}
		if sent, err := t.Mailbox().Send(context.WithoutCancel(ctx), msg); err == nil {
			l.em.emit(ctx, t, teamevent.Sent(sent))
		}
	}
	return errors.New(h.refusal(rel))
}

// checkWrite is tool.Env.CheckWrite: write_file and edit_file.
func (l *leaser) checkWrite(ctx context.Context, rel string) error {
	t, b, ok := l.board(ctx)
	if !ok {
		return nil
	}
	if h, ok := holder(l.others(b), rel, false); ok {
		if l.mode == LeaseWarn {
			return &tool.Warning{Note: l.warn(ctx, t, h, rel, "wrote")}
		}
		return l.refuse(ctx, t, h, rel, "write")
	}
	l.infer(ctx, t, b, []string{rel})
	return nil
}

// checkCommand is tool.Env.CheckCommand: the files a bash command's words
// say it writes are checked before it runs. In a sandbox what others lease
// is bound read-only; without one, a command with a target only known at
// run time is watched, and a leased file that changed while it ran is
// reported to the writer and the holder.
func (l *leaser) checkCommand(ctx context.Context, command, dir string) (tool.CommandCheck, error) {
	t, b, ok := l.board(ctx)
	if !ok {
		return tool.CommandCheck{}, nil
	}
	others := l.others(b)
	var chk tool.CommandCheck
	var notes, own []string
	targets, unknown := permission.Writes(command)
	for _, w := range targets {
		rel, ok := l.rel(dir, w.Path)
		if !ok {
			continue
		}
		h, held := holder(others, rel, w.Removes)
		switch {
		case held && l.mode == LeaseWarn:
			notes = append(notes, l.warn(ctx, t, h, rel, "ran a command that writes"))
		case held && w.Removes:
			return chk, fmt.Errorf("%w (the command removes it)", l.refuse(ctx, t, h, rel, "remove"))
		case held:
			return chk, fmt.Errorf("%w (the command writes it)", l.refuse(ctx, t, h, rel, "write"))
		case !w.Removes && !strings.ContainsAny(rel, "*?[{") && rel != ".":
			own = append(own, rel)
		}
	}
	l.infer(ctx, t, b, own)
	chk.Note = strings.Join(notes, "\n")
	switch {
	case len(others) == 0:
	case l.sandboxed:
		chk.ReadOnly = l.readOnly(l.snapshot(others))
	case unknown:
		// Only a command whose targets the words do not all show is
		// watched: files change under every command while their holders
		// work, and a watch of all would blame the command for that.
		before, _ := l.snapshot(others)
		chk.After = func(ctx context.Context) string { return l.after(ctx, others, before) }
	}
	return chk, nil
}

// rel is a command's target as a workspace-relative slash path; ok is
// false outside the workspace.
func (l *leaser) rel(dir, p string) (string, bool) {
	if l.ws == nil || p == "" {
		return "", false
	}
	if !filepath.IsAbs(p) {
		if strings.HasPrefix(p, "~") {
			return "", false // a home directory is outside every workspace troupe runs in
		}
		p = filepath.Join(dir, p)
	}
	r, err := filepath.Rel(l.ws.Dir(), filepath.Clean(p))
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", false
	}
	return filepath.ToSlash(r), true
}

// leasedFile is a file under a lease others hold, as it looked.
type leasedFile struct {
	print string
	task  store.Task
	glob  string
}

// snapshot looks at the files others' leases cover (at most
// maxLeaseFiles), and names the folders a lease holds whole (src/api/**).
func (l *leaser) snapshot(others []store.Task) (map[string]leasedFile, []string) {
	files := map[string]leasedFile{}
	var dirs []string
	if l.ws == nil {
		return files, nil
	}
	root := l.ws.Dir()
	fsys := os.DirFS(root)
	for _, t := range others {
		for _, g := range TaskFiles(t) {
			if p := fixedPrefix(g); p != g && g == p+"/**" {
				dirs = append(dirs, p)
			}
			var opts []doublestar.GlobOption
			if !strings.HasPrefix(g, ".") && !strings.Contains(g, "/.") {
				opts = append(opts, doublestar.WithNoHidden()) // .git and .troupe are no one's lease
			}
			_ = doublestar.GlobWalk(fsys, g, func(p string, d fs.DirEntry) error {
				if len(files) >= maxLeaseFiles {
					return fs.SkipAll
				}
				if _, seen := files[p]; !seen && !d.IsDir() {
					files[p] = leasedFile{print: fingerprint(filepath.Join(root, filepath.FromSlash(p))), task: t, glob: g}
				}
				return nil
			}, opts...)
		}
	}
	return files, dirs
}

// readOnly is what a sandboxed command may not write of others' leases:
// the folders held whole, and the files held one by one. Only existing
// paths: the sandbox would protect a missing one through its parent, which
// is more than the lease holds.
func (l *leaser) readOnly(files map[string]leasedFile, dirs []string) []string {
	root := l.ws.Dir()
	var out []string
	for _, d := range dirs {
		if fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(d))); err == nil && fi.IsDir() {
			out = append(out, filepath.Join(root, filepath.FromSlash(d)))
		}
	}
	within := func(p string) bool {
		for _, d := range dirs {
			if strings.HasPrefix(p, d+"/") {
				return true
			}
		}
		return false
	}
	var each []string
	for p := range files {
		if !within(p) {
			each = append(each, filepath.Join(root, filepath.FromSlash(p)))
		}
	}
	sort.Strings(each)
	if len(each) > maxReadOnlyFiles {
		each = each[:maxReadOnlyFiles] // the after-the-fact check still sees the rest
	}
	return append(out, each...)
}

// maxReadOnlyFiles bounds the files bound read-only one by one: each is a
// mount bubblewrap makes before every command.
const maxReadOnlyFiles = 256

// after compares others' leased files with the snapshot taken before the
// command: a change the check could not see coming is named in the
// writer's result and told to the holder.
func (l *leaser) after(ctx context.Context, others []store.Task, before map[string]leasedFile) string {
	now, _ := l.snapshot(others)
	var changed []string
	seen := map[string]leasedFile{}
	for p, f := range now {
		if b, ok := before[p]; !ok || b.print != f.print {
			changed = append(changed, p)
			seen[p] = f
		}
	}
	for p, f := range before {
		if _, ok := now[p]; !ok && f.print != "absent" {
			changed = append(changed, p) // removed
			seen[p] = f
		}
	}
	if len(changed) == 0 {
		return ""
	}
	sort.Strings(changed)
	t, err := l.team()
	if err != nil || t == nil {
		return ""
	}
	var notes []string
	byTask := map[string][]string{}
	for _, p := range changed {
		f := seen[p]
		if _, dup := l.told.LoadOrStore(f.task.ID+"\x00"+p, true); !dup {
			byTask[f.task.ID] = append(byTask[f.task.ID], p)
		}
		notes = append(notes, fmt.Sprintf("%s (leased to %s for task #%s)", p, f.task.Owner, f.task.ID))
	}
	for _, task := range others {
		paths := byTask[task.ID]
		if len(paths) == 0 {
			continue
		}
		msg := store.Message{Type: store.TypeMessage, From: l.self, To: task.Owner, TaskID: task.ID,
			Summary: "lease broken: " + strings.Join(paths, ", "),
			Content: fmt.Sprintf("troupe: a bash command of %s changed %s, which your task #%s (%s) holds a lease on; the change was not caught before it ran. Check the files before you go on; agree with %s who changes them.",
				l.self, strings.Join(paths, ", "), task.ID, task.Subject, l.self)}
		if sent, err := t.Mailbox().Send(ctx, msg); err == nil {
			l.em.emit(ctx, t, teamevent.Sent(sent))
		}
	}
	return "troupe: this command changed files another teammate holds a lease on: " + strings.Join(notes, ", ") +
		". Their holders have been told; do not change them again without agreeing with them."
}

// infer adds the files self writes to its in-progress task's lease when
// that task declared none: the exact files, marked inferred, one store
// write per new file. With several such tasks in progress it cannot tell
// which one a write is for, and infers nothing.
func (l *leaser) infer(ctx context.Context, t store.Team, b store.Board, rels []string) {
	if len(rels) == 0 {
		return
	}
	var cand []store.Task
	var declared []string
	for _, task := range b.Tasks {
		if task.Status != store.TaskInProgress || task.Owner != l.self {
			continue
		}
		files := TaskFiles(task)
		if len(files) > 0 && !FilesInferred(task) {
			declared = append(declared, files...)
			continue
		}
		cand = append(cand, task)
	}
	if len(cand) != 1 {
		return
	}
	var add []string
	for _, rel := range rels {
		if !coveredBy(declared, rel) && !coveredBy(TaskFiles(cand[0]), rel) && !slices.Contains(add, rel) {
			add = append(add, rel)
		}
	}
	if len(add) == 0 {
		return
	}
	_, _ = t.Tasks().Update(context.WithoutCancel(ctx), cand[0].ID, func(task *store.Task) error {
		files := TaskFiles(*task)
		if task.Status != store.TaskInProgress || task.Owner != l.self || len(files) > 0 && !FilesInferred(*task) {
			return errNoInference // changed meanwhile: leave it as it is
		}
		if task.Metadata == nil {
			task.Metadata = map[string]any{}
		}
		for _, rel := range add {
			if !slices.Contains(files, rel) {
				files = append(files, rel)
			}
		}
		task.Metadata[filesKey] = files
		task.Metadata[inferredKey] = true
		return nil
	})
}

var errNoInference = errors.New("the task's files are no longer inferred")

func coveredBy(globs []string, rel string) bool {
	for _, g := range globs {
		if ok, _ := doublestar.Match(g, rel); ok || g == rel {
			return true
		}
	}
	return false
}
