package file

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"time"
)

// Heartbeats on this store are files: beats/<member> in the team's
// directory, one per member, whose mtime is the member's last heartbeat.
// A beat is one utimensat of its own file, with no lock, no fsync and no
// write to the roster: the members' processes beat every HeartbeatEvery,
// and as appends to roster.jsonl each beat took a lock, an fsync, and woke
// every process watching the team's directory (the lead among them), for
// a change nobody acts on until 30 s of them are missing. The directory is
// not watched; an mtime changes no directory entry.
//
// ReadRoster folds the beats into the members' heartbeat_at
// (store.WithHeartbeats); config.json keeps the heartbeat of each member's
// last change of status. A beat is not durable: a crash of the machine may
// take it back to an older one, and everyone of that machine is dead then.
//
// A process reads the directory at most once per beatRefresh and keeps
// what it read: liveness is judged on a lease of 30 s, and a read of the
// roster must not cost a stat per member. Its own beats it sees at once.
const beatRefresh = time.Second

// beatCache is a team's heartbeats as last read. beats is never changed
// once published: a beat copies it.
type beatCache struct {
	read  time.Time
	beats map[string]time.Time
}

func (t *Team) beatDir() string { return t.path("beats") }

// heartbeats returns the team's heartbeat files' times by member. The
// result is shared: callers do not change it.
func (t *Team) heartbeats() (map[string]time.Time, error) {
	// beatMu orders a read of the directory with this process's beats: a
	// beat made while the directory is read is either in the read or put
	// into the cache after it.
	t.s.beatMu.Lock()
	defer t.s.beatMu.Unlock()
	c := t.s.beats[t.key]
	if c != nil && time.Since(c.read) < beatRefresh {
		return c.beats, nil
	}
	read := time.Now()
	ents, err := os.ReadDir(t.beatDir())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("heartbeats of team %s: %w", t.name, err)
	}
	beats := make(map[string]time.Time, len(ents))
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // gone since the directory was read
		}
		beats[e.Name()] = fi.ModTime().UTC()
	}
	t.s.beats[t.key] = &beatCache{read: read, beats: beats}
	return beats, nil
}

// writeBeats sets the heartbeat files of members to their times, making
// the files that are missing. The caller holds config.lock, so that a
// member's heartbeat moved back (dropBeats) is not undone by a beat read
// before it.
func (t *Team) writeBeats(members map[string]time.Time) error {
	if len(members) == 0 {
		return nil
	}
	t.s.beatMu.Lock()
	defer t.s.beatMu.Unlock()
	dir := t.beatDir()
	for name, at := range members {
		p := filepath.Join(dir, name)
		err := os.Chtimes(p, at, at)
		if errors.Is(err, fs.ErrNotExist) {
			err = os.MkdirAll(dir, 0o755)
			if err == nil {
				_, err = makeFile(p, 0o644)
			}
			if err == nil {
				err = os.Chtimes(p, at, at)
			}
		}
		if err != nil {
			return fmt.Errorf("heartbeat of %s in team %s: %w", name, t.name, err)
		}
	}
	t.updateBeats(func(m map[string]time.Time) {
		for name, at := range members {
			m[name] = at
		}
	})
	return nil
}

// dropBeats removes the heartbeat files of members whose heartbeat the
// roster moved back, so that the roster's time is the one read.
func (t *Team) dropBeats(names []string) {
	if len(names) == 0 {
		return
	}
	t.s.beatMu.Lock()
	defer t.s.beatMu.Unlock()
	for _, name := range names {
		if err := os.Remove(filepath.Join(t.beatDir(), name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.s.opts.Logger.Warn("file store: drop heartbeat", "team", t.name, "member", name, "err", err)
		}
	}
	t.updateBeats(func(m map[string]time.Time) {
		for _, name := range names {
			delete(m, name)
		}
	})
}

// updateBeats applies fn to a copy of the cached heartbeats, if any; the
// caller holds beatMu.
func (t *Team) updateBeats(fn func(map[string]time.Time)) {
	c := t.s.beats[t.key]
	if c == nil {
		return
	}
	next := maps.Clone(c.beats)
	if next == nil {
		next = map[string]time.Time{}
	}
	fn(next)
	t.s.beats[t.key] = &beatCache{read: c.read, beats: next}
}

// forgetBeats drops the cached heartbeats of team key.
func (s *Store) forgetBeats(key string) {
	s.beatMu.Lock()
	delete(s.beats, key)
	s.beatMu.Unlock()
}
