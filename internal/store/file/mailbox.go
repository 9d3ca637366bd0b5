package file

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
)

// mailbox is a team's inboxes.
//
// Guarantees (the file store's reading of store.Mailbox):
//   - A send that returned nil is on disk (fsynced) and will be handed out.
//   - A reader's cursor file records the offset it acked and the length and
//     hash of the line that ends there. When the acked cursor reaches the end
//     of the file, the file is truncated (under the lock senders take, so no
//     append is lost) and the cursor reset. On load, a cursor whose line does
//     not match (a crash between truncating and resetting) means "the file
//     was cleared": reading starts at 0, and nothing acked is handed out
//     again.
//   - Messages handed out but not acked before a crash are handed out again.
//     Within one process, ids already handed out (the last 4096) are not
//     handed out twice: a line that repeats one byte for byte (a sender
//     that retried an append) is skipped, and a different line that reuses
//     the id is set aside in <member>.bad with a warning, never dropped
//     silently. After a restart the remembered ids are gone, so a line
//     handed out again then is a redelivery, not a duplicate.
//   - One reader per inbox: concurrent readers of the same inbox in
//     different processes are not supported.
type mailbox struct{ t *Team }

var _ store.Mailbox = (*mailbox)(nil)

// errDuplicateID marks a line set aside because another message had its id.
var errDuplicateID = fmt.Errorf("%w: duplicate id", store.ErrInvalidMessage)

const (
	seenIDs      = 4096
	compactBytes = 1 << 20 // consumed prefix beyond which the reader rewrites the inbox
)

func (mb *mailbox) inboxDir() string              { return mb.t.path("inbox") }
func (mb *mailbox) inbox(member string) string    { return mb.t.path("inbox", member+".jsonl") }
func (mb *mailbox) cursorOf(member string) string { return mb.t.path("inbox", member+".cursor") }
func (mb *mailbox) lockOf(member string) string   { return inboxLock(mb.t, member) }
func (mb *mailbox) badOf(member string) string    { return mb.t.path("inbox", member+".bad") }

// inboxLock is the lock of member's inbox: its cursor file, which is
// written in place and never replaced (cursorfile.go), so that one file
// serves both and an inbox makes two files, not three. An empty cursor
// file (made by the lock before the first ack) is a cursor at the start.
func inboxLock(t *Team, member string) string { return t.path("inbox", member+".cursor") }

// cursor is the content of <member>.cursor.
type cursor struct {
	Offset int64  `json:"offset"`
	Len    int64  `json:"len,omitempty"` // length of the line ending at Offset
	Sum    string `json:"sum,omitempty"` // its FNV-1a 64 hash
}

func lineSum(line []byte) string {
	h := fnv.New64a()
	h.Write(line)
	return hex.EncodeToString(h.Sum(nil))
}

// Send appends m to its recipient's inbox.
func (mb *mailbox) Send(ctx context.Context, m store.Message) (store.Message, error) {
	if err := mb.t.s.closedErr(); err != nil {
		return store.Message{}, err
	}
	// The cached roster is only read here: no copy of a large team's
	// roster for every message.
	c, err := mb.t.roster()
	if err != nil {
		return store.Message{}, fmt.Errorf("send: %w", err)
	}
	return mb.send(ctx, &c.r, m)
}

func (mb *mailbox) send(ctx context.Context, r *store.Roster, m store.Message) (store.Message, error) {
	m, err := store.PrepareMessage(r, m, mb.t.s.opts.NewID, func() time.Time { return mb.t.s.opts.Now().UTC() })
	if err != nil {
		return store.Message{}, err
	}
	to := m.To
	line, err := store.MarshalMessageLine(&m)
	if err != nil {
		return store.Message{}, fmt.Errorf("send to %s: %w", to, err)
	}
	limit := mb.t.s.opts.MaxInboxBytes
	check := func(size int64) error {
		if size+int64(len(line)) <= limit {
			return nil // the backlog is at most the file
		}
		backlog := size - readCursorOffset(mb.cursorOf(to), size)
		if backlog+int64(len(line)) > limit {
			return fmt.Errorf("%w: %s has %d unread bytes (limit %d); it must read its messages first",
				store.ErrInboxFull, to, backlog, limit)
		}
		return nil
	}
	if err := ctx.Err(); err != nil {
		return store.Message{}, err
	}
	err = mb.appendSend(ctx, to, line, check)
	if errors.Is(err, fs.ErrNotExist) {
		if _, rerr := mb.t.ReadRoster(ctx); rerr != nil {
			err = rerr // the team went away
		}
	}
	if err != nil {
		return store.Message{}, fmt.Errorf("send to %s in team %s: %w", to, mb.t.name, err)
	}
	mb.t.s.hub.notify(inboxKey(mb.t.key, to))
	return m, nil
}

