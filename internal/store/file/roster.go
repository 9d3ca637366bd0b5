package file

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"reflect"
	"slices"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
)

// The roster is config.json plus roster.jsonl, a log of member records
// appended since config.json was last written. A change that only adds
// members at the end or changes members in place (status, heartbeat, pid:
// nearly every change a running team makes) appends one line per changed
// member, whole, with one write and one fsync under config.lock, instead
// of rewriting the whole roster with two. Any other change (the team's own
// fields, a member removed or moved) rewrites config.json with the log
// folded in and removes the log. Reading is config.json, then the log's
// lines applied in order, each replacing the member of its name or adding
// it at the end.
//
// The log is folded into config.json soon after a change other than
// heartbeats (rosterFoldDelay), when it grows past rosterLogBytes, and when the
// store closes, so that config.json read with cat or jq is the roster
// again moments after any change, and the log stays short.
//
// Crash safety: config.json is written first and the log removed after,
// so a crash between leaves a log whose lines are already in config.json;
// applying a line twice gives the same roster (each line is a whole record
// and never removes or moves anyone). A line torn by a crash is glued to
// nothing (see appendLine) and, never acknowledged, is skipped.
const (
	rosterFoldDelay = 100 * time.Millisecond
	rosterLogBytes  = 256 << 10
)

// rosterCache keeps the last roster read of a team with the versions of
// config.json and of the log it was read from: a log that only grew is
// read from where the last read stopped.
type rosterCache struct {
	cfg fs.FileInfo
	gen string // the log's generation ("" before the first fold)
	log bool   // there was a log
	off int64  // bytes of the log applied (whole lines)
	r   store.Roster
	// heartbeatsOnly is true while every line of the log only moved
	// heartbeats: nothing a person reading config.json would miss.
	heartbeatsOnly bool
	// logID is the log file read, by birth time (logIDOK), so that a
	// read can tell it unchanged with one statx (see logUnchanged).
	logID   fileInstance
	logIDOK bool
}

func (t *Team) logPath() string { return t.path("roster.jsonl") }

// rosterLog is the log as found: its generation and size.
type rosterLog struct {
	exists bool
	gen    string
	size   int64
	fi     fs.FileInfo // the log's stat, when it exists
}

// logHeader is the first line of a log started by a fold: a generation
// no other fold gives, so that a reader can tell a new log from the one it
// read even when the file system reuses the inode and the size matches.
type logHeader struct {
	Gen string `json:"roster_log"`
}

// statLog reads the log's generation and size.
func (t *Team) statLog() (rosterLog, error) {
	if testHookStatLog != nil {
		testHookStatLog()
	}
	f, err := os.Open(t.logPath())
	if errors.Is(err, fs.ErrNotExist) {
		return rosterLog{}, nil
	}
	if err != nil {
		return rosterLog{}, err
	}
	defer f.Close()
	return readLogHead(f)
}

// What a statx of the log says of the one a cache read.
const (
	logUnknown = iota // no birth times here: read the log's head
	logSame           // the same file, not grown (or still no log)
	logOther          // another file
)

// logState tells, with one statx, whether the log is the one c read,
// unchanged: the same file by birth time, which a new log on a reused
// inode does not share, and the same size.
func (t *Team) logState(c *rosterCache) int {
	id, size, ok, err := instanceOf(t.logPath())
	switch {
	case errors.Is(err, fs.ErrNotExist) && !c.log:
		return logSame
	case err != nil || !ok || !c.logIDOK:
		return logUnknown
	case id != c.logID:
		return logOther
	case size == c.off:
		return logSame
	}
	return logUnknown // grown: the head check reads only the new lines
}

func readLogHead(f *os.File) (rosterLog, error) {
	fi, err := f.Stat()
	if err != nil {
		return rosterLog{}, err
	}
	l := rosterLog{exists: true, size: fi.Size(), fi: fi}
	var buf [128]byte
	n, _ := f.ReadAt(buf[:], 0)
	if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
		var h logHeader
		if json.Unmarshal(buf[:i], &h) == nil {
			l.gen = h.Gen
		}
	}
	return l, nil
}

