package web

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/teamview"
)

// hub keeps one team's view live for every page watching it. It waits on
// the store's journal and board watches (no polling), reads what was
// appended after its cursor, folds it into the view, and wakes its
// subscribers; what they are sent is rendered once per version and query,
// however many browsers watch.
type hub struct {
	s     *Server
	ref   teamRef
	t     store.Team
	ready chan struct{} // closed after the first load (err set if it failed)
	err   error

	mu      sync.Mutex
	view    *teamview.View
	cursor  store.Cursor
	version int
	// oldest is the time of the oldest event folded in by the latest
	// change: how stale that change was when it was sent.
	oldest time.Time
	gone   bool // the team was deleted or archived while watched
	// deps are every dependency the board ever had (blocker, blocked):
	// the store forgets one when its blocker completes, the graph keeps it.
	deps  map[[2]string]bool
	subs  map[chan struct{}]struct{}
	cache map[string]*rendered // this version's sections, by query
	last  map[string]map[string]lastFrag
	// presence is the latest answer of where members read their inboxes,
	// kept by refresh (its one goroutine) for presenceEvery.
	presence    []store.Presence
	presenceAt  time.Time
	presenceFor string // the roster's members and pids it was asked for
}

// presenceEvery bounds how often a refresh asks the store where members
// are: on NATS that is a round trip per member, and a busy team's journal
// changes many times a second.
const presenceEvery = 2 * time.Second

func newHub(s *Server, r teamRef, t store.Team) *hub {
	return &hub{s: s, ref: r, t: t, ready: make(chan struct{}),
		view: teamview.New(teamview.Options{Prices: s.cfg.Prices, Driverless: true}),
		subs: map[chan struct{}]struct{}{}, cache: map[string]*rendered{}, last: map[string]map[string]lastFrag{}, deps: map[[2]string]bool{}}
}

// run loads the team and follows it until ctx ends or the team goes.
func (h *hub) run(ctx context.Context) {
	// The watches start before the first read, so nothing appended in
	// between is missed.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jw, err := h.t.Journal().Watch(wctx)
	if err != nil {
		h.err = err
		close(h.ready)
		return
	}
	bw, err := h.t.Tasks().Watch(wctx)
	if err != nil {
		h.err = err
		close(h.ready)
		return
	}
	if err := h.refresh(ctx); err != nil {
		h.err = err
		close(h.ready)
		return
	}
	close(h.ready)
	if h.ref.Archive {
		return // an archive does not change
	}
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-jw:
			if !ok {
				return
			}
		case _, ok := <-bw:
			if !ok {
				return
			}
		}
		if h.ended() {
			return
		}
		if err := h.refresh(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			if _, terr := h.s.cfg.Store.Team(ctx, h.ref.Name); terr != nil {
				h.mu.Lock()
				h.gone = true
				h.version++
				h.cache = map[string]*rendered{}
				h.mu.Unlock()
				h.wake()
				return
			}
			h.s.cfg.Logger.Warn("web: refresh", "team", h.ref.Name, "err", err)
		}
	}
}

// refresh folds what the journal gained since the cursor, and the roster
// and board as they stand, into the view.
func (h *hub) refresh(ctx context.Context) error {
	h.mu.Lock()
	cur := h.cursor
	h.mu.Unlock()
	events, next, err := h.t.Journal().ReadAfter(ctx, cur)
	if err != nil {
		return err
	}
	r, err := h.t.ReadRoster(ctx)
	if err != nil {
		return err
	}
	b, err := h.t.Tasks().Board(ctx)
	if err != nil {
		return err
	}
	var running map[string]bool
	if h.s.cfg.Running != nil && !h.ref.Archive {
		running = h.s.cfg.Running(h.ref.Name)
	}
	// A member that joins, leaves or restarts is shown at once; only the
	// lags wait for presenceEvery.
	if now, who := time.Now(), rosterKey(r); who != h.presenceFor || now.Sub(h.presenceAt) >= presenceEvery {
		h.presence, h.presenceAt, h.presenceFor = teamview.Presence(ctx, h.t), now, who
	}
	presence := h.presence
	h.mu.Lock()
	var oldest time.Time
	for _, e := range events {
		env, derr := teamevent.Decode(e)
		if derr != nil {
			continue
		}
		if oldest.IsZero() || env.TS.Before(oldest) {
			oldest = env.TS
		}
		h.view.Apply(env.TS, env)
		h.noteDeps(env.Event)
		if _, ok := env.Event.(teamevent.TeamDelete); ok && !h.ref.Archive {
			// The team wing journals the deletion, then archives the
			// team: no later change of the store will say so.
			h.gone = true
		}
	}
	for _, t := range b.Tasks {
		for _, x := range t.BlockedBy {
			h.deps[[2]string{x, t.ID}] = true
		}
		for _, x := range t.Blocks {
			h.deps[[2]string{t.ID, x}] = true
		}
	}
	h.view.Apply(time.Time{}, teamview.Snapshot{Roster: &r, Tasks: b.Tasks, Corrupt: b.Corrupt, Running: running, Presence: presence})
	h.cursor = next
	h.version++
	h.oldest = oldest
	h.cache = map[string]*rendered{}
	h.mu.Unlock()
	h.wake()
	return nil
}

