package file

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/troupe-dev/troupe/internal/secret"
	"github.com/troupe-dev/troupe/internal/store"
)

// journal is the team's events.jsonl, appended under events.lock.
type journal struct{ t *Team }

var _ store.Journal = (*journal)(nil)

// Append records e.
func (j *journal) Append(ctx context.Context, e store.Event) error {
	return j.AppendAll(ctx, []store.Event{e})
}

var _ store.JournalDeferred = (*journal)(nil)

// AppendAll records es in order, with one write and one fsync.
func (j *journal) AppendAll(ctx context.Context, es []store.Event) error {
	return j.append(ctx, es, true)
}

// AppendDeferred records es in order with one write, and returns before
// their fsync: the journal's next durable append gives it, or a sync at
// most deferredSyncDelay later (syncSoon), or Close.
func (j *journal) AppendDeferred(ctx context.Context, es []store.Event) error {
	return j.append(ctx, es, false)
}

func (j *journal) append(ctx context.Context, es []store.Event, sync bool) error {
	var lines []byte
	for _, e := range es {
		if e.Type == "" {
			return fmt.Errorf("append event: no type")
		}
		if e.Team == "" {
			e.Team = j.t.name
		}
		if e.TS.IsZero() {
			e.TS = j.t.s.opts.Now().UTC()
		}
		line, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("append event %s: %w", e.Type, err)
		}
		lines = append(append(lines, line...), '\n')
	}
	if len(lines) == 0 {
		return nil
	}
	lock, path := j.t.path("events.lock"), j.t.path("events.jsonl")
	if err := j.t.appendLockedSync(ctx, lock, path, lines, sync); err != nil {
		return err
	}
	if !sync {
		j.t.s.syncSoon(path)
	}
	j.t.s.hub.notify(journalKey(j.t.key))
	return nil
}

// Read returns every event in order; malformed lines are reported and
// skipped.
func (j *journal) Read(ctx context.Context) ([]store.Event, error) {
	data, err := readFrom(j.t.path("events.jsonl"), 0)
	if err != nil {
		return nil, fmt.Errorf("read journal of team %s: %w", j.t.name, err)
	}
	out := []store.Event{}
	scanLines(data, 0, func(line []byte, end int64) {
		var e store.Event
		if err := json.Unmarshal(line, &e); err != nil {
			j.t.s.opts.Logger.Warn("skipping malformed journal line", "team", j.t.name, "offset", end-int64(len(line)), "err", err)
			return
		}
		out = append(out, e)
	})
	return out, nil
}

// ReadFrom returns the complete events from byte offset off on, and the
// offset after them. ReadAfter is the same with the offset as a cursor;
// ReadFrom stays for callers written against it.
func (j *journal) ReadFrom(ctx context.Context, off int64) ([]store.Event, int64, error) {
	data, err := readFrom(j.t.path("events.jsonl"), off)
	if err != nil {
		return nil, off, fmt.Errorf("read journal of team %s: %w", j.t.name, err)
	}
	var out []store.Event
	next := off
	scanLines(data, off, func(line []byte, end int64) {
		next = end
		var e store.Event
		if err := json.Unmarshal(line, &e); err != nil {
			j.t.s.opts.Logger.Warn("skipping malformed journal line", "team", j.t.name, "offset", end-int64(len(line)), "err", err)
			return
		}
		out = append(out, e)
	})
	return out, next, nil
}

// ReadAfter returns the events after cursor c. The file store's cursor is
// the byte offset of the line after the last event read: it is checked to
// be inside the file and just after a newline, so that a cursor of another
// journal, or of a team since deleted, fails instead of reading half a line.
func (j *journal) ReadAfter(ctx context.Context, c store.Cursor) ([]store.Event, store.Cursor, error) {
	var off int64
	if c != "" {
		n, err := strconv.ParseInt(string(c), 10, 64)
		if err != nil || n < 0 {
			return nil, c, fmt.Errorf("read journal of team %s after %q: %w", j.t.name, c, store.ErrInvalidCursor)
		}
		off = n
	}
	if off > 0 {
		b, err := readRange(j.t.path("events.jsonl"), off-1, 1)
		if err != nil {
			return nil, c, fmt.Errorf("read journal of team %s: %w", j.t.name, err)
		}
		if len(b) != 1 || b[0] != '\n' {
			return nil, c, fmt.Errorf("read journal of team %s after %q: %w: not the end of an event", j.t.name, c, store.ErrInvalidCursor)
		}
	}
	evs, next, err := j.ReadFrom(ctx, off)
	if err != nil {
		return nil, c, err
	}
	if next == off {
		return evs, c, nil
	}
	return evs, store.Cursor(strconv.FormatInt(next, 10)), nil
}