// ReadRoster returns the team's roster, heartbeats included (beats.go).
func (t *Team) ReadRoster(ctx context.Context) (store.Roster, error) {
	c, err := t.roster()
	if err != nil {
		return store.Roster{}, err
	}
	beats, err := t.heartbeats()
	if err != nil {
		return store.Roster{}, err
	}
	r := c.r.Clone()
	store.WithHeartbeats(&r, beats)
	return r, nil
}

// ReadMember returns one member's entry, copied out of the cached roster
// alone.
func (t *Team) ReadMember(ctx context.Context, name string) (store.Member, bool, error) {
	n, err := store.NormalizeMemberName(name)
	if err != nil {
		return store.Member{}, false, fmt.Errorf("read member: %w", err)
	}
	c, err := t.roster()
	if err != nil {
		return store.Member{}, false, err
	}
	m, ok := c.r.Member(n)
	if !ok {
		return store.Member{}, false, nil
	}
	beats, err := t.heartbeats()
	if err != nil {
		return store.Member{}, false, err
	}
	one := store.Roster{Members: []store.Member{*m}}
	one.Members[0].MCPServers = slices.Clone(one.Members[0].MCPServers)
	store.WithHeartbeats(&one, beats)
	return one.Members[0], true, nil
}

// roster returns the current roster, from the cache when config.json and
// the log are what they were. The result is shared: callers copy it.
func (t *Team) roster() (*rosterCache, error) {
	for range 100 {
		cfg, err := os.Stat(t.path("config.json"))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("team %s: %w", t.name, store.ErrTeamNotFound)
		}
		if err != nil {
			return nil, err
		}
		t.s.mu.Lock()
		c := t.s.rosters[t.key]
		t.s.mu.Unlock()
		prev := c
		if c != nil && sameVersion(c.cfg, cfg) {
			switch t.logState(c) {
			case logSame:
				return c, nil
			case logOther:
				prev = nil // another file: read it whole
			default:
				log, err := t.statLog()
				if err != nil {
					return nil, err
				}
				if c.log == log.exists && c.gen == log.gen && c.off == log.size {
					return c, nil
				}
			}
		}
		next, retry, err := t.readRoster(prev)
		if err != nil {
			return nil, err
		}
		if retry {
			continue // a fold came between the reads
		}
		t.s.mu.Lock()
		t.s.rosters[t.key] = next
		t.s.mu.Unlock()
		return next, nil
	}
	return nil, fmt.Errorf("read roster of team %s: it keeps changing while read", t.name)
}

// readRoster reads config.json (or takes prev's parse of the same file,
// when the log is the same one, grown) and applies the log. retry is true
// when a fold came between the reads of the two.
func (t *Team) readRoster(prev *rosterCache) (next *rosterCache, retry bool, err error) {
	f, err := os.Open(t.path("config.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("team %s: %w", t.name, store.ErrTeamNotFound)
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	cfg, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	if testHookRosterBetweenOpens != nil {
		testHookRosterBetweenOpens()
	}
	var lf *os.File
	var log rosterLog
	lf, err = os.Open(t.logPath())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		lf = nil
	case err != nil:
		return nil, false, err
	default:
		defer lf.Close()
		if log, err = readLogHead(lf); err != nil {
			return nil, false, err
		}
	}
	// A fold between the two opens put the old log's lines into a new
	// config.json and started a new log: the log opened does not go over
	// the config.json opened. While f is open its file cannot share an
	// inode with the new config.json, so SameFile tells them apart.
	if now, err := os.Stat(t.path("config.json")); err != nil || !os.SameFile(cfg, now) {
		return nil, true, nil
	}
	c := &rosterCache{cfg: cfg, gen: log.gen, log: log.exists, heartbeatsOnly: true}
	if prev != nil && sameVersion(prev.cfg, cfg) && prev.log && log.exists && prev.gen == log.gen && log.size >= prev.off {
		// Same config.json, the same log grown: read only the new lines.
		c.r, c.off, c.heartbeatsOnly = prev.r.Clone(), prev.off, prev.heartbeatsOnly
	} else {
		data, err := io.ReadAll(f)
		if err != nil {
			return nil, false, fmt.Errorf("read roster of team %s: %w", t.name, err)
		}
		if err := json.Unmarshal(data, &c.r); err != nil {
			return nil, false, fmt.Errorf("read roster of team %s: %w", t.name, err)
		}
		if err := c.r.NormalizeMembers(); err != nil {
			return nil, false, fmt.Errorf("read roster of team %s: %w", t.name, err)
		}
		if c.r.Members == nil {
			c.r.Members = []store.Member{}
		}
	}
	if lf != nil {
		data := make([]byte, log.size-c.off)
		n, err := lf.ReadAt(data, c.off)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, false, err
		}
		data = data[:n]
		if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
			data = data[:i+1]
		} else {
			data = nil
		}
		if err := applyLog(&c.r, data, &c.heartbeatsOnly); err != nil {
			return nil, false, fmt.Errorf("read roster of team %s: %s: %w", t.name, t.logPath(), err)
		}
		c.off += int64(len(data))
	}
	if lf != nil {
		// While lf is open its inode is not reused: the file at the path
		// with lf's inode is lf, and its birth time names it from now on.
		if id, _, ok, err := instanceOf(t.logPath()); err == nil && ok && sameInode(log.fi, id) {
			c.logID, c.logIDOK = id, true
		}
	}
	// A fold replaces config.json and then starts a new log: a log of the
	// same generation means none finished since config.json was opened.
	now, err := t.statLog()
	if err != nil || now.exists != log.exists || now.gen != log.gen || now.size < log.size {
		return nil, true, nil
	}
	return c, false, nil
}

