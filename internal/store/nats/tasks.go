package nats

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/troupe-dev/troupe/internal/store"
)

// The board of a team is the keys <gen>.t.<id> of the tasks bucket, one
// task each.

func (b *board) taskKey(id string) string { return b.t.gen + ".t." + id }

type board struct{ t *Team }

var _ store.Tasks = (*board)(nil)

// entry is what a transaction knows of one key: its value when it began,
// and the revision a commit expects.
type entry struct {
	seq  uint64
	data []byte
	gone bool // never written, deleted, or removed by this transaction
	// task is data parsed, when the board copy parsed it once for every
	// claim that reads it (nil: parse data). Shared: handed out cloned.
	task *store.Task
}

// tx is one run of a board rule. Every key it reads is noted with its
// revision; the commit is one atomic batch whose every write expects the
// revision read, so a rule that lost a race leaves no trace and runs again.
type tx struct {
	ctx    context.Context
	b      *board
	seen   map[string]entry
	writes map[string]*store.Task // nil: removed
	all    bool                   // seen holds every task of the board
	next   uint64                 // the last id NextID gave
	// cache, when set, is read instead of the server.
	cache *boardCache
}

func (b *board) begin(ctx context.Context) *tx {
	return &tx{ctx: ctx, b: b, seen: map[string]entry{}, writes: map[string]*store.Task{}}
}

// load reads the whole board in one request, for rules that look at every
// task.
func (x *tx) load() error {
	if x.all {
		return nil
	}
	if x.cache != nil {
		x.cache.fill(x.seen)
		x.all = true
		return nil
	}
	msgs, err := x.b.t.s.lastOf(x.ctx, tasksBucket, x.b.t.gen+".>")
	if err != nil {
		return fmt.Errorf("read board of %s: %w", x.b.t.name, err)
	}
	for _, m := range msgs {
		k := keyOf(tasksBucket, m.Subject)
		if _, ok := x.seen[k]; ok {
			continue
		}
		x.seen[k] = entry{seq: m.Seq, data: m.Data, gone: m.deleted()}
	}
	x.all = true
	return nil
}

func (x *tx) entry(key string) (entry, error) {
	if e, ok := x.seen[key]; ok {
		return e, nil
	}
	if x.all {
		return entry{gone: true}, nil
	}
	if x.cache != nil {
		e, ok := x.cache.lookup(key)
		if !ok {
			e = entry{gone: true}
		}
		x.seen[key] = e
		return e, nil
	}
	m, ok, err := x.b.t.s.lastFor(x.ctx, tasksBucket, key)
	if err != nil {
		return entry{}, fmt.Errorf("read %s of team %s: %w", key, x.b.t.name, err)
	}
	e := entry{gone: true}
	if ok {
		e = entry{seq: m.Seq, data: m.Data, gone: m.deleted()}
	}
	x.seen[key] = e
	return e, nil
}

func (x *tx) Get(id string) (store.Task, error) {
	if !store.ValidTaskID(id) {
		return store.Task{}, fmt.Errorf("%w: %q", store.ErrTaskNotFound, id)
	}
	if w, ok := x.writes[id]; ok {
		if w == nil {
			return store.Task{}, fmt.Errorf("%w: %s", store.ErrTaskNotFound, id)
		}
		return store.CloneTask(*w), nil
	}
	e, err := x.entry(x.b.taskKey(id))
	if err != nil {
		return store.Task{}, err
	}
	if e.gone {
		return store.Task{}, fmt.Errorf("%w: %s", store.ErrTaskNotFound, id)
	}
	var t store.Task
	if e.task != nil {
		t = store.CloneTask(*e.task)
	} else if t, err = store.ParseTask(e.data); err != nil {
		return store.Task{}, fmt.Errorf("task %s of team %s cannot be read: %w", id, x.b.t.name, err)
	}
	if t.ID != id {
		return store.Task{}, fmt.Errorf("task %s of team %s cannot be read: it holds task %q", id, x.b.t.name, t.ID)
	}
	if t.Status == store.TaskDeleted {
		return store.Task{}, fmt.Errorf("%w: %s", store.ErrTaskNotFound, id)
	}
	return t, nil
}

func (x *tx) Put(t store.Task) { x.writes[t.ID] = &t }

func (x *tx) Remove(id string) { x.writes[id] = nil }

func (x *tx) IDs() ([]string, error) {
	if err := x.load(); err != nil {
		return nil, err
	}
	prefix := x.b.t.gen + ".t."
	ids := map[string]bool{}
	for k, e := range x.seen {
		if id, ok := cutPrefix(k, prefix); ok && !e.gone {
			ids[id] = true
		}
	}
	for id, w := range x.writes {
		if w == nil {
			delete(ids, id)
		} else {
			ids[id] = true
		}
	}
	out := sortedNames(ids)
	slices.SortFunc(out, store.CompareTaskIDs)
	return out, nil
}

