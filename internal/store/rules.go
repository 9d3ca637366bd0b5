package store

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// BoardTx is one atomic change of a task board, as a backend provides it to
// the board's rules (CreateTask, UpdateTask, ClaimTask, ClaimNextTask,
// ClaimFirstTask), so that every backend links, unlinks and claims tasks
// alike. Reads see the
// board as it was when the transaction began plus the transaction's own
// writes; the writes take effect together when the backend commits, or not
// at all when a rule returns an error.
//
// A backend with a lock (the file store) runs a rule once under it. A
// backend with compare-and-set (a key-value store) may note the revision of
// every task Get returned, commit with a compare-and-set on each, and run
// the rule again on a fresh transaction after a conflict: the rules change
// nothing outside the transaction (an Update's fn may then run more than
// once).
type BoardTx interface {
	// Get returns task id: an error wrapping ErrTaskNotFound if there is
	// none or it is deleted, another error if it exists but cannot be read.
	Get(id string) (Task, error)
	// Put writes t, new or changed. The rules hand t over: they change
	// neither it nor what it refers to afterwards (the task they return
	// may share its lists and metadata).
	Put(t Task)
	// Remove deletes task id.
	Remove(id string)
	// IDs returns the id of every task on the board, readable or not, in
	// numeric order.
	IDs() ([]string, error)
	// NextID returns the id of a new task: one past the highest the board
	// has ever had, so that an id is never reused after a delete. It is
	// reserved only if the transaction commits.
	NextID() (string, error)
}

// CreateTask is the rule of Tasks.Create: the task gets the next id, is
// pending unless t says otherwise, and its BlockedBy and Blocks are linked
// on both sides (a cycle is refused with ErrCycle).
func CreateTask(x BoardTx, t Task, now time.Time) (Task, error) {
	id, err := x.NextID()
	if err != nil {
		return Task{}, err
	}
	now = now.UTC()
	base := Task{
		ID: id, Subject: t.Subject, Description: t.Description, ActiveForm: t.ActiveForm,
		Status: TaskPending, Owner: t.Owner, BlockedBy: []string{}, Blocks: []string{},
		Metadata: t.Metadata, CreatedAt: now, UpdatedAt: now,
	}
	if base.Metadata == nil {
		base.Metadata = map[string]any{}
	}
	if err := ValidateTask(&base); err != nil {
		return Task{}, err
	}
	status := t.Status
	if status == "" {
		status = TaskPending
	}
	return change(x, base, func(n *Task) error {
		n.Status = status
		n.BlockedBy = slices.Clone(t.BlockedBy)
		n.Blocks = slices.Clone(t.Blocks)
		return nil
	}, now)
}

// UpdateTask is the rule of Tasks.Update: fn changes a copy of task id;
// changes to BlockedBy or Blocks are mirrored on the other tasks, a cycle is
// refused (ErrCycle), completing a task removes it from every BlockedBy, and
// deleting it unlinks it and removes it.
func UpdateTask(x BoardTx, id string, fn func(*Task) error, now time.Time) (Task, error) {
	cur, err := x.Get(id)
	if err != nil {
		return Task{}, err
	}
	return change(x, cur, fn, now.UTC())
}

// ClaimTask is the rule of Tasks.Claim: owner gets task id, in progress,
// only if it is pending (ErrNotPending), unowned (ErrClaimed, naming the
// owner) and unblocked (ErrBlocked).
func ClaimTask(x BoardTx, id, owner string, now time.Time) (Task, error) {
	if owner == "" {
		return Task{}, fmt.Errorf("%w: no owner", ErrInvalidName)
	}
	t, err := x.Get(id)
	if err != nil {
		return Task{}, err
	}
	if err := ClaimRefusal(&t); err != nil {
		return Task{}, err
	}
	return claim(x, t, owner, now), nil
}

// ClaimRefusal is ClaimTask's answer for t when t cannot be claimed (nil
// when it can): a backend that refuses from a copy of the board answers as
// the rule would.
func ClaimRefusal(t *Task) error {
	if err := t.Claimable(); err != nil {
		if t.Owner != "" {
			return fmt.Errorf("%w (owner %s)", err, t.Owner)
		}
		return err
	}
	return nil
}

// ClaimNextTask is the rule of Tasks.ClaimNext: owner claims the claimable
// task with the lowest id (ErrNoTask if there is none). Tasks that cannot be
// read are passed over.
func ClaimNextTask(x BoardTx, owner string, now time.Time) (Task, error) {
	ids, err := x.IDs()
	if err != nil {
		return Task{}, err
	}
	return ClaimFirstTask(x, owner, ids, now)
}

// ClaimFirstTask is the rule of Tasks.ClaimFirst: owner claims the first of
// ids that is claimable, in their order (ErrNoTask if none is). Tasks that
// are gone or cannot be read are passed over.
func ClaimFirstTask(x BoardTx, owner string, ids []string, now time.Time) (Task, error) {
	if owner == "" {
		return Task{}, fmt.Errorf("%w: no owner", ErrInvalidName)
	}
	for _, id := range ids {
		t, err := x.Get(id)
		if err != nil || t.Claimable() != nil {
			continue
		}
		return claim(x, t, owner, now), nil
	}
	return Task{}, ErrNoTask
}

func claim(x BoardTx, t Task, owner string, now time.Time) Task {
	t.Owner = owner
	t.Status = TaskInProgress
	t.UpdatedAt = now.UTC()
	x.Put(t)
	return t
}