// testHookStatLog, when set by a test, runs at each read of the log's head.
var testHookStatLog func()

// testHookRosterBetweenOpens, when set by a test, runs after readRoster
// opened config.json and before it opens the log.
var testHookRosterBetweenOpens func()

// applyLog applies the log lines of data to r. A line that does not parse
// was torn by a crash before its write returned: skipped.
func applyLog(r *store.Roster, data []byte, heartbeatsOnly *bool) error {
	var err error
	scanLines(data, 0, func(line []byte, _ int64) {
		if err != nil {
			return
		}
		var m store.Member
		if json.Unmarshal(line, &m) != nil || m.Name == "" {
			return // torn, or the log's header
		}
		name, nerr := store.NormalizeMemberName(m.Name)
		if nerr != nil {
			err = nerr
			return
		}
		m.Name = name
		if cur, ok := r.Member(name); ok {
			if !onlyHeartbeat(*cur, m) {
				*heartbeatsOnly = false
			}
			*cur = m
			return
		}
		*heartbeatsOnly = false
		r.Members = append(r.Members, m)
	})
	return err
}

// UpdateRoster applies fn to the roster under the roster lock and makes
// the result durable: appended to the log when it only adds or changes
// members in place, written whole otherwise.
func (t *Team) UpdateRoster(ctx context.Context, fn func(*store.Roster) error) (store.Roster, error) {
	r := &rosterReq{fn: fn}
	if err := t.submitRoster(ctx, r); err != nil {
		return store.Roster{}, err
	}
	return r.out, nil // the caller's own: the batch cloned it and kept no reference
}

// UpdateMember is UpdateRoster for one member's entry: its change costs
// the copy and comparison of one member, not of the whole roster, which
// matters when hundreds of members change their status at once.
func (t *Team) UpdateMember(ctx context.Context, name string, fn func(*store.Member) error) (store.Member, bool, error) {
	n, err := store.NormalizeMemberName(name)
	if err != nil {
		return store.Member{}, false, fmt.Errorf("update member: %w", err)
	}
	r := &rosterReq{member: n, mfn: fn}
	if err := t.submitRoster(ctx, r); err != nil {
		return store.Member{}, false, err
	}
	return r.mout, r.found, nil
}

func (t *Team) submitRoster(ctx context.Context, r *rosterReq) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.done = make(chan error, 1)
	t.s.rosterBatches.get(t.key).submit(r, func(batch []*rosterReq) {
		// Waited for without ctx: other callers' changes ride on it.
		err := t.s.locks.withLock(context.WithoutCancel(ctx), t.path("config.lock"), func() error {
			return t.updateBatch(batch)
		})
		if err != nil {
			for _, q := range batch {
				q.done <- err
			}
		}
	})
	return <-r.done
}

// rosterReq is one UpdateRoster waiting in a group commit: the changes
// that arrive together (members' statuses, a spawn) are applied in order
// under one hold of config.lock, each seeing the ones before it, and their
// log lines appended with one write and one fsync. Each caller still
// returns only once its change is durable.
type rosterReq struct {
	fn   func(*store.Roster) error
	out  store.Roster // a clone the batch shares with nothing it keeps
	done chan error
	// An UpdateMember: fn is nil, and mfn changes member's entry alone.
	member string
	mfn    func(*store.Member) error
	mout   store.Member
	found  bool
}

