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
// the next committer
// takes every queued change under one hold of the board lock and runs
// them in order, each seeing the ones before it. The changes that write
// one task file each (a claim, most updates) are then made durable
// together: every new file written and fsynced, the fsyncs at once (on a
// journaled file system the first commits them all and the others find
// little left to do; without a journal each is a write of its own), every
// one renamed into place, and the directory fsynced once. A
// change that touches several files, or creates a task, is committed on
// its own as before, after the ones queued ahead of it.
//
// Each caller still returns only once its own change is durable, and a
// change is visible to readers only once it is in its file; readers never
// see a staged change (a List under the lock waits for the batch).
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
		if len(x.dirty) == 1 && len(x.removed) == 0 && x.cache[x.dirty[0]] != nil {
			id := x.dirty[0]
			if _, ok := staged[id]; !ok {
				order = append(order, id)
			}
			staged[id] = x.cache[id]
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
