package file

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/troupe-dev/troupe/internal/store"
)

// tasks is a team's board: tasks/<id>.json files, changed only under
// tasks/.lock. A change that touches several files (dependencies on both
// sides) is first written whole to tasks/.intent, then applied, then the
// intent is removed; whoever takes the lock next finishes an intent a crash
// left behind, so the two sides of a link never disagree.
type tasks struct{ t *Team }

var _ store.Tasks = (*tasks)(nil)

func (b *tasks) dir() string           { return b.t.path("tasks") }
func (b *tasks) file(id string) string { return b.t.path("tasks", id+".json") }

// intent is the redo record of a multi-file board change.
type intent struct {
	Write  []store.Task `json:"write"`
	Remove []string     `json:"remove"`
}

// tx is one board change under the lock: it caches the tasks it reads and
// writes back those it changed.
type tx struct {
	b       *tasks
	cache   map[string]*store.Task
	dirty   []string
	removed []string
	extra   []string // ids an unfinished intent creates (lock-free reads)
	locked  bool     // fn runs under the board lock (view may read without)
	// staged are the tasks written by the earlier transactions of a group
	// commit, not yet in their files (nil outside one).
	staged map[string]*store.Task
	hwm    string // the id NextID gave out last (this transaction's next one is past it)
	// onDisk is the highest id of the task files and the high-water mark,
	// read at the transaction's first NextID: under the board lock no
	// other writer changes them, and a batch of creations read the
	// directory once per task.
	onDisk     uint64
	onDiskRead bool
}

