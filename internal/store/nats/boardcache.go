package nats

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/troupe-dev/troupe/internal/store"
)

// A claim is the hot path of a board: every idle member tries it, and most
// tries lose. Reading the task from the server before each try costs a
// round trip per try; instead each Store keeps, per team it claims on, the
// board in memory, fed by one KV watcher. A claim runs its rule on that
// copy and commits with the revision the copy holds: one round trip when
// it wins; a lost compare-and-set runs the rule again on fresh reads, so
// there is never a double claim.
//
// A claim the copy says loses (the task has an owner, is not pending or
// blocked, or nothing is claimable) is answered from the copy too: most
// tries lose, and a round trip for each loss was what bounded claims per
// second. The copy may lag the server by what its watcher has not brought
// yet, so a loss can be old news: a task handed back a moment ago may
// still look owned. That is safe because of how claimers learn of a
// change: from the board's Watch, and this Store's Watch wakes only once
// the copy has what woke it (caughtUp), so the claim a wake starts sees the
// change. A copy that does not catch up within cacheCatchUp (its watcher
// went quiet around a hub restart: once, a task handed back stayed looking
// claimed and the team stalled) is dropped, and claims go to the server
// until a new watcher has loaded the board; a reconnect drops every copy
// the same way.

// boardCache is one team's board as the watcher last delivered it.
type boardCache struct {
	mu      sync.Mutex
	entries map[string]entry
	ready   bool // the bucket's values as of the watch's start are in
	stopped bool
	// high is the last revision the watcher brought: every change of the
	// board up to it is in entries. moved is closed, and replaced, each
	// time high grows.
	high  uint64
	moved chan struct{}
	stop  context.CancelFunc
	// maxID is the highest task number of any key put (a deleted task's
	// marker included: its id is never given again).
	maxID uint64
}

// cacheCatchUp bounds how long a board wake waits for the copy to have
// what woke it (a variable for tests).
var cacheCatchUp atomic.Int64

func init() { cacheCatchUp.Store(int64(2 * time.Second)) }

// testHookCacheUpdate, when set, runs before a copy applies what its
// watcher brought (a test holds it to make the copy lag).
var testHookCacheUpdate atomic.Pointer[func(ctx context.Context)]

// boardCache returns the cache of generation gen, starting its watcher on
// first use; nil while it loads or when it cannot run.
func (s *Store) boardCache(gen string) *boardCache {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	if s.caches == nil {
		s.caches = map[string]*boardCache{}
	}
	c, ok := s.caches[gen]
	if !ok {
		c = &boardCache{entries: map[string]entry{}, moved: make(chan struct{})}
		s.caches[gen] = c
	}
	s.mu.Unlock()
	if !ok {
		s.startCache(gen, c)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ready || c.stopped {
		return nil
	}
	return c
}

func (s *Store) startCache(gen string, c *boardCache) {
	ctx, cancel := context.WithCancel(context.Background())
	c.mu.Lock()
	c.stop = cancel
	c.mu.Unlock()
	w, err := s.tasks.Watch(ctx, gen+".>")
	if err != nil {
		cancel()
		s.opts.Logger.Warn("nats store: board cache off", "gen", gen, "err", err)
		c.mu.Lock()
		c.stopped = true
		c.mu.Unlock()
		return
	}
	s.onClose(cancel)
	go func() {
		defer func() {
			_ = w.Stop()
			c.mu.Lock()
			c.stopped = true
			c.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if hook := testHookCacheUpdate.Load(); hook != nil {
					(*hook)(ctx)
				}
				var ne entry
				if e != nil {
					ne = parsed(entry{seq: e.Revision(), data: e.Value(),
						gone: e.Operation() == jetstream.KeyValueDelete || e.Operation() == jetstream.KeyValuePurge})
				}
				c.mu.Lock()
				if e == nil {
					c.ready = true
				} else {
					c.put(e.Key(), ne)
					if e.Revision() > c.high {
						c.high = e.Revision()
						close(c.moved)
						c.moved = make(chan struct{})
					}
				}
				c.mu.Unlock()
			}
		}
	}()
}

// caughtUp waits until the copy has every change of the board up to
// revision rev, for at most within; false if it did not (the copy is
// stopped, or lags that long).
func (c *boardCache) caughtUp(ctx context.Context, rev uint64, within time.Duration) bool {
	var timeout <-chan time.Time
	for {
		c.mu.Lock()
		high, moved, stopped := c.high, c.moved, c.stopped
		c.mu.Unlock()
		switch {
		case stopped:
			return false
		case high >= rev:
			return true
		}
		if timeout == nil {
			t := time.NewTimer(within)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-moved:
		case <-timeout:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// dropCache stops the copy of generation gen if it is c (nil: whichever
// runs): claims go to the server until a new copy has loaded.
func (s *Store) dropCache(gen string, c *boardCache) {
	s.mu.Lock()
	cur := s.caches[gen]
	if cur == nil || c != nil && cur != c {
		s.mu.Unlock()
		return
	}
	delete(s.caches, gen)
	s.mu.Unlock()
	cur.mu.Lock()
	cur.stopped = true
	stop := cur.stop
	cur.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// dropCaches drops every copy (after a reconnect: what a watcher brings
// across one is not trusted for losses).
func (s *Store) dropCaches() {
	s.mu.Lock()
	gens := make([]string, 0, len(s.caches))
	for gen := range s.caches {
		gens = append(gens, gen)
	}
	s.mu.Unlock()
	for _, gen := range gens {
		s.dropCache(gen, nil)
	}
}

// parsed returns e with its task parsed, when it holds one that parses
// (one that does not is parsed again, and refused, by each reader).
func parsed(e entry) entry {
	if e.gone || e.task != nil {
		return e
	}
	if t, err := store.ParseTask(e.data); err == nil {
		e.task = &t
	}
	return e
}

// put keeps the newer of what is cached for key and e (the watcher and a
// write-through may bring the same revision in either order). Call with
// c.mu held.
func (c *boardCache) put(key string, e entry) {
	if cur, ok := c.entries[key]; ok && cur.seq >= e.seq {
		return
	}
	c.entries[key] = e
	if _, id, ok := strings.Cut(key, ".t."); ok {
		c.maxID = max(c.maxID, store.TaskNum(id))
	}
}

// wrote records this client's own committed write.
func (c *boardCache) wrote(key string, e entry) {
	e = parsed(e)
	c.mu.Lock()
	c.put(key, e)
	c.mu.Unlock()
}

// fill adds to dst the entries of the board it does not hold.
func (c *boardCache) fill(dst map[string]entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if _, ok := dst[k]; !ok {
			dst[k] = e
		}
	}
}

// highestID is the highest task number any key of the copy has held.
func (c *boardCache) highestID() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.maxID
}

// lookup returns the cached entry of key.
func (c *boardCache) lookup(key string) (entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	return e, ok
}

// cacheIfAny returns the cache of generation gen if one runs.
func (s *Store) cacheIfAny(gen string) *boardCache {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.caches[gen]
}