// NextID is one past the highest id any key of the board has held: a
// deleted task keeps its delete marker, so its id is never given again.
// Two clients that pick the same id both expect the key never written, and
// one of them loses the compare-and-set and runs its rule again.
func (x *tx) NextID() (string, error) {
	if x.next == 0 {
		if x.cache != nil && !x.all {
			// The copy keeps its highest id: no copy of the board per
			// new task (a board of thousands was copied whole for each).
			x.next = x.cache.highestID()
		} else if err := x.load(); err != nil {
			return "", err
		}
		prefix := x.b.t.gen + ".t."
		for k := range x.seen {
			if id, ok := cutPrefix(k, prefix); ok {
				x.next = max(x.next, store.TaskNum(id))
			}
		}
	}
	x.next++
	return strconv.FormatUint(x.next, 10), nil
}

// commit writes what the rule changed, each write expecting the revision
// read (errConflict if any moved).
func (x *tx) commit() error {
	var ws []write
	ids := make([]string, 0, len(x.writes))
	for id := range x.writes {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, store.CompareTaskIDs)
	for _, id := range ids {
		key := x.b.taskKey(id)
		e, err := x.entry(key)
		if err != nil {
			return err
		}
		w := write{subject: kvSubject(tasksBucket, key), expect: e.seq}
		if t := x.writes[id]; t == nil {
			if e.gone {
				continue
			}
			w.del = true
		} else {
			data, err := store.MarshalTask(t)
			if err != nil {
				return err
			}
			w.data = data
		}
		ws = append(ws, w)
	}
	seq, err := x.b.t.s.commit(x.ctx, ws)
	if err == nil && seq > 0 {
		// The server answered with the revision of the last write, and a
		// batch is stored in one piece, in order: the copy has this
		// client's own writes at once, before its watcher brings them, so
		// a loss it answers never misses what this client did (a revision
		// guessed wrong only costs a failed compare-and-set later).
		if c := x.b.t.s.cacheIfAny(x.b.t.gen); c != nil {
			for i, w := range ws {
				c.wrote(keyOf(tasksBucket, w.subject), entry{seq: seq - uint64(len(ws)-1-i), data: w.data, gone: w.del})
			}
		}
	}
	return err
}

// do runs rule until it commits without a conflict.
func (b *board) do(ctx context.Context, rule func(*tx) (store.Task, error)) (store.Task, error) {
	if err := b.t.s.closedErr(); err != nil {
		return store.Task{}, err
	}
	if b.t.archived != nil {
		return store.Task{}, errArchived
	}
	for {
		if err := ctx.Err(); err != nil {
			return store.Task{}, err
		}
		x := b.begin(ctx)
		t, err := rule(x)
		if err != nil {
			return store.Task{}, err
		}
		err = x.commit()
		if errors.Is(err, errConflict) {
			continue
		}
		if err != nil {
			return store.Task{}, fmt.Errorf("board of team %s: %w", b.t.name, err)
		}
		return store.CloneTask(t), nil
	}
}

// Create runs on the cached board first, as claims do: a board of
// thousands of tasks is otherwise read whole for every new id (the new
// key's compare-and-set catches an id taken meanwhile). Update reads the
// keys it touches from the server: it is never a read of the whole board.
func (b *board) Create(ctx context.Context, t store.Task) (store.Task, error) {
	return b.claim(ctx, func(x *tx) (store.Task, error) { return store.CreateTask(x, t, b.t.s.now()) })
}

var _ store.TaskBatch = (*board)(nil)

