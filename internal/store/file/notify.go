package file

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// hub wakes waiters of this process. Keys name what changed: an inbox
// (inboxKey), a task board (tasksKey) or a journal (journalKey). Channels have room for one value,
// so wake-ups coalesce and notify never blocks.
type hub struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

func inboxKey(team, member string) string { return team + "/inbox/" + member }
func tasksKey(team string) string         { return team + "/tasks" }
func journalKey(team string) string       { return team + "/events" }

func (h *hub) subscribe(key string) chan struct{} {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs = make(map[string]map[chan struct{}]struct{})
	}
	if h.subs[key] == nil {
		h.subs[key] = make(map[chan struct{}]struct{})
	}
	h.subs[key][ch] = struct{}{}
	return ch
}

// unsubscribe removes ch; if closeIt, it also closes it (safe: notify sends
// only under the same mutex, to channels still registered).
func (h *hub) unsubscribe(key string, ch chan struct{}, closeIt bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs[key], ch)
	if len(h.subs[key]) == 0 {
		delete(h.subs, key)
	}
	if closeIt {
		close(ch)
	}
}

func (h *hub) notify(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (h *hub) notifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, set := range h.subs {
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// watcher turns file events from other processes into hub notifications.
// It starts on first use; if fsnotify cannot watch a directory (no inotify,
// network filesystem, watch limit), it falls back to waking every waiter
// each poll interval.
type watcher struct {
	teamsDir string
	hub      *hub
	poll     time.Duration
	disabled bool // Options.DisableWatch

	mu      sync.Mutex
	fw      *fsnotify.Watcher
	dirs    map[string]fs.FileInfo // watched directories, as they were when added
	polling bool
	closed  bool
	done    chan struct{}
	wg      sync.WaitGroup
}

// watchDir makes sure changes under dir (an inbox or tasks directory of a
// team) wake this process's waiters.
//
// With recheck, a directory is watched by inode: one that went away and was
// made again under the same path (a team deleted or archived, then created
// anew, by any process) is watched again. That costs a stat, which the
// per-message Receive does without: its inbox is watched again by the next
// Watch, and a deleted directory's watch is dropped on its own event.
func (w *watcher) watchDir(dir string, recheck bool) {
	var fi fs.FileInfo
	if recheck {
		fi, _ = os.Stat(dir)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if old, ok := w.dirs[dir]; w.closed || ok && (!recheck || fi == nil || os.SameFile(old, fi)) {
		return
	}
	if w.done == nil {
		w.done = make(chan struct{})
		w.dirs = make(map[string]fs.FileInfo)
	}
	if w.fw == nil && !w.polling {
		var err error
		if w.disabled {
			err = errors.New("disabled")
		} else {
			w.fw, err = fsnotify.NewWatcher()
		}
		if err != nil {
			w.startPollLocked()
			return
		}
		w.wg.Add(1)
		go w.run(w.fw)
	}
	if w.fw == nil {
		return // polling covers every directory
	}
	if err := w.fw.Add(dir); err != nil {
		w.startPollLocked()
		return
	}
	if fi == nil {
		fi, _ = os.Stat(dir)
	}
	if fi != nil {
		w.dirs[dir] = fi
	}
}

func (w *watcher) startPollLocked() {
	if w.polling {
		return
	}
	w.polling = true
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t := time.NewTicker(w.poll)
		defer t.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-t.C:
				w.hub.notifyAll()
			}
		}
	}()
}

func (w *watcher) run(fw *fsnotify.Watcher) {
	defer w.wg.Done()
	for {
		select {
		case <-w.done:
			return
		case ev, ok := <-fw.Events:
			if !ok {
				return
			}
			w.event(ev)
		case err, ok := <-fw.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				w.hub.notifyAll() // events were dropped: everyone looks again
			}
		}
	}
}

func (w *watcher) event(ev fsnotify.Event) {
	rel, err := filepath.Rel(w.teamsDir, ev.Name)
	if err != nil {
		return
	}
	parts := strings.Split(filepath.ToSlash(rel), "/")
	if len(parts) == 2 && parts[1] == "events.jsonl" {
		w.hub.notify(journalKey(parts[0]))
		return
	}
	if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
		w.forget(ev.Name)
		if len(parts) <= 2 {
			return
		}
	}
	if len(parts) != 3 {
		return
	}
	team, kind, name := parts[0], parts[1], parts[2]
	switch kind {
	case "inbox":
		if member, ok := strings.CutSuffix(name, ".jsonl"); ok {
			w.hub.notify(inboxKey(team, member))
		}
	case "tasks":
		if strings.HasSuffix(name, ".json") || name == ".intent" {
			w.hub.notify(tasksKey(team))
		}
	}
}

// forget drops dir and the directories under it from the watched set: they
// went away with their team (deleted or archived), and a team made again
// under the name must be watched anew (fsnotify moves a watch to the new
// directory when it is added again under the same path).
func (w *watcher) forget(dir string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for d := range w.dirs {
		if d == dir || strings.HasPrefix(d, dir+string(filepath.Separator)) {
			delete(w.dirs, d)
		}
	}
}

func (w *watcher) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	if w.done != nil {
		close(w.done)
	}
	fw := w.fw
	w.mu.Unlock()
	w.wg.Wait()
	if fw != nil {
		fw.Close()
	}
}