// updateBatch applies the queued changes in order and answers each; the
// caller holds config.lock.
func (t *Team) updateBatch(batch []*rosterReq) error {
	c, err := t.roster()
	if err != nil {
		return err
	}
	beats, err := t.heartbeats()
	if err != nil {
		return err
	}
	cur := c.r.Clone()
	store.WithHeartbeats(&cur, beats)
	// Changes of heartbeats alone go to the members' heartbeat files, not
	// to the log; a heartbeat moved back drops the member's file. Both are
	// done once the batch's lines are written, and the changes of
	// heartbeats alone answered then.
	var (
		beat      map[string]time.Time
		drop      []string
		beatsOnly []*rosterReq
	)
	defer func() {
		t.dropBeats(drop)
		err := t.writeBeats(beat)
		for _, q := range beatsOnly {
			q.done <- err
		}
	}()
	off, heartbeatsOnly := c.off, c.heartbeatsOnly
	var lines []byte
	var waiting []*rosterReq
	fold := false
	flush := func() error {
		var err error
		if len(lines) > 0 {
			if err = appendLine(t.logPath(), lines, nil); err != nil {
				err = fmt.Errorf("update roster of team %s: %w", t.name, err)
			}
		}
		for _, q := range waiting {
			q.done <- err
		}
		off += int64(len(lines))
		lines, waiting = nil, nil
		return err
	}
	// shared: cur is also some caller's result, so a change of one member
	// in place must copy it first.
	shared := false
	for i, q := range batch {
		// cv and nv are the roster before and after q (for a change of one
		// member, that member alone); adopt makes q's change current.
		var (
			cv, nv *store.Roster
			adopt  func()
		)
		if q.mfn != nil {
			at := slices.IndexFunc(cur.Members, func(m store.Member) bool { return m.Name == q.member })
			if at < 0 {
				q.done <- nil
				continue
			}
			old := cur.Members[at]
			m := old
			m.MCPServers = slices.Clone(old.MCPServers)
			if err := q.mfn(&m); err != nil {
				q.done <- err
				continue
			}
			m.Name = old.Name
			q.mout, q.found = m, true
			q.mout.MCPServers = slices.Clone(m.MCPServers)
			cv, nv = &store.Roster{Members: []store.Member{old}}, &store.Roster{Members: []store.Member{m}}
			adopt = func() {
				if shared {
					cur, shared = cur.Clone(), false
				}
				cur.Members[at] = m
			}
		} else {
			next := cur.Clone()
			if err := q.fn(&next); err != nil {
				q.done <- err
				continue
			}
			next.Name, next.Lead, next.CreatedAt = cur.Name, cur.Lead, cur.CreatedAt
			if err := next.NormalizeMembers(); err != nil {
				q.done <- fmt.Errorf("update roster of team %s: %w", t.name, err)
				continue
			}
			q.out = next
			cv, nv = &cur, &next
			adopt = func() { cur, shared = next, true }
		}
		if fwd, ok := store.HeartbeatsForward(cv, nv); ok {
			if beat == nil {
				beat = map[string]time.Time{}
			}
			maps.Copy(beat, fwd)
			beatsOnly = append(beatsOnly, q)
			adopt()
			continue
		}
		for _, name := range store.HeartbeatsBack(cv, nv) {
			delete(beat, name)
			drop = append(drop, name)
		}
		add, beats, ok := logLines(cv, nv)
		if ok && off+int64(len(lines)+len(add)) <= rosterLogBytes {
			lines = append(lines, add...)
			if !beats {
				heartbeatsOnly = false
				fold = true
			}
			adopt()
			waiting = append(waiting, q)
			continue
		}
		if err := flush(); err != nil {
			// The rest were made on what could not be written.
			for _, rest := range batch[i:] {
				rest.done <- err
			}
			return nil
		}
		adopt()
		if err := t.writeRoster(&cur); err != nil {
			q.done <- fmt.Errorf("update roster of team %s: %w", t.name, err)
			for _, rest := range batch[i+1:] {
				rest.done <- err
			}
			return nil
		}
		q.done <- nil
		off, heartbeatsOnly = 0, true
	}
	if err := flush(); err != nil {
		return nil
	}
	if fold || !heartbeatsOnly {
		t.s.compactSoon(t)
	}
	return nil
}