// do runs fn under the board lock and commits what it changed, in a group
// commit with the changes other goroutines of this process make at the
// same time (see boardbatch.go).
func (b *tasks) do(ctx context.Context, fn func(*tx) error) error {
	if err := b.t.s.closedErr(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.run(ctx, fn)
}

// locked runs fn under the board lock alone and commits what it changed.
func (b *tasks) locked(ctx context.Context, fn func(*tx) error) error {
	if err := b.t.s.closedErr(); err != nil {
		return err
	}
	err := b.t.s.locks.withLock(ctx, b.t.path("tasks", ".lock"), func() error {
		if err := b.recover(); err != nil {
			return err
		}
		x := &tx{b: b, cache: make(map[string]*store.Task), locked: true}
		if err := fn(x); err != nil {
			return err
		}
		return x.commit()
	})
	if err != nil {
		return err
	}
	return nil
}

// view runs fn, which only reads, on a consistent board. It takes the board
// lock like do; when the lock file cannot be created or opened (a read-only
// .troupe), it reads without it instead, seeing an unfinished intent as
// already applied, so that looking at a board never needs write access.
func (b *tasks) view(ctx context.Context, fn func(*tx) error) error {
	err := b.locked(ctx, fn)
	if err == nil || !lockUnavailable(err) {
		return err
	}
	b.t.s.opts.Logger.Debug("reading the task board without its lock", "team", b.t.name, "err", err)
	x := &tx{b: b, cache: make(map[string]*store.Task)}
	if err := x.overlayIntent(); err != nil {
		return err
	}
	return fn(x)
}

// overlayIntent loads an intent a writer left unfinished into the cache,
// without applying it.
func (x *tx) overlayIntent() error {
	path := x.b.t.path("tasks", ".intent")
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var in intent
	if err := json.Unmarshal(data, &in); err != nil {
		return fmt.Errorf("task board of team %s: unreadable %s: %w", x.b.t.name, path, err)
	}
	for i := range in.Write {
		t := in.Write[i]
		x.cache[t.ID] = &t
		x.extra = append(x.extra, t.ID)
	}
	for _, id := range in.Remove {
		x.cache[id] = nil
	}
	return nil
}

// recover finishes what a crash left, the board lock held: the log first
// (older than any intent: an intent checkpoints it), then an intent.
func (b *tasks) recover() error {
	if err := b.recoverLog(); err != nil {
		return err
	}
	return b.replayIntent()
}

func (b *tasks) replayIntent() error {
	path := b.t.path("tasks", ".intent")
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var in intent
	if err := json.Unmarshal(data, &in); err != nil {
		// A torn intent cannot exist (it is renamed into place whole), so
		// this is a hand edit: refuse to guess.
		return fmt.Errorf("task board of team %s: unreadable %s: %w", b.t.name, path, err)
	}
	if err := b.apply(&in); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil {
		return err
	}
	return syncDir(b.dir())
}

func (b *tasks) apply(in *intent) error {
	ts := make([]*store.Task, len(in.Write))
	for i := range in.Write {
		ts[i] = &in.Write[i]
	}
	if err := b.writeTasks(ts, true); err != nil {
		return err
	}
	for _, id := range in.Remove {
		b.t.s.parsed.drop(taskKey(b.t.key, id))
		if err := os.Remove(b.file(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove task %s: %w", id, err)
		}
		if err := os.Remove(legacySparePath(b.file(id))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove task %s: %w", id, err)
		}
	}
	if len(in.Remove) > 0 {
		return syncDir(b.dir())
	}
	return nil
}

// replaceTaskFiles is replaceFiles for the task files (a test makes it
// fail).
var replaceTaskFiles = replaceFiles

// writeTasks writes the tasks into their files, together, durably or not
// (see replaceFiles).
func (b *tasks) writeTasks(ts []*store.Task, durable bool) error {
	if len(ts) == 0 {
		return nil
	}
	paths := make([]string, len(ts))
	data := make([][]byte, len(ts))
	for i, t := range ts {
		var err error
		if data[i], err = store.MarshalTask(t); err != nil {
			return err
		}
		paths[i] = b.file(t.ID)
	}
	fis, err := replaceTaskFiles(b.dir(), paths, data, durable)
	if err != nil {
		return err
	}
	// The new versions are cached as written (see taskCache.wrote): the
	// claims, the board reads and the wakes that follow a change read it
	// while it is young.
	for i, t := range ts {
		if parsed, err := store.ParseTask(data[i]); err == nil {
			b.t.s.parsed.wrote(taskKey(b.t.key, t.ID), fis[i], parsed)
		}
	}
	return nil
}

func (x *tx) commit() error {
	if len(x.dirty) == 0 && len(x.removed) == 0 {
		return nil
	}
	// A write past the log empties it first (see boardlog.go).
	if err := x.b.checkpointIfAny(); err != nil {
		return fmt.Errorf("task board of team %s: %w", x.b.t.name, err)
	}
	// A new version before any file changes (see boardcache.go).
	if err := x.b.logChange(append(slices.Clip(x.dirty), x.removed...)); err != nil {
		return fmt.Errorf("task board of team %s: %w", x.b.t.name, err)
	}
	if err := x.keepHighWater(); err != nil {
		return fmt.Errorf("task board of team %s: %w", x.b.t.name, err)
	}
	var in intent
	for _, id := range x.dirty {
		if t := x.cache[id]; t != nil {
			in.Write = append(in.Write, *t)
		}
	}
	in.Remove = x.removed
	if len(in.Write) == 1 && len(in.Remove) == 0 {
		// One file: its atomic rename is the whole change.
		if err := x.b.apply(&in); err != nil {
			return err
		}
	} else {
		data, err := json.Marshal(&in)
		if err != nil {
			return err
		}
		path := x.b.t.path("tasks", ".intent")
		if err := writeFileAtomic(path, data); err != nil {
			return fmt.Errorf("task board of team %s: %w", x.b.t.name, err)
		}
		if err := x.b.apply(&in); err != nil {
			return err
		}
		if err := os.Remove(path); err != nil {
			return err
		}
	}
	x.b.t.s.hub.notify(tasksKey(x.b.t.key))
	return nil
}

var _ store.BoardTx = (*tx)(nil)

// Get returns a task as this transaction sees it.
func (x *tx) Get(id string) (store.Task, error) {
	if t, ok := x.cache[id]; ok {
		if t == nil {
			return store.Task{}, fmt.Errorf("task %s: %w", id, store.ErrTaskNotFound)
		}
		return *t, nil
	}
	if t, ok := x.staged[id]; ok {
		c := store.CloneTask(*t)
		x.cache[id] = &c
		return c, nil
	}
	t, err := x.b.read(id, x.readMode())
	if errors.Is(err, store.ErrTaskNotFound) {
		x.cache[id] = nil
	}
	if err != nil {
		return store.Task{}, err
	}
	x.cache[id] = &t
	return t, nil
}

// Put records t to be written at commit.
func (x *tx) Put(t store.Task) {
	x.cache[t.ID] = &t
	if !slices.Contains(x.dirty, t.ID) {
		x.dirty = append(x.dirty, t.ID)
	}
}

// keepHighWater makes tasks/.highwatermark at least the highest id this
// transaction removes, before any file goes: a created task's own file
// holds its id, and only a removal can take the highest id off the board.
// (Written at every creation, it cost each one a file, two fsyncs and a
// rename, and kept creations out of the group commit.)
func (x *tx) keepHighWater() error {
	var hi uint64
	for _, id := range x.removed {
		hi = max(hi, store.TaskNum(id))
	}
	if hi == 0 {
		return nil
	}
	if x.b.highWater() >= hi {
		return nil
	}
	return writeFileAtomic(x.b.highWaterPath(), []byte(strconv.FormatUint(hi, 10)+"\n"))
}

func (b *tasks) highWaterPath() string { return b.t.path("tasks", ".highwatermark") }

// highWater is the id in tasks/.highwatermark, 0 when there is none.
func (b *tasks) highWater() uint64 {
	data, err := os.ReadFile(b.highWaterPath())
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 63)
	return n
}

// Remove records task id to be removed at commit.
func (x *tx) Remove(id string) {
	x.cache[id] = nil
	x.dirty = slices.DeleteFunc(x.dirty, func(d string) bool { return d == id })
	x.removed = append(x.removed, id)
}

// IDs returns the ids of the board's task files, and of the tasks this
// transaction, the group commit it is in or an unfinished intent adds, in
// numeric order.
func (x *tx) IDs() ([]string, error) {
	ids, err := x.b.ids()
	if err != nil {
		return nil, err
	}
	added := false
	more := append(slices.Clip(x.extra), x.dirty...)
	for id, t := range x.staged {
		if t != nil {
			more = append(more, id) // made by an earlier change of the group commit
		}
	}
	for _, id := range more {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
			added = true
		}
	}
	if added {
		slices.SortFunc(ids, store.CompareTaskIDs)
	}
	return ids, nil
}

