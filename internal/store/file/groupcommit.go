package file

import (
	"context"
	"sync"
)

// batcher is a group commit: a request that finds a batch being
// committed queues, and the caller that found none commits every batch
// queued meanwhile, one after another, until none is left. commit answers
// each request of its batch; every caller waits for its own answer.
type batcher[R any] struct {
	mu      sync.Mutex
	running bool
	queue   []R
}

// submit queues r and, when no commit runs, commits the queue batch by
// batch until it is empty.
func (g *batcher[R]) submit(r R, commit func(batch []R)) {
	g.mu.Lock()
	g.queue = append(g.queue, r)
	if g.running {
		g.mu.Unlock()
		return // the committer of the batch r joined answers it
	}
	g.running = true
	for {
		batch := g.queue
		g.queue = nil
		g.mu.Unlock()
		commit(batch)
		g.mu.Lock()
		if len(g.queue) == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
	}
}

// pendingLine is one append to a file of this process (the journal, a
// transcript) in a group commit: the lines that queue while another
// append writes are appended with one write and one fsync under the
// file's lock. Each Append still returns only once its own line is
// fsynced, in the order the appends queued; N appends arriving together
// cost one fsync instead of N, one after another.
type pendingLine struct {
	line []byte
	done chan error
}

// appendGrouped appends line to path under lockPath, with the lines of
// other appends queued at the same time (g is path's group commit).
func appendGrouped(ctx context.Context, g *batcher[*pendingLine], ls *locks, lockPath, path string, line []byte) error {
	p := &pendingLine{line: line, done: make(chan error, 1)}
	g.submit(p, func(batch []*pendingLine) {
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
	})
	return <-p.done
}

// perKey hands out one *T per key, made on first use: one group commit per
// file (appends) or per team (its board, its roster).
type perKey[T any] struct {
	mu sync.Mutex
	m  map[string]*T
}

func (p *perKey[T]) get(key string) *T {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = make(map[string]*T)
	}
	g, ok := p.m[key]
	if !ok {
		g = new(T)
		p.m[key] = g
	}
	return g
}
