package file

import (
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
)

// taskCache keeps the last parsed version of each task file, valid while
// the file is the same inode with the same size and mtime (every write of
// the store swaps in another inode, a spare of the board's pool or a new
// file: a change shows in the inode, and an inode that comes back through
// the pool at a later write shows in its mtime, since only files older
// than racyWindow are cached). A board
// read then costs one stat per task instead of an open, reads and a parse:
// idle teammates read the whole board after every change.
//
// A file written less than racyWindow before it was read is not cached:
// mtimes come from a coarse clock, so a second write in place (an editor)
// within the same tick, of the same size, would look unchanged. Once the
// file is older than that, any later write shows in its mtime.
type taskCache struct {
	mu sync.Mutex
	m  map[string]cachedTask // key: taskKey(team key, id)
}

type cachedTask struct {
	fi  fs.FileInfo
	t   store.Task
	own bool // written by this store (wrote), younger than racyWindow
}

func taskKey(team, id string) string { return team + "/" + id }

// get returns a copy of the task parsed from the file fi describes, if it
// is cached.
func (c *taskCache) get(key string, fi fs.FileInfo) (store.Task, bool) {
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if !ok || !sameVersion(e.fi, fi) || e.own && time.Since(e.fi.ModTime()) >= racyWindow {
		return store.Task{}, false
	}
	return copyTask(e.t), true
}

// wrote caches t as this store just wrote it to the file fi describes,
// young as that file is. Every change of a task file is made under the
// board lock, so the file can hold something else only if a hand edit
// rewrote it in place, to the same size, within the tick of the clock that
// stamped the write's mtime; the entry is trusted only while the file is
// younger than racyWindow, after which the file is read again once and
// cached by the rule above.
func (c *taskCache) wrote(key string, fi fs.FileInfo, t store.Task) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]cachedTask)
	}
	c.m[key] = cachedTask{fi: fi, t: t, own: true}
}

// racyWindow is far above any filesystem's timestamp granularity.
const racyWindow = time.Second

// put caches t as parsed from the file fi describes (fi must come from the
// descriptor the bytes were read from, so that the two match), unless the
// file is too recent to tell from its next version.
func (c *taskCache) put(key string, fi fs.FileInfo, t store.Task) {
	if time.Since(fi.ModTime()) < racyWindow {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]cachedTask)
	}
	c.m[key] = cachedTask{fi: fi, t: copyTask(t)}
}

func (c *taskCache) drop(key string) {
	c.mu.Lock()
	delete(c.m, key)
	c.mu.Unlock()
}

// forgetTeam drops every task of the team with key team.
func (c *taskCache) forgetTeam(team string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if strings.HasPrefix(k, team+"/") {
			delete(c.m, k)
		}
	}
}

func sameVersion(a, b fs.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// copyTask is a deep copy of t: a cached task is shared by every reader,
// and a caller may change what it is handed.
func copyTask(t store.Task) store.Task {
	c := t
	c.BlockedBy = slices.Clone(t.BlockedBy)
	c.Blocks = slices.Clone(t.Blocks)
	if t.Metadata != nil {
		c.Metadata = copyJSON(t.Metadata).(map[string]any)
	}
	return c
}

// copyJSON deep-copies a value decoded by encoding/json.
func copyJSON(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = copyJSON(x)
		}
		return m
	case []any:
		s := make([]any, len(v))
		for i, x := range v {
			s[i] = copyJSON(x)
		}
		return s
	}
	return v // string, float64, bool, nil, json.Number: immutable
}