// NextID returns one past the highest id of the task files and of
// tasks/.highwatermark, which keeps the highest id of a removed task (so
// that a deleted task's id is not given again), and of the tasks this
// transaction, the group commit it is in or an unfinished intent adds. It
// needs the highest id alone: the names are not sorted (IDs sorts them).
func (x *tx) NextID() (string, error) {
	if !x.onDiskRead || !x.locked {
		hi, err := x.b.highestID()
		if err != nil {
			return "", err
		}
		x.onDisk, x.onDiskRead = max(hi, x.b.highWater()), true
	}
	next := x.onDisk
	for _, id := range x.extra {
		next = max(next, store.TaskNum(id))
	}
	for _, id := range x.dirty {
		next = max(next, store.TaskNum(id))
	}
	for id, t := range x.staged {
		if t != nil {
			next = max(next, store.TaskNum(id))
		}
	}
	next = max(next, store.TaskNum(x.hwm)) + 1
	x.hwm = strconv.FormatUint(next, 10)
	return x.hwm, nil
}

// readMode is how the transaction reads a task file: plainly under the
// board lock (no writer runs), else waiting out a writer (see spare.go).
func (x *tx) readMode() readMode {
	if x.locked {
		return readLocked
	}
	return readWait
}

// read loads one task file, or its cached parse if the file has not
// changed since; how says how to read a file that may be being replaced
// (see readStable).
func (b *tasks) read(id string, how readMode) (store.Task, error) {
	if !store.ValidTaskID(id) {
		return store.Task{}, fmt.Errorf("task %q: %w", id, store.ErrTaskNotFound)
	}
	path := b.file(id)
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return store.Task{}, fmt.Errorf("task %s: %w", id, store.ErrTaskNotFound)
	}
	if err != nil {
		return store.Task{}, err
	}
	key := taskKey(b.t.key, id)
	t, ok := b.t.s.parsed.get(key, fi)
	if !ok {
		if t, err = b.parse(path, id, key, how); err != nil {
			return store.Task{}, err
		}
	}
	if t.Status == store.TaskDeleted {
		return store.Task{}, fmt.Errorf("task %s: %w", id, store.ErrTaskNotFound)
	}
	return t, nil
}