// Watch wakes after events are appended.
func (j *journal) Watch(ctx context.Context) (<-chan struct{}, error) {
	if err := j.t.s.closedErr(); err != nil {
		return nil, err
	}
	key := journalKey(j.t.key)
	ch := j.t.s.hub.subscribe(key)
	j.t.s.watcher.watchDir(j.t.dir, true)
	context.AfterFunc(ctx, func() { j.t.s.hub.unsubscribe(key, ch, true) })
	return ch, nil
}

// Tail returns the last n events.
func (j *journal) Tail(ctx context.Context, n int) ([]store.Event, error) {
	all, err := j.Read(ctx)
	if err != nil {
		return nil, err
	}
	if n >= 0 && len(all) > n {
		all = all[len(all)-n:]
	}
	return all, nil
}

// transcripts are a team's transcripts/<member>.jsonl files.
type transcripts struct{ t *Team }

var _ store.Transcripts = transcripts{}

func (tr transcripts) Append(ctx context.Context, member string, line json.RawMessage) error {
	return tr.t.AppendTranscript(ctx, member, line)
}

var _ store.TranscriptsDeferred = transcripts{}

// AppendDeferred appends line without waiting for an fsync: the next
// Append to member's transcript (or the store's Close) makes it durable.
func (tr transcripts) AppendDeferred(ctx context.Context, member string, line json.RawMessage) error {
	return tr.t.appendTranscript(ctx, member, line, false)
}

// Sync fsyncs member's transcript if a deferred line waits for it.
func (tr transcripts) Sync(ctx context.Context, member string) error {
	return tr.t.syncTranscript(ctx, member)
}

func (tr transcripts) Read(ctx context.Context, member string) ([]json.RawMessage, error) {
	return tr.t.ReadTranscript(ctx, member)
}

// AppendTranscript appends one JSON value as a line of member's transcript
// (transcripts/<member>.jsonl).
func (t *Team) AppendTranscript(ctx context.Context, member string, line json.RawMessage) error {
	return t.appendTranscript(ctx, member, line, true)
}

func (t *Team) appendTranscript(ctx context.Context, member string, line json.RawMessage, sync bool) error {
	name, err := store.NormalizeName(member)
	if err != nil {
		return fmt.Errorf("append transcript: %w", err)
	}
	var compact []byte
	if len(line) > 0 {
		buf := make([]byte, 0, len(line)+1)
		b := jsonCompact(buf, line)
		if b == nil {
			return fmt.Errorf("append transcript of %s: not one JSON value", name)
		}
		compact = b
	} else {
		return fmt.Errorf("append transcript of %s: empty line", name)
	}
	if err := os.MkdirAll(t.path("transcripts"), 0o755); err != nil {
		return err
	}
	// A transcript is only ever appended to, never replaced: it is its own
	// lock file.
	path := t.path("transcripts", name+".jsonl")
	return t.appendLockedSync(ctx, path, path, append(compact, '\n'), sync)
}

// syncTranscript fsyncs member's transcript when lines written without an
// fsync wait for one (syncDeferred).
func (t *Team) syncTranscript(ctx context.Context, member string) error {
	name, err := store.NormalizeName(member)
	if err != nil {
		return fmt.Errorf("sync transcript: %w", err)
	}
	if err := t.s.closedErr(); err != nil {
		return err
	}
	path := t.path("transcripts", name+".jsonl")
	if err := t.s.syncDeferred(ctx, t.s.appends.get(path), path); err != nil {
		return fmt.Errorf("sync transcript of %s: %w", name, err)
	}
	return nil
}

// ReadTranscript returns the lines of member's transcript.
func (t *Team) ReadTranscript(ctx context.Context, member string) ([]json.RawMessage, error) {
	name, err := store.NormalizeName(member)
	if err != nil {
		return nil, fmt.Errorf("read transcript: %w", err)
	}
	data, err := readFrom(t.path("transcripts", name+".jsonl"), 0)
	if err != nil {
		return nil, fmt.Errorf("read transcript of %s: %w", name, err)
	}
	out := []json.RawMessage{}
	scanLines(data, 0, func(line []byte, _ int64) {
		if json.Valid(line) {
			out = append(out, json.RawMessage(line[:len(line)-1]))
		}
	})
	return out, nil
}

func (t *Team) appendLocked(ctx context.Context, lockPath, path string, line []byte) error {
	return t.appendLockedSync(ctx, lockPath, path, line, true)
}

// appendLockedSync is appendLocked, without the fsync when sync is false.
func (t *Team) appendLockedSync(ctx context.Context, lockPath, path string, line []byte, sync bool) error {
	if err := t.s.closedErr(); err != nil {
		return err
	}
	// Transcripts and the journal keep what agents saw and said: a key
	// that reached them is written as [redacted].
	line = secret.RedactBytes(line)
	if err := ctx.Err(); err != nil {
		return err
	}
	err := appendGrouped(ctx, t.s.appends.get(path), &t.s.locks, lockPath, path, line, sync)
	if err != nil {
		return fmt.Errorf("append to %s: %w", path, err)
	}
	return nil
}
