package nats

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// A claim is the hot path of a board: every idle member tries it, and most
// tries lose. Reading the task from the server before each try costs a
// round trip per try; instead each Store keeps, per team it claims on, the
// board in memory, fed by one KV watcher. A claim runs its rule on that
// copy and commits with the revision the copy holds: one round trip when
// it wins; a lost compare-and-set runs the rule again on fresh reads, so
// there is never a double claim. A claim the copy says fails is always
// tried again on fresh reads: the copy may lag (a watcher that has not yet
// caught up after the hub restarted once kept a task handed back looking
// claimed, and the team stalled), and a claim must never fail on old news.

// boardCache is one team's board as the watcher last delivered it.
type boardCache struct {
	mu      sync.Mutex
	entries map[string]entry
	ready   bool // the bucket's values as of the watch's start are in
	stopped bool
}

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
		c = &boardCache{entries: map[string]entry{}}
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
				c.mu.Lock()
				if e == nil {
					c.ready = true
				} else {
					c.put(e.Key(), entry{seq: e.Revision(), data: e.Value(),
						gone: e.Operation() == jetstream.KeyValueDelete || e.Operation() == jetstream.KeyValuePurge})
				}
				c.mu.Unlock()
			}
		}
	}()
}

// put keeps the newer of what is cached for key and e (the watcher and a
// write-through may bring the same revision in either order). Call with
// c.mu held.
func (c *boardCache) put(key string, e entry) {
	if cur, ok := c.entries[key]; ok && cur.seq >= e.seq {
		return
	}
	c.entries[key] = e
}

// wrote records this client's own committed write.
func (c *boardCache) wrote(key string, e entry) {
	c.mu.Lock()
	c.put(key, e)
	c.mu.Unlock()
}

// snapshot returns a copy of the entries of the board.
func (c *boardCache) snapshot() map[string]entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]entry, len(c.entries))
	for k, e := range c.entries {
		out[k] = e
	}
	return out
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