// pendingSend is one send in an inbox's group commit: the sends to one
// inbox that queue while another is written go out with one write and one
// fsync under the inbox's lock, in the order they queued; each returns once
// its own line is fsynced, or with the error of its own check.
type pendingSend struct {
	line  []byte
	check func(size int64) error
	err   error
	done  chan struct{}
}

// appendSend appends line to member to's inbox, with the lines of other
// sends to it queued at the same time.
func (mb *mailbox) appendSend(ctx context.Context, to string, line []byte, check func(int64) error) error {
	p := &pendingSend{line: line, check: check, done: make(chan struct{})}
	path := mb.inbox(to)
	mb.t.s.sends.get(path).submit(p, func(batch []*pendingSend) {
		lines := make([][]byte, len(batch))
		checks := make([]func(int64) error, len(batch))
		for i, q := range batch {
			lines[i], checks[i] = q.line, q.check
		}
		// The lock is waited for without ctx: the lines of other senders
		// ride on this write.
		err := mb.t.s.locks.withLock(context.WithoutCancel(ctx), mb.lockOf(to), func() error {
			errs, err := appendLines(path, lines, checks)
			for i, q := range batch {
				if err == nil {
					q.err = errs[i]
				}
			}
			return err
		})
		for _, q := range batch {
			if err != nil {
				q.err = err
			}
			close(q.done)
		}
	})
	<-p.done
	return p.err
}

// readCursorOffset returns the acked offset recorded for an inbox of size
// bytes (0 if there is none or it cannot hold).
func readCursorOffset(path string, size int64) int64 {
	slots, err := readSlots(path)
	if err != nil {
		return 0
	}
	for _, c := range slots {
		if c.Offset <= size {
			return c.Offset
		}
	}
	return 0
}

// Broadcast sends m to every recipient but its sender.
func (mb *mailbox) Broadcast(ctx context.Context, m store.Message) ([]store.Message, error) {
	r, err := mb.t.ReadRoster(ctx)
	if err != nil {
		return nil, fmt.Errorf("broadcast: %w", err)
	}
	return store.BroadcastEach(&r, m, func(c store.Message) (store.Message, error) { return mb.send(ctx, &r, c) })
}

// member checks that name may have an inbox in this team.
func (mb *mailbox) member(ctx context.Context, name string) (string, error) {
	c, err := mb.t.roster()
	if err != nil {
		return "", err
	}
	return store.ResolveMember(&c.r, name)
}

// reader is the in-process state of an inbox's reader.
type reader struct {
	mb     *mailbox
	member string

	mu      chan struct{} // a one-slot semaphore: held while reading or acking
	loaded  bool
	cur     cursor            // durable
	pos     int64             // how far this process has handed out (>= cur.Offset)
	last    cursor            // the line ending at pos
	pending []ackAt           // handed out, not acked, in order
	seen    map[string]string // id handed out -> the sum of its line
	ring    []string
}

type ackAt struct {
	id string
	at cursor
}

func (mb *mailbox) reader(member string) *reader {
	s := mb.t.s
	key := inboxKey(mb.t.key, member)
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.readers[key]
	if r == nil {
		r = &reader{mb: mb, member: member, mu: make(chan struct{}, 1), seen: make(map[string]string)}
		s.readers[key] = r
	}
	return r
}

func (r *reader) lock(ctx context.Context) error {
	select {
	case r.mu <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *reader) unlock() { <-r.mu }

// load reads and checks the durable cursor.
func (r *reader) load() error {
	if r.loaded {
		return nil
	}
	c, err := loadCursor(r.mb.cursorOf(r.member), r.mb.inbox(r.member))
	if err != nil {
		return err
	}
	r.cur, r.pos, r.last, r.loaded = c, c.Offset, c, true
	return nil
}

// loadCursor returns the cursor of an inbox if the line it names is still
// where it says, else the zero cursor (the file was cleared since).
func loadCursor(cursorPath, inboxPath string) (cursor, error) {
	slots, err := readSlots(cursorPath)
	if errors.Is(err, fs.ErrNotExist) {
		return cursor{}, nil
	}
	if err != nil {
		return cursor{}, err
	}
	for _, s := range slots {
		if s.Offset == 0 {
			return cursor{}, nil // the newest says: nothing acked
		}
		ok, err := namesLine(s.cursor, inboxPath)
		if err != nil {
			return cursor{}, err
		}
		if ok {
			return s.cursor, nil
		}
	}
	return cursor{}, nil
}

// namesLine reports whether c names a line of the inbox at inboxPath: the
// line ending at its offset has its length and hash (else the file was
// cleared or compacted since, or c is a torn write).
func namesLine(c cursor, inboxPath string) (bool, error) {
	if c.Offset <= 0 || c.Len <= 0 || c.Len > c.Offset {
		return false, nil
	}
	f, err := os.Open(inboxPath)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	start := c.Offset - c.Len
	if start > 0 {
		start-- // include the newline before the line
	}
	buf := make([]byte, c.Offset-start)
	if _, err := f.ReadAt(buf, start); err != nil {
		return false, nil // shorter than the cursor: cleared
	}
	line := buf
	if c.Offset-c.Len > 0 {
		if buf[0] != '\n' {
			return false, nil
		}
		line = buf[1:]
	}
	return lineSum(line) == c.Sum, nil
}

// scanLines calls fn for each complete line of data (newline included) with
// the offset just past it; an incomplete last line is left for later.
func scanLines(data []byte, base int64, fn func(line []byte, end int64)) {
	off := 0
	for {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			return
		}
		line := data[off : off+i+1]
		off += i + 1
		fn(line, base+int64(off))
	}
}