// change applies fn to a copy of cur and mirrors the dependency changes on
// the tasks at the other end of each link.
func change(x BoardTx, cur Task, fn func(*Task) error, now time.Time) (Task, error) {
	next := CloneTask(cur)
	if err := fn(&next); err != nil {
		return Task{}, err
	}
	next.ID, next.CreatedAt = cur.ID, cur.CreatedAt
	next.BlockedBy = sortedIDs(next.BlockedBy)
	next.Blocks = sortedIDs(next.Blocks)
	if next.Metadata == nil {
		next.Metadata = map[string]any{}
	}
	if err := ValidateTask(&next); err != nil {
		return Task{}, err
	}
	next.UpdatedAt = now
	id := next.ID
	// edit changes the task at the other end of a link, if it is there: a
	// link to a task gone or unreadable is dropped from this side only.
	edit := func(d string, fn func(*Task)) {
		if dt, err := x.Get(d); err == nil {
			fn(&dt)
			x.Put(dt)
		}
	}

	if next.Status == TaskDeleted {
		for _, d := range cur.BlockedBy {
			edit(d, func(dt *Task) { dt.Blocks = without(dt.Blocks, id) })
		}
		for _, d := range cur.Blocks {
			edit(d, func(dt *Task) { dt.BlockedBy = without(dt.BlockedBy, id) })
		}
		x.Remove(id)
		next.BlockedBy, next.Blocks = []string{}, []string{}
		return next, nil
	}

	added := false
	for _, d := range minus(next.BlockedBy, cur.BlockedBy) {
		dt, err := x.Get(d)
		if err != nil {
			return Task{}, fmt.Errorf("blocked by: %w", err)
		}
		if dt.Status == TaskCompleted {
			next.BlockedBy = without(next.BlockedBy, d) // already done
			continue
		}
		dt.Blocks = sortedIDs(append(slices.Clip(dt.Blocks), id))
		x.Put(dt)
		added = true
	}
	for _, d := range minus(cur.BlockedBy, next.BlockedBy) {
		edit(d, func(dt *Task) { dt.Blocks = without(dt.Blocks, id) })
	}
	for _, d := range minus(next.Blocks, cur.Blocks) {
		dt, err := x.Get(d)
		if err != nil {
			return Task{}, fmt.Errorf("blocks: %w", err)
		}
		if next.Status == TaskCompleted {
			next.Blocks = without(next.Blocks, d)
			continue
		}
		dt.BlockedBy = sortedIDs(append(slices.Clip(dt.BlockedBy), id))
		x.Put(dt)
		added = true
	}
	for _, d := range minus(cur.Blocks, next.Blocks) {
		edit(d, func(dt *Task) { dt.BlockedBy = without(dt.BlockedBy, id) })
	}
	if next.Status == TaskCompleted {
		for _, d := range next.Blocks {
			edit(d, func(dt *Task) { dt.BlockedBy = without(dt.BlockedBy, id) })
		}
		next.Blocks = []string{}
	}
	x.Put(next)
	if added {
		if err := checkCycle(x, id); err != nil {
			return Task{}, err
		}
	}
	return next, nil
}

// checkCycle reports whether id can reach itself through blocked_by. Only
// links touching id were added, so any new cycle passes through it.
func checkCycle(x BoardTx, id string) error {
	seen := map[string]bool{}
	var visit func(string) bool
	visit = func(n string) bool {
		t, err := x.Get(n)
		if err != nil {
			return false
		}
		for _, d := range t.BlockedBy {
			if d == id {
				return true
			}
			if !seen[d] {
				seen[d] = true
				if visit(d) {
					return true
				}
			}
		}
		return false
	}
	if visit(id) {
		return fmt.Errorf("%w through task %s", ErrCycle, id)
	}
	return nil
}

// CloneTask returns a deep copy of t (nil lists as empty ones), which the
// caller may change without touching t.
func CloneTask(t Task) Task {
	c := t
	c.BlockedBy = slices.Clone(t.BlockedBy)
	c.Blocks = slices.Clone(t.Blocks)
	if c.BlockedBy == nil {
		c.BlockedBy = []string{}
	}
	if c.Blocks == nil {
		c.Blocks = []string{}
	}
	if t.Metadata != nil {
		// Metadata values are JSON values; a round trip is a deep copy.
		if data, err := json.Marshal(t.Metadata); err == nil {
			var m map[string]any
			if json.Unmarshal(data, &m) == nil {
				c.Metadata = m
			}
		}
	}
	return c
}

// CompareTaskIDs orders task ids by their numeric value, then as text.
func CompareTaskIDs(a, b string) int {
	na, nb := TaskNum(a), TaskNum(b)
	switch {
	case na < nb:
		return -1
	case na > nb:
		return 1
	}
	return strings.Compare(a, b)
}

func sortedIDs(ids []string) []string {
	out := slices.Clone(ids)
	slices.SortFunc(out, CompareTaskIDs)
	out = slices.Compact(out)
	if out == nil {
		out = []string{}
	}
	return out
}

func without(ids []string, id string) []string {
	out := slices.DeleteFunc(slices.Clone(ids), func(d string) bool { return d == id })
	if out == nil {
		out = []string{}
	}
	return out
}

// minus returns the ids in a that are not in b.
func minus(a, b []string) []string {
	var out []string
	for _, id := range a {
		if !slices.Contains(b, id) {
			out = append(out, id)
		}
	}
	return out
}
