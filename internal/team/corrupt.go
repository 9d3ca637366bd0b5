package team

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/troupe-dev/troupe/internal/store"
)

// boardLines renders a board for a model, one line per task in id order;
// a task whose file cannot be read has a line saying so, so that nobody
// takes the board for complete when it is not.
func boardLines(b store.Board) []string {
	type line struct {
		id   string
		text string
	}
	lines := make([]line, 0, len(b.Tasks)+len(b.Corrupt))
	for _, t := range b.Tasks {
		lines = append(lines, line{t.ID, t.Line()})
	}
	for _, c := range b.Corrupt {
		lines = append(lines, line{c.ID, fmt.Sprintf("#%s [corrupt] its file %s cannot be read: %s", c.ID, c.Path, c.Err)})
	}
	slices.SortStableFunc(lines, func(x, y line) int { return cmp.Compare(store.TaskNum(x.id), store.TaskNum(y.id)) })
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.text
	}
	return out
}

// corruptWhy says why corrupt tasks keep a team from being done: nobody
// knows whether their work was finished.
func corruptWhy(bad []store.Corrupt) string {
	parts := make([]string, len(bad))
	for i, c := range bad {
		parts[i] = fmt.Sprintf("#%s (%s: %s)", c.ID, c.Path, c.Err)
	}
	return fmt.Sprintf("tasks %s are corrupt: fix or remove their files", strings.Join(parts, ", "))
}