// readRange returns up to n bytes of path from off (fewer at its end; none
// if it does not exist).
func readRange(path string, off int64, n int) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:got], nil
}

// readFrom returns the bytes of path from off to its end.
func readFrom(path string, off int64) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() <= off {
		return nil, nil
	}
	buf := make([]byte, st.Size()-off)
	n, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:n], nil
}

// receive hands out what is past pos, if anything.
func (r *reader) receive() ([]store.Message, error) {
	if err := r.load(); err != nil {
		return nil, err
	}
	data, err := readFrom(r.mb.inbox(r.member), r.pos)
	if err != nil || len(data) == 0 {
		return nil, err
	}
	var out []store.Message
	scanLines(data, r.pos, func(line []byte, end int64) {
		at := cursor{Offset: end, Len: int64(len(line)), Sum: lineSum(line)}
		r.pos, r.last = end, at
		if len(bytes.TrimSpace(line)) == 0 {
			return
		}
		m, err := store.ParseMessageLine(line)
		if err != nil {
			r.setAside(line, err)
			return
		}
		if sum, ok := r.seen[m.ID]; ok {
			if sum != at.Sum {
				r.setAside(line, fmt.Errorf("%w %s: a different message was already delivered with it", errDuplicateID, m.ID))
			}
			return
		}
		r.remember(m.ID, at.Sum)
		out = append(out, m)
		r.pending = append(r.pending, ackAt{id: m.ID, at: at})
	})
	if len(r.pending) == 0 && r.pos > r.cur.Offset {
		// Only malformed or repeated lines: consume them now so that they
		// are not set aside again after a restart.
		if err := r.commit(r.last); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (r *reader) remember(id, sum string) {
	if len(r.ring) >= seenIDs {
		delete(r.seen, r.ring[0])
		r.ring = r.ring[1:]
	}
	r.ring = append(r.ring, id)
	r.seen[id] = sum
}

func (r *reader) setAside(line []byte, why error) {
	path := r.mb.badOf(r.member)
	what := "malformed inbox line set aside"
	if errors.Is(why, errDuplicateID) {
		what = "inbox line with a duplicate id set aside"
	}
	r.mb.t.s.opts.Logger.Warn(what,
		"team", r.mb.t.name, "member", r.member, "file", path, "err", why)
	if err := appendLine(path, line, nil); err != nil {
		r.mb.t.s.opts.Logger.Warn("could not set malformed line aside", "file", path, "err", err)
	}
}

// commit makes at the durable cursor; if that is the end of the file, the
// file is cleared, and if a large consumed prefix has built up, it is cut.
// Both happen under the lock senders take, so no append can slip between
// looking at the size and changing the file.
func (r *reader) commit(at cursor) error {
	mb := r.mb
	return mb.t.s.locks.withLock(context.Background(), mb.lockOf(r.member), func() error {
		path := mb.inbox(r.member)
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		size := st.Size()
		switch {
		case at.Offset == size && r.pos == size:
			if err := os.Truncate(path, 0); err != nil {
				return err
			}
			if err := syncFile(path); err != nil {
				return err
			}
			r.pos, r.last = 0, cursor{}
			return r.writeCursor(cursor{})
		case at.Offset >= compactBytes && r.pos == at.Offset:
			rest, err := readFrom(path, at.Offset)
			if err != nil {
				return err
			}
			if err := writeFileAtomic(path, rest); err != nil {
				return err
			}
			r.pos, r.last = 0, cursor{}
			return r.writeCursor(cursor{})
		}
		return r.writeCursor(at)
	})
}

func (r *reader) writeCursor(c cursor) error {
	if err := writeCursorFile(r.mb.cursorOf(r.member), c); err != nil {
		return fmt.Errorf("write cursor of %s: %w", r.member, err)
	}
	r.cur = c
	return nil
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Receive blocks until messages arrive past the reader's position.
func (mb *mailbox) Receive(ctx context.Context, member string) ([]store.Message, error) {
	s := mb.t.s
	if err := s.closedErr(); err != nil {
		return nil, err
	}
	name, err := mb.member(ctx, member)
	if err != nil {
		return nil, fmt.Errorf("receive: %w", err)
	}
	r := mb.reader(name)
	key := inboxKey(mb.t.key, name)
	wake := s.hub.subscribe(key)
	defer s.hub.unsubscribe(key, wake, false)
	s.watcher.watchDir(mb.inboxDir(), false)
	var poll *time.Timer
	defer func() {
		if poll != nil {
			poll.Stop()
		}
	}()
	for {
		if err := r.lock(context.WithoutCancel(ctx)); err != nil {
			return nil, err
		}
		msgs, err := r.receive()
		r.unlock()
		if err != nil {
			return nil, fmt.Errorf("receive %s in team %s: %w", name, mb.t.name, err)
		}
		if len(msgs) > 0 {
			return msgs, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if poll == nil {
			poll = time.NewTimer(s.opts.PollInterval)
		} else {
			poll.Reset(s.opts.PollInterval)
		}
		select {
		case <-ctx.Done():
			// Look once more before giving up: what arrived just before
			// the end is already waiting, and is returned.
		case <-s.done:
			return nil, store.ErrClosed
		case <-wake:
		case <-poll.C:
		}
	}
}

// Ack durably consumes member's messages up to and including id.
func (mb *mailbox) Ack(ctx context.Context, member, id string) error {
	name, err := store.NormalizeName(member)
	if err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	r := mb.reader(name)
	if err := r.lock(ctx); err != nil {
		return err
	}
	defer r.unlock()
	i := -1
	for j, p := range r.pending {
		if p.id == id {
			i = j
			break
		}
	}
	if i < 0 {
		return fmt.Errorf("ack %s of %s: %w", id, name, store.ErrNotReceived)
	}
	at := r.pending[i].at
	r.pending = r.pending[i+1:]
	if len(r.pending) == 0 {
		at = r.last // also consume any malformed or repeated lines after it
	}
	if err := r.commit(at); err != nil {
		return fmt.Errorf("ack %s of %s: %w", id, name, err)
	}
	return nil
}

// Peek returns the messages past the durable cursor without consuming them.
func (mb *mailbox) Peek(ctx context.Context, member string) ([]store.Message, error) {
	name, err := mb.member(ctx, member)
	if err != nil {
		return nil, fmt.Errorf("peek: %w", err)
	}
	var c cursor
	var data []byte
	// Under the lock, so that a clearing of the file cannot fall between
	// reading the cursor and reading the lines.
	read := func() error {
		var err error
		if c, err = loadCursor(mb.cursorOf(name), mb.inbox(name)); err != nil {
			return err
		}
		data, err = readFrom(mb.inbox(name), c.Offset)
		return err
	}
	err = mb.t.s.locks.withLock(ctx, mb.lockOf(name), read)
	if err != nil && lockUnavailable(err) {
		// A read-only .troupe: read without the lock, and believe what was
		// read only if the cursor did not move meanwhile.
		mb.t.s.opts.Logger.Debug("reading an inbox without its lock", "team", mb.t.name, "member", name, "err", err)
		err = mb.peekUnlocked(name, read, &c)
	}
	if err != nil {
		return nil, fmt.Errorf("peek %s in team %s: %w", name, mb.t.name, err)
	}
	out := []store.Message{}
	seen := map[string]bool{}
	scanLines(data, c.Offset, func(line []byte, _ int64) {
		if m, err := store.ParseMessageLine(line); err == nil && !seen[m.ID] {
			seen[m.ID] = true
			out = append(out, m)
		}
	})
	return out, nil
}

// peekUnlocked runs read until the cursor it read is still the cursor
// after it (a reader that cleared the inbox in between moved it).
func (mb *mailbox) peekUnlocked(name string, read func() error, c *cursor) error {
	for range 10 {
		if err := read(); err != nil {
			return err
		}
		again, err := loadCursor(mb.cursorOf(name), mb.inbox(name))
		if err != nil {
			return err
		}
		if again == *c {
			return nil
		}
	}
	return fmt.Errorf("inbox of %s keeps changing while read without its lock", name)
}

// Watch wakes on anything arriving in member's inbox.
func (mb *mailbox) Watch(ctx context.Context, member string) (<-chan struct{}, error) {
	s := mb.t.s
	if err := s.closedErr(); err != nil {
		return nil, err
	}
	name, err := mb.member(ctx, member)
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	key := inboxKey(mb.t.key, name)
	ch := s.hub.subscribe(key)
	s.watcher.watchDir(mb.inboxDir(), true)
	context.AfterFunc(ctx, func() { s.hub.unsubscribe(key, ch, true) })
	return ch, nil
}