// writeRoster replaces config.json with r and starts a new log (a header
// line alone), as r holds the lines of the old one; the caller holds
// config.lock. The new log is not fsynced: a crash that loses it leaves
// the old log or an empty one, and both read the same over r.
func (t *Team) writeRoster(r *store.Roster) error {
	data, err := marshalRoster(r)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(t.path("config.json"), data); err != nil {
		return err
	}
	head, err := json.Marshal(logHeader{Gen: t.s.opts.NewID()})
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(t.dir, ".roster.jsonl.tmp*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(append(head, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), t.logPath())
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// compact folds the log into config.json, if there is one.
func (t *Team) compact(ctx context.Context) error {
	return t.s.locks.withLock(ctx, t.path("config.lock"), func() error {
		cur, err := t.roster()
		if err != nil || !cur.log || cur.heartbeatsOnly && cur.off < rosterLogBytes {
			return err
		}
		return t.writeRoster(&cur.r)
	})
}

// logLines returns the log lines that take cur to next (one per member
// added or changed), whether they all only move heartbeats, and false
// when next is not cur with members added at the end or changed in place.
func logLines(cur, next *store.Roster) (lines []byte, beats, ok bool) {
	if len(next.Members) < len(cur.Members) {
		return nil, false, false
	}
	a, b := *cur, *next
	a.Members, b.Members = nil, nil
	if !reflect.DeepEqual(a, b) {
		return nil, false, false
	}
	beats = true
	for i := range next.Members {
		n := &next.Members[i]
		if i < len(cur.Members) {
			c := &cur.Members[i]
			if c.Name != n.Name {
				return nil, false, false
			}
			if store.SameMember(c, n) {
				continue
			}
			beats = beats && onlyHeartbeat(*c, *n)
		} else {
			beats = false
		}
		line, err := json.Marshal(n)
		if err != nil {
			return nil, false, false
		}
		lines = append(append(lines, line...), '\n')
	}
	return lines, beats, true
}

// onlyHeartbeat reports whether b is a with at most its heartbeat moved.
func onlyHeartbeat(a, b store.Member) bool {
	a.HeartbeatAt = b.HeartbeatAt
	return reflect.DeepEqual(a, b)
}

// compactSoon folds t's log into config.json after rosterFoldDelay, once.
func (s *Store) compactSoon(t *Team) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.compacting[t.key] != nil {
		return
	}
	s.compacting[t.key] = time.AfterFunc(rosterFoldDelay, func() {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return // Close folds it
		}
		delete(s.compacting, t.key)
		s.compactWG.Add(1)
		s.mu.Unlock()
		defer s.compactWG.Done()
		if err := t.compact(context.Background()); err != nil && !errors.Is(err, store.ErrTeamNotFound) {
			s.opts.Logger.Debug("fold the roster log into config.json", "team", t.name, "err", err)
		}
	})
}

// dropFold stops the pending fold of team n, which is being removed (a
// fold would make its config.lock again in a directory being removed, or
// in a team made again under the name); s.mu is held. A fold already
// running takes the config lock: removal retries (removeTeamDir).
func (s *Store) dropFold(n string) {
	if tm := s.compacting[n]; tm != nil {
		tm.Stop()
		delete(s.compacting, n)
	}
}

// compactAll folds every log still waiting into config.json; Close calls
// it once the store is marked closed, so no new fold is scheduled.
func (s *Store) compactAll() {
	s.mu.Lock()
	var teams []*Team
	for key, tm := range s.compacting {
		tm.Stop()
		if name, ok := teamOfKey(key); ok {
			teams = append(teams, s.team(name))
		}
		delete(s.compacting, key)
	}
	s.mu.Unlock()
	s.compactWG.Wait()
	for _, t := range teams {
		if err := t.compact(context.Background()); err != nil && !errors.Is(err, store.ErrTeamNotFound) {
			s.opts.Logger.Debug("fold the roster log into config.json", "team", t.name, "err", err)
		}
	}
}

// teamOfKey returns the team name of a cache key (archives are never
// written, so never folded).
func teamOfKey(key string) (string, bool) {
	return key, store.NamePattern.MatchString(key)
}
