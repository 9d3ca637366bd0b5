package team

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/troupe-dev/troupe/internal/store"
)

// filesKey is the task metadata that holds the paths a task declares it
// will change (workspace-relative globs). While the task is in progress
// its owner holds a lease on them.
const filesKey = "files"

// inferredKey marks a task's files as inferred from its owner's first
// edits rather than declared: they grow with each new file it writes.
const inferredKey = "filesInferred"

// FilesInferred reports whether task t's files were inferred from its
// owner's edits rather than declared.
func FilesInferred(t store.Task) bool {
	v, _ := t.Metadata[inferredKey].(bool)
	return v
}

// TaskFiles returns the globs task t declared.
func TaskFiles(t store.Task) []string {
	var out []string
	switch v := t.Metadata[filesKey].(type) {
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	case []string:
		out = v
	}
	return out
}

// Leases returns the leases held on the board: by in-progress tasks with
// an owner and declared paths.
func Leases(b store.Board) []store.Task {
	var out []store.Task
	for _, t := range b.Tasks {
		if t.Status == store.TaskInProgress && t.Owner != "" && len(TaskFiles(t)) > 0 {
			out = append(out, t)
		}
	}
	return out
}

// cleanGlobs checks and normalises declared paths.
func cleanGlobs(in []string) ([]string, error) {
	var out []string
	for _, g := range in {
		g = strings.TrimPrefix(strings.TrimSpace(g), "./")
		if g == "" {
			continue
		}
		if strings.HasPrefix(g, "/") || g == ".." || strings.HasPrefix(g, "../") {
			return nil, fmt.Errorf("files: %q must be relative to the workspace", g)
		}
		if !doublestar.ValidatePattern(g) {
			return nil, fmt.Errorf("files: %q is not a valid glob", g)
		}
		out = append(out, path.Clean(g))
	}
	return out, nil
}

// globsOverlap reports whether two globs may name a common path: one's
// fixed folder prefix lies within the other's, and their remaining parts
// do not obviously differ. It errs on the side of a warning.
func globsOverlap(a, b string) bool {
	if a == b {
		return true
	}
	if ok, _ := doublestar.Match(a, b); ok {
		return true
	}
	if ok, _ := doublestar.Match(b, a); ok {
		return true
	}
	pa, pb := fixedPrefix(a), fixedPrefix(b)
	if pa == a && pb == b {
		return false // two distinct literal paths
	}
	within := func(x, y string) bool { return x == "" || y == x || strings.HasPrefix(y, x+"/") }
	switch {
	case pa == a: // a literal, b a glob
		return within(pb, a)
	case pb == b:
		return within(pa, b)
	}
	return within(pa, pb) || within(pb, pa)
}

// fixedPrefix is the glob's leading folders without a wildcard (the whole
// glob when it has none).
func fixedPrefix(g string) string {
	segs := strings.Split(g, "/")
	for i, s := range segs {
		if strings.ContainsAny(s, "*?[{\\") {
			return strings.Join(segs[:i], "/")
		}
	}
	return g
}

// overlaps names the open tasks (other than id) whose declared paths may
// overlap files.
func overlaps(b store.Board, id string, files []string) []string {
	var out []string
	for _, t := range b.Tasks {
		if t.ID == id || t.Status == store.TaskCompleted || t.Status == store.TaskDeleted {
			continue
		}
		for _, g := range TaskFiles(t) {
			hit := ""
			for _, f := range files {
				if globsOverlap(f, g) {
					hit = f
					break
				}
			}
			if hit != "" {
				out = append(out, fmt.Sprintf("#%s (%s: %s overlaps %s)", t.ID, t.Subject, hit, g))
				break
			}
		}
	}
	return out
}

// overlapWarning tells the lead when a new task's declared paths overlap
// an open task's: as the result of its own TaskCreate, or as a message
// when a teammate created it.
func (b *binding) overlapWarning(ctx context.Context, t store.Team, got store.Task, files []string) string {
	if len(files) == 0 {
		return ""
	}
	board, err := t.Tasks().Board(ctx)
	if err != nil {
		return ""
	}
	hits := overlaps(board, got.ID, files)
	if len(hits) == 0 {
		return ""
	}
	warn := fmt.Sprintf("Warning: task #%s's files overlap %s; two teammates holding them at once will be refused each other's writes or conflict at merge. Consider blockedBy or splitting the files.", got.ID, strings.Join(hits, ", "))
	if !b.lead {
		_, _ = b.sendAsIn(ctx, t, store.Message{Type: store.TypeMessage, From: b.self, To: store.LeadName, TaskID: got.ID,
			Summary: "overlapping files on task #" + got.ID, Content: warn})
	}
	return "\n" + warn
}
