package file

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
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
// cost one fsync instead of N, one after another. A deferred line
// (sync false) is written without one: a batch of deferred lines only is
// not fsynced, and the next fsync of the file makes it durable.
type pendingLine struct {
	line []byte
	sync bool
	done chan error
}

// appendGroup is one file's group commit, and whether lines written
// without an fsync are still waiting for one (Store.Close gives it).
type appendGroup struct {
	batcher[*pendingLine]
	unsynced atomic.Bool
	lock     atomic.Pointer[string] // the file's lock path, once known
	soon     atomic.Bool            // a sync is scheduled (syncSoon)
}

// deferredSyncDelay is how long a deferred line of the journal waits at
// most for its fsync when no durable append gives it one sooner (a
// variable for tests).
var deferredSyncDelay = 10 * time.Millisecond

// syncSoon fsyncs path deferredSyncDelay from now unless a sync is
// already scheduled; a file whose deferred lines a durable append covered
// meanwhile needs nothing then. One fsync for every deferred line of the
// window, off every writer's path.
func (s *Store) syncSoon(path string) {
	g := s.appends.get(path)
	if !g.soon.CompareAndSwap(false, true) {
		return
	}
	time.AfterFunc(deferredSyncDelay, func() {
		g.soon.Store(false)
		if s.closedErr() != nil {
			return // Close syncs it
		}
		if err := s.syncDeferred(context.Background(), g, path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.opts.Logger.Warn("fsync deferred lines", "path", path, "err", err)
		}
	})
}

// syncDeferred fsyncs path, g's file, when lines written without an fsync
// wait for one: an empty line through the group commit, under the file's
// own lock, so the fsync comes after any write still under way.
func (s *Store) syncDeferred(ctx context.Context, g *appendGroup, path string) error {
	if !g.unsynced.Load() {
		return nil
	}
	lock := path // a transcript is its own lock
	if l := g.lock.Load(); l != nil {
		lock = *l
	}
	return appendGrouped(ctx, g, &s.locks, lock, path, nil, true)
}

// appendGrouped appends line to path under lockPath, with the lines of
// other appends queued at the same time (g is path's group commit); with
// sync false the line is not fsynced (see pendingLine).
func appendGrouped(ctx context.Context, g *appendGroup, ls *locks, lockPath, path string, line []byte, sync bool) error {
	if g.lock.Load() == nil {
		g.lock.CompareAndSwap(nil, &lockPath) // a file is always appended under one lock
	}
	p := &pendingLine{line: line, sync: sync, done: make(chan error, 1)}
	g.submit(p, func(batch []*pendingLine) {
		var buf []byte
		doSync := false
		if len(batch) == 1 {
			buf, doSync = batch[0].line, batch[0].sync
		} else {
			for _, q := range batch {
				buf = append(buf, q.line...)
				doSync = doSync || q.sync
			}
		}
		// The lock is waited for without ctx: the lines of other callers
		// ride on this write.
		err := ls.withLock(context.WithoutCancel(ctx), lockPath, func() error {
			_, err := appendLinesSync(path, [][]byte{buf}, nil, doSync)
			return err
		})
		if err == nil {
			g.unsynced.Store(!doSync)
		}
		for _, q := range batch {
			q.done <- err
		}
	})
	return <-p.done
}

// syncUnsynced fsyncs every file of s.appends under dir (every file when
// dir is "") that holds deferred lines (transcripts, the journal)
// (syncDeferred). A file gone with its team (deleted, or archived since)
// needs nothing.
func (s *Store) syncUnsynced(dir string) {
	s.appends.mu.Lock()
	var paths []string
	for path, g := range s.appends.m {
		if g.unsynced.Load() && (dir == "" || strings.HasPrefix(path, dir+string(filepath.Separator))) {
			paths = append(paths, path)
		}
	}
	s.appends.mu.Unlock()
	for _, path := range paths {
		err := s.syncDeferred(context.Background(), s.appends.get(path), path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.opts.Logger.Warn("fsync deferred lines", "path", path, "err", err)
		}
	}
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
