package file

import (
	"context"
	"fmt"

	"github.com/troupe-dev/troupe/internal/store"
)

type boardReq struct {
	fn   func(*tx) error
	done chan error
}

// run commits fn in the group commit of one board's changes in this
// process (a batcher). A change that finds another being committed queues;
// the next committer takes every queued change under one hold of the board
// lock and runs them in order, each seeing the ones before it. The changes
// that can be staged (stageable: one task file, or only new tasks) are
// then made durable together: through the board's log, one line and one
// fdatasync for all of them before their files are written (boardlog.go);
// without the log, every file written and fsynced at once, renamed or
// linked into place, and the directory fsynced once. Any other change (a
// removal, an update of several existing tasks) is committed on its own
// through tasks/.intent, after the ones queued ahead of it.
//
// Each caller still returns only once its own change is durable, and a
// change is visible to readers only once it is durable; readers never see
// a staged change before that (a List under the lock waits for the batch).
func (b *tasks) run(ctx context.Context, fn func(*tx) error) error {
	r := &boardReq{fn: fn, done: make(chan error, 1)}
	b.t.s.batches.get(b.t.key).submit(r, func(batch []*boardReq) {
		// The lock is waited for without ctx: other callers' changes ride
		// on this hold of it.
		err := b.t.s.locks.withLock(context.WithoutCancel(ctx), b.t.path("tasks", ".lock"), func() error {
			if err := b.recover(); err != nil {
				return err
			}
			b.commitBatch(batch)
			return nil
		})
		if err != nil {
			for _, q := range batch {
				q.done <- err
			}
		}
	})
	return <-r.done
}

// commitBatch runs the queued changes in order and answers each.
func (b *tasks) commitBatch(batch []*boardReq) {
	staged := map[string]*store.Task{}
	var order []string      // staged ids, first write first
	var waiting []*boardReq // staged changes, answered at the flush
	flush := func() error {
		err := b.writeStaged(staged, order)
		for _, q := range waiting {
			q.done <- err
		}
		staged, order, waiting = map[string]*store.Task{}, nil, nil
		return err
	}
	for _, q := range batch {
		x := &tx{b: b, cache: make(map[string]*store.Task), locked: true, staged: staged}
		if err := q.fn(x); err != nil {
			q.done <- err
			continue
		}
		if x.stageable() {
			for _, id := range x.dirty {
				if _, ok := staged[id]; !ok {
					order = append(order, id)
				}
				staged[id] = x.cache[id]
			}
			waiting = append(waiting, q)
			continue
		}
		if len(waiting) > 0 {
			if err := flush(); err != nil {
				q.done <- err // it read what could not be written
				continue
			}
		}
		q.done <- x.commit()
	}
	if len(waiting) > 0 {
		flush()
	}
}

// stageable reports whether a transaction's change joins the staged
// writes of its group commit: it removes nothing, and it writes one task
// file or, where the board has its log (boardlog.go), only tasks it makes
// (the TaskCreate calls of a lead's reply are one such change). The log's
// line is then the change's redo record, as tasks/.intent is for the other
// changes of several files, and it costs one fdatasync where the intent
// and the new files cost one each and two of the directory. A reader
// without the lock may see some of the new tasks before the others, as if
// they had been made one after another; each it sees is durable. Without
// the log a change of several files keeps its intent.
func (x *tx) stageable() bool {
	if len(x.removed) > 0 || len(x.dirty) == 0 {
		return false
	}
	for _, id := range x.dirty {
		if x.cache[id] == nil {
			return false
		}
	}
	if len(x.dirty) == 1 {
		return true
	}
	if !logOn() || !x.onDiskRead {
		return false
	}
	for _, id := range x.dirty {
		// Past the highest id on disk (read under this hold of the lock)
		// and not made by an earlier change of the group: a new file.
		if _, ok := x.staged[id]; ok || store.TaskNum(id) <= x.onDisk {
			return false
		}
	}
	return true
}

// writeStaged makes the staged tasks durable in their files: see
// tasks.run.
func (b *tasks) writeStaged(staged map[string]*store.Task, order []string) error {
	if err := b.logChange(order); err != nil {
		return fmt.Errorf("task board of team %s: %w", b.t.name, err)
	}
	ts := make([]*store.Task, len(order))
	for i, id := range order {
		ts[i] = staged[id]
	}
	write := b.logBatch
	if !logOn() {
		write = func(ts []*store.Task) error { return b.writeTasks(ts, true) }
	}
	if err := write(ts); err != nil {
		return err
	}
	b.t.s.hub.notify(tasksKey(b.t.key))
	return nil
}