// CreateAll creates tasks in order in one transaction, as Create does one.
func (b *board) CreateAll(ctx context.Context, ts []store.Task) ([]store.Task, error) {
	var out []store.Task
	_, err := b.claim(ctx, func(x *tx) (store.Task, error) {
		out = make([]store.Task, 0, len(ts))
		now := b.t.s.now()
		for i, t := range ts {
			got, err := store.CreateTask(x, t, now)
			if err != nil {
				return store.Task{}, fmt.Errorf("task %d of %d: %w", i+1, len(ts), err)
			}
			out = append(out, store.CloneTask(got))
		}
		return store.Task{}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("create tasks: %w", err)
	}
	return out, nil
}

func (b *board) Update(ctx context.Context, id string, fn func(*store.Task) error) (store.Task, error) {
	return b.do(ctx, func(x *tx) (store.Task, error) { return store.UpdateTask(x, id, fn, b.t.s.now()) })
}

func (b *board) Claim(ctx context.Context, id, owner string) (store.Task, error) {
	key := b.taskKey(id)
	done, err := b.t.s.claimTurn(ctx, key)
	if err != nil {
		return store.Task{}, err
	}
	defer done()
	// The common case, a task the copy shows taken, is answered from its
	// parsed task as it is: no transaction, no copy of the task.
	if owner != "" && b.t.archived == nil && b.t.s.closedErr() == nil {
		if c := b.t.s.boardCache(b.t.gen); c != nil {
			if e, ok := c.lookup(key); ok && !e.gone && e.task != nil && e.task.ID == id && e.task.Status != store.TaskDeleted {
				if err := store.ClaimRefusal(e.task); err != nil {
					return store.Task{}, err
				}
			}
		}
	}
	return b.claim(ctx, func(x *tx) (store.Task, error) { return store.ClaimTask(x, id, owner, b.t.s.now()) })
}

// claimTurn waits until no other claim of key by this client is under
// way, and takes the turn: done ends it. Two goroutines of one client that
// claim one task would both commit on the copy's revision, and the loser
// would pay a failed compare-and-set and fresh reads; in turn, the second
// finds the first's win in the copy (written through) and loses at once.
func (s *Store) claimTurn(ctx context.Context, key string) (done func(), err error) {
	for {
		s.mu.Lock()
		if s.claiming == nil {
			s.claiming = map[string]chan struct{}{}
		}
		busy, ok := s.claiming[key]
		if !ok {
			ch := make(chan struct{})
			s.claiming[key] = ch
			s.mu.Unlock()
			return func() {
				s.mu.Lock()
				delete(s.claiming, key)
				s.mu.Unlock()
				close(ch)
			}, nil
		}
		s.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (b *board) ClaimNext(ctx context.Context, owner string) (store.Task, error) {
	return b.claim(ctx, func(x *tx) (store.Task, error) { return store.ClaimNextTask(x, owner, b.t.s.now()) })
}

func (b *board) ClaimFirst(ctx context.Context, owner string, ids []string) (store.Task, error) {
	return b.claim(ctx, func(x *tx) (store.Task, error) { return store.ClaimFirstTask(x, owner, ids, b.t.s.now()) })
}

// claim runs a claim rule once on the cached board (see boardcache.go):
// a win commits with the copy's revision, and a loss is answered from the
// copy. A lost compare-and-set, or a rule that failed otherwise (a task
// the copy does not know), runs again as do does, on fresh reads.
func (b *board) claim(ctx context.Context, rule func(*tx) (store.Task, error)) (store.Task, error) {
	if b.t.archived == nil && b.t.s.closedErr() == nil {
		if c := b.t.s.boardCache(b.t.gen); c != nil {
			x := b.begin(ctx)
			x.cache = c
			t, err := rule(x)
			switch {
			case err == nil:
				cerr := x.commit()
				if cerr == nil {
					return store.CloneTask(t), nil
				}
				if !errors.Is(cerr, errConflict) {
					return store.Task{}, fmt.Errorf("board of team %s: %w", b.t.name, cerr)
				}
			case lostClaim(err):
				return store.Task{}, err
			}
		}
	}
	return b.do(ctx, rule)
}

// lostClaim reports whether err is a claim's answer that the task is not
// to be had: one the copy may give (boardcache.go).
func lostClaim(err error) bool {
	return errors.Is(err, store.ErrClaimed) || errors.Is(err, store.ErrNotPending) ||
		errors.Is(err, store.ErrBlocked) || errors.Is(err, store.ErrNoTask)
}

func (b *board) Get(ctx context.Context, id string) (store.Task, error) {
	if err := b.t.s.closedErr(); err != nil {
		return store.Task{}, err
	}
	return b.begin(ctx).Get(id)
}

func (b *board) List(ctx context.Context) ([]store.Task, error) {
	bd, err := b.Board(ctx)
	if err != nil {
		return nil, err
	}
	for _, c := range bd.Corrupt {
		b.t.s.opts.Logger.Warn("nats store: task cannot be read", "team", b.t.name, "task", c.ID, "err", c.Err)
	}
	return bd.Tasks, nil
}

func (b *board) Board(ctx context.Context) (store.Board, error) {
	if err := b.t.s.closedErr(); err != nil {
		return store.Board{}, err
	}
	x := b.begin(ctx)
	ids, err := x.IDs()
	if err != nil {
		return store.Board{}, err
	}
	out := store.Board{Tasks: []store.Task{}}
	for _, id := range ids {
		t, err := x.Get(id)
		switch {
		case errors.Is(err, store.ErrTaskNotFound):
		case err != nil:
			out.Corrupt = append(out.Corrupt, store.Corrupt{ID: id, Err: err.Error()})
		default:
			out.Tasks = append(out.Tasks, t)
		}
	}
	return out, nil
}

// Watch wakes on every change to the board, from a KV watcher on the
// team's keys.
func (b *board) Watch(ctx context.Context) (<-chan struct{}, error) {
	if err := b.t.s.closedErr(); err != nil {
		return nil, err
	}
	w, err := b.t.s.tasks.Watch(ctx, b.t.gen+".>", jetstream.UpdatesOnly(), jetstream.MetaOnly())
	if err != nil {
		return nil, fmt.Errorf("watch board of %s: %w", b.t.name, err)
	}
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-b.t.s.done:
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				// A claim this wake starts may be answered from this
				// Store's copy of the board: the wake waits for the copy
				// to have the change (boardcache.go).
				if c := b.t.s.cacheIfAny(b.t.gen); e != nil && c != nil && !c.caughtUp(ctx, e.Revision(), time.Duration(cacheCatchUp.Load())) && ctx.Err() == nil {
					b.t.s.opts.Logger.Warn("nats store: board copy lags its watch; claims go to the server until it reloads", "team", b.t.name, "revision", e.Revision())
					b.t.s.dropCache(b.t.gen, c)
				}
				wake(out)
			}
		}
	}()
	return out, nil
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return "", false
}