// parse reads and parses task file path, and caches the result under the
// version of the file it was read from.
func (b *tasks) parse(path, id, key string, how readMode) (store.Task, error) {
	data, fi, err := readStable(path, how)
	if errors.Is(err, fs.ErrNotExist) {
		return store.Task{}, fmt.Errorf("task %s: %w", id, store.ErrTaskNotFound)
	}
	if err != nil {
		return store.Task{}, err
	}
	t, err := store.ParseTask(data)
	if err != nil {
		return store.Task{}, fmt.Errorf("task file %s: %w", path, err)
	}
	if t.ID != id {
		return store.Task{}, fmt.Errorf("task file %s: %w: holds id %s", path, store.ErrInvalidTask, t.ID)
	}
	b.t.s.parsed.put(key, fi, t)
	return t, nil
}

// highestID returns the highest id of the task files (0: none).
func (b *tasks) highestID() (uint64, error) {
	d, err := openFile(b.dir(), os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("team %s: %w", b.t.name, store.ErrTeamNotFound)
	}
	if err != nil {
		return 0, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return 0, err
	}
	var hi uint64
	for _, name := range names {
		if id, ok := strings.CutSuffix(name, ".json"); ok && store.ValidTaskID(id) {
			hi = max(hi, store.TaskNum(id))
		}
	}
	return hi, nil
}

// ids returns the ids of the task files, in numeric order.
func (b *tasks) ids() ([]string, error) {
	ents, err := os.ReadDir(b.dir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("team %s: %w", b.t.name, store.ErrTeamNotFound)
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && store.ValidTaskID(id) {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, store.CompareTaskIDs)
	return ids, nil
}

// all returns every readable task of the board in id order, through the
// transaction's cache; unreadable files are logged and skipped (Board
// reports them).
func (x *tx) all() ([]store.Task, error) {
	out, bad, err := x.scan()
	for _, c := range bad {
		x.b.t.s.opts.Logger.Warn("skipping unreadable task", "team", x.b.t.name, "id", c.ID, "file", c.Path, "err", c.Err)
	}
	return out, err
}

// scan returns every readable task of the board in id order, and the task
// files that cannot be read.
func (x *tx) scan() ([]store.Task, []store.Corrupt, error) {
	ids, err := x.b.ids()
	if err != nil {
		return nil, nil, err
	}
	for _, id := range x.extra {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, store.CompareTaskIDs)
	out := make([]store.Task, 0, len(ids))
	var bad []store.Corrupt
	for _, id := range ids {
		t, err := x.Get(id)
		if errors.Is(err, store.ErrTaskNotFound) {
			continue
		}
		if err != nil {
			bad = append(bad, store.Corrupt{ID: id, Path: x.b.file(id), Err: corruptReason(err, x.b.file(id))})
			x.cache[id] = nil
			continue
		}
		out = append(out, t)
	}
	return out, bad, nil
}

// corruptReason is err without the file name it starts with (the Corrupt
// entry carries the path apart).
func corruptReason(err error, path string) string {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "task file "+path+": "); ok {
		return rest
	}
	return msg
}

// Create adds a task with the next id.
func (b *tasks) Create(ctx context.Context, t store.Task) (store.Task, error) {
	var out store.Task
	err := b.do(ctx, func(x *tx) (err error) {
		out, err = store.CreateTask(x, t, b.t.s.opts.Now())
		return err
	})
	if err != nil {
		return store.Task{}, fmt.Errorf("create task: %w", err)
	}
	return out, nil
}

var _ store.TaskBatch = (*tasks)(nil)