// rosterKey names the roster's members and their processes.
func rosterKey(r store.Roster) string {
	var b strings.Builder
	for _, m := range r.Members {
		fmt.Fprintf(&b, "%s:%d ", m.Name, m.PID)
	}
	return b.String()
}

// wake tells every subscriber there is a new version (coalesced: a slow
// one gets the latest when it is ready).
func (h *hub) wake() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

func (h *hub) subscribe() (chan struct{}, func()) {
	c := make(chan struct{}, 1)
	h.mu.Lock()
	h.subs[c] = struct{}{}
	h.mu.Unlock()
	return c, func() {
		h.mu.Lock()
		delete(h.subs, c)
		h.mu.Unlock()
	}
}

// read runs fn on the view under the hub's lock, with the version.
func (h *hub) read(fn func(v *teamview.View, version int, gone bool)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fn(h.view, h.version, h.gone)
}

// ended reports whether the team went away while followed.
func (h *hub) ended() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gone
}

// noteDeps keeps the dependencies a journal event names.
func (h *hub) noteDeps(ev teamevent.Event) {
	var task string
	var after, before []string
	switch e := ev.(type) {
	case teamevent.TaskCreate:
		task, after = e.Task, e.BlockedBy
	case teamevent.TaskUpdate:
		task, after, before = e.Task, e.AddBlockedBy, e.AddBlocks
	case teamevent.TaskComplete:
		task, after, before = e.Task, e.AddBlockedBy, e.AddBlocks
	}
	for _, b := range after {
		h.deps[[2]string{b, task}] = true
	}
	for _, b := range before {
		h.deps[[2]string{task, b}] = true
	}
}

// depsLocked returns the dependencies seen; the caller holds h.mu.
func (h *hub) depsLocked() map[[2]string]bool { return h.deps }

// rendered is one version of a page's sections, each with its revision:
// a section keeps its revision while its HTML stays the same, so a client
// is sent only the sections that changed.
type rendered struct {
	version int
	ts      int64
	gone    bool
	frags   []frag
}

type frag struct {
	id   string
	rev  int
	json []byte // "id":"html", ready to go in an update
}

// cached returns the rendered sections of query at the current version,
// rendering them once per version, with the version and whether the
// team is gone.
func (h *hub) cached(query string, render func(v *teamview.View, version int, oldest time.Time, gone bool) map[string]string) (*rendered, int, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r, ok := h.cache[query]; ok {
		return r, h.version, h.gone
	}
	html := render(h.view, h.version, h.oldest, h.gone)
	prev := h.last[query]
	r := &rendered{version: h.version, gone: h.gone}
	if !h.oldest.IsZero() {
		r.ts = h.oldest.UnixNano()
	}
	ids := make([]string, 0, len(html))
	for id := range html {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	last := map[string]frag{}
	for _, id := range ids {
		f, ok := prev[id]
		if !ok || f.html != html[id] {
			k, _ := json.Marshal(id)
			v, _ := json.Marshal(html[id])
			f = lastFrag{frag: frag{id: id, rev: f.rev + 1, json: append(append(k, ':'), v...)}, html: html[id]}
		}
		r.frags = append(r.frags, f.frag)
		last[id] = f.frag
		if h.last[query] == nil {
			h.last[query] = map[string]lastFrag{}
		}
		h.last[query][id] = f
	}
	h.cache[query] = r
	return r, h.version, h.gone
}

// lastFrag is a section as last rendered for a query.
type lastFrag struct {
	frag
	html string
}
