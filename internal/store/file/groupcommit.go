package file

import (
	"context"
	"sync"
)

// groupAppend is a group commit of the appends to one file of this
// process (the journal, a transcript): an append that finds another one
// writing waits for it, and the next writer takes every line that queued
// meanwhile and appends them with one write and one fsync under the file's
// lock. Each Append still returns only once its own line is fsynced, in
// the order the appends queued; what changes is that N appends arriving
// together cost one fsync instead of N, one after another.
type groupAppend struct {
	mu      sync.Mutex
	writing bool
	queue   []*pendingLine
}

type pendingLine struct {
	line []byte
	done chan error
}

// groups hands out one groupAppend per file path.
type groups struct {
	mu sync.Mutex
	m  map[string]*groupAppend
}

func (gs *groups) get(path string) *groupAppend {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.m == nil {
		gs.m = make(map[string]*groupAppend)
	}
	g, ok := gs.m[path]
	if !ok {
		g = &groupAppend{}
		gs.m[path] = g
	}
	return g
}

// append appends line to path under lockPath, with the lines of other
// appends queued at the same time.
func (g *groupAppend) append(ctx context.Context, ls *locks, lockPath, path string, line []byte) error {
	p := &pendingLine{line: line, done: make(chan error, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, p)
	if g.writing {
		g.mu.Unlock()
		return <-p.done // the writer of the batch this line joined answers
	}
	g.writing = true
	for {
		batch := g.queue
		g.queue = nil
		g.mu.Unlock()
		var buf []byte
		if len(batch) == 1 {
			buf = batch[0].line
		} else {
			for _, q := range batch {
				buf = append(buf, q.line...)
			}
		}
		// The lock is waited for without ctx: the lines of other callers
		// ride on this write.
		err := ls.withLock(context.WithoutCancel(ctx), lockPath, func() error { return appendLine(path, buf, nil) })
		for _, q := range batch {
			q.done <- err
		}
		g.mu.Lock()
		if len(g.queue) == 0 {
			g.writing = false
			g.mu.Unlock()
			return <-p.done
		}
	}
}