// CreateAll adds tasks with the next ids, in order, in one change of the
// board: one intent and one fsync of the directory for all of them.
func (b *tasks) CreateAll(ctx context.Context, ts []store.Task) ([]store.Task, error) {
	var out []store.Task
	err := b.do(ctx, func(x *tx) error {
		out = make([]store.Task, 0, len(ts))
		now := b.t.s.opts.Now()
		for i, t := range ts {
			got, err := store.CreateTask(x, t, now)
			if err != nil {
				return fmt.Errorf("task %d of %d: %w", i+1, len(ts), err)
			}
			out = append(out, got)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("create tasks: %w", err)
	}
	return out, nil
}

// Get returns one task.
func (b *tasks) Get(ctx context.Context, id string) (store.Task, error) {
	if err := b.settle(ctx); err != nil {
		return store.Task{}, err
	}
	if t, ok := b.getUnlocked(id); ok {
		return emptyLists(t), nil
	}
	var out store.Task
	err := b.view(ctx, func(x *tx) (err error) {
		out, err = x.Get(id)
		return err
	})
	if err != nil {
		return store.Task{}, err
	}
	return emptyLists(out), nil
}

// getUnlocked reads task id without the board lock, which every commit
// holds across its fsyncs: a change of one task is the atomic rename of its
// file, so the file alone is the task before or after it. A change of
// several files is bracketed by tasks/.intent: when there is one before or
// after the read, or the task is not found (the team's own error may be
// the answer), ok is false and Get reads under the lock.
func (b *tasks) getUnlocked(id string) (t store.Task, ok bool) {
	if b.t.s.closedErr() != nil {
		return store.Task{}, false
	}
	intent := b.t.path("tasks", ".intent")
	if _, err := os.Lstat(intent); !errors.Is(err, fs.ErrNotExist) {
		return store.Task{}, false
	}
	t, err := b.read(id, readNoWait)
	if err != nil {
		return store.Task{}, false
	}
	if _, err := os.Lstat(intent); !errors.Is(err, fs.ErrNotExist) {
		return store.Task{}, false
	}
	return store.CloneTask(t), true
}

// List returns every task in id order. While the board's version is the
// one of its last read, that read is handed out again; after a change,
// only the tasks it changed are read again (see boardcache.go).
func (b *tasks) List(ctx context.Context) ([]store.Task, error) { return b.list(ctx, copyTasks) }

var _ store.TaskSnapshot = (*tasks)(nil)

// Snapshot is List without the copy: the cached board itself, which a
// change replaces and never edits (patch clones it).
func (b *tasks) Snapshot(ctx context.Context) ([]store.Task, error) {
	return b.list(ctx, func(ts []store.Task) []store.Task { return ts })
}

// list reads the board and hands out the cached one through out.
func (b *tasks) list(ctx context.Context, out func([]store.Task) []store.Task) ([]store.Task, error) {
	if err := b.t.s.closedErr(); err != nil {
		return nil, err
	}
	if err := b.settle(ctx); err != nil {
		return nil, err
	}
	if c, ok := b.current(); ok {
		return out(c.tasks), nil
	}
	var got []store.Task
	err := b.view(ctx, func(x *tx) error {
		if !x.locked {
			all, err := x.all()
			for i := range all {
				all[i] = emptyLists(all[i])
			}
			got = all // read for this call alone
			return err
		}
		all, err := b.board(x)
		if err != nil {
			return err
		}
		got = out(all)
		return nil
	})
	return got, err
}

// Board returns the readable tasks and the corrupt ones, in id order.
func (b *tasks) Board(ctx context.Context) (store.Board, error) {
	var out store.Board
	err := b.view(ctx, func(x *tx) (err error) {
		out.Tasks, out.Corrupt, err = x.scan()
		return err
	})
	if err != nil {
		return store.Board{}, fmt.Errorf("task board of team %s: %w", b.t.name, err)
	}
	for i := range out.Tasks {
		out.Tasks[i] = emptyLists(out.Tasks[i])
	}
	return out, nil
}

// Update applies fn to task id atomically.
func (b *tasks) Update(ctx context.Context, id string, fn func(*store.Task) error) (store.Task, error) {
	var out store.Task
	err := b.do(ctx, func(x *tx) (err error) {
		out, err = store.UpdateTask(x, id, fn, b.t.s.opts.Now())
		return err
	})
	if err != nil {
		return store.Task{}, fmt.Errorf("update task %s: %w", id, err)
	}
	return out, nil
}

// Claim sets owner on task id if it is claimable. A task already taken is
// refused without the board lock: under contention most claims lose, and
// a loss read from the task's last committed state is as true as one read
// under the lock.
func (b *tasks) Claim(ctx context.Context, id, owner string) (store.Task, error) {
	if err := b.settle(ctx); err != nil {
		return store.Task{}, fmt.Errorf("claim task %s: %w", id, err)
	}
	if owner != "" {
		if err := b.claimRefused(id); err != nil {
			return store.Task{}, fmt.Errorf("claim task %s: %w", id, err)
		}
	}
	var out store.Task
	err := b.do(ctx, func(x *tx) (err error) {
		out, err = store.ClaimTask(x, id, owner, b.t.s.opts.Now())
		return err
	})
	if err != nil {
		return store.Task{}, fmt.Errorf("claim task %s: %w", id, err)
	}
	return out, nil
}

// ClaimNext claims the claimable task with the lowest id. Under the lock,
// the board as List keeps it names the candidates, so the claim reads the
// task files changed since instead of every one.
func (b *tasks) ClaimNext(ctx context.Context, owner string) (store.Task, error) {
	var out store.Task
	err := b.do(ctx, func(x *tx) (err error) {
		if owner == "" {
			_, err = store.ClaimNextTask(x, owner, b.t.s.opts.Now())
			return err
		}
		board, err := b.board(x)
		if err != nil {
			return err
		}
		now := b.t.s.opts.Now()
		for _, t := range board {
			if t.Claimable() != nil {
				continue
			}
			if out, err = store.ClaimTask(x, t.ID, owner, now); err == nil {
				return nil
			}
		}
		return store.ErrNoTask
	})
	if err != nil {
		return store.Task{}, fmt.Errorf("claim: %w", err)
	}
	return out, nil
}

// ClaimFirst claims the first of ids that is claimable. The ones ahead
// that are refused as last committed are passed over without the board
// lock, as Claim refuses them; the rest is tried under it, in one change.
func (b *tasks) ClaimFirst(ctx context.Context, owner string, ids []string) (store.Task, error) {
	if err := b.settle(ctx); err != nil {
		return store.Task{}, fmt.Errorf("claim: %w", err)
	}
	if owner != "" { // else the rule says why not
		for len(ids) > 0 && b.claimRefused(ids[0]) != nil {
			ids = ids[1:]
		}
		if len(ids) == 0 {
			return store.Task{}, fmt.Errorf("claim: %w", store.ErrNoTask)
		}
	}
	var out store.Task
	err := b.do(ctx, func(x *tx) (err error) {
		out, err = store.ClaimFirstTask(x, owner, ids, b.t.s.opts.Now())
		return err
	})
	if err != nil {
		return store.Task{}, fmt.Errorf("claim: %w", err)
	}
	return out, nil
}

// claimRefused returns why a claim of task id must fail, read without the
// lock from the task's file as last committed; nil when the claim has to
// be tried under the lock (the task looks claimable, or the board is in
// the middle of a change that spans several files).
func (b *tasks) claimRefused(id string) error {
	if b.t.s.closedErr() != nil {
		return nil
	}
	if _, err := os.Lstat(b.t.path("tasks", ".intent")); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	t, err := b.read(id, readNoWait)
	if errors.Is(err, store.ErrTaskNotFound) {
		return err
	}
	if err != nil {
		return nil
	}
	return store.ClaimRefusal(&t)
}

// Watch wakes on any change to the board.
func (b *tasks) Watch(ctx context.Context) (<-chan struct{}, error) {
	if err := b.t.s.closedErr(); err != nil {
		return nil, err
	}
	key := tasksKey(b.t.key)
	ch := b.t.s.hub.subscribe(key)
	b.t.s.watcher.watchDir(b.dir(), true)
	context.AfterFunc(ctx, func() { b.t.s.hub.unsubscribe(key, ch, true) })
	return ch, nil
}

// emptyLists returns t with nil dependency lists as empty ones. The tasks a
// transaction read are its own (it parsed them), so they are handed out
// without a copy.
func emptyLists(t store.Task) store.Task {
	if t.BlockedBy == nil {
		t.BlockedBy = []string{}
	}
	if t.Blocks == nil {
		t.Blocks = []string{}
	}
	return t
}
