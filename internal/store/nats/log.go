package nats

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/troupe-dev/troupe/internal/secret"
	"github.com/troupe-dev/troupe/internal/store"
)

// The journal is subject troupe.j.<gen> of the log stream, a cursor its
// stream sequence; transcripts are subjects troupe.tr.<gen>.<member>.

type journal struct{ t *Team }

var _ store.Journal = (*journal)(nil)

func (j *journal) subject() string { return journalPrefix + j.t.gen }

func (j *journal) Append(ctx context.Context, e store.Event) error {
	if err := j.t.s.closedErr(); err != nil {
		return err
	}
	if j.t.archived != nil {
		return errArchived
	}
	if e.Type == "" {
		return fmt.Errorf("append to journal of %s: event without type", j.t.name)
	}
	if e.Team == "" {
		e.Team = j.t.name
	}
	if e.TS.IsZero() {
		e.TS = j.t.s.now()
	}
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("append to journal of %s: %w", j.t.name, err)
	}
	// The journal keeps what agents saw and said: a key that reached
	// them is written as [redacted].
	data = secret.RedactBytes(data)
	if _, err := j.t.s.publish(ctx, j.subject(), data, ""); err != nil {
		return fmt.Errorf("append to journal of %s: %w", j.t.name, err)
	}
	return nil
}

func (j *journal) Read(ctx context.Context) ([]store.Event, error) {
	evs, _, err := j.ReadAfter(ctx, "")
	return evs, err
}

func (j *journal) Tail(ctx context.Context, n int) ([]store.Event, error) {
	evs, err := j.Read(ctx)
	if err != nil {
		return nil, err
	}
	if n < len(evs) {
		evs = evs[len(evs)-n:]
	}
	return evs, nil
}

// ReadAfter reads the journal past stream sequence c.
func (j *journal) ReadAfter(ctx context.Context, c store.Cursor) ([]store.Event, store.Cursor, error) {
	if err := j.t.s.closedErr(); err != nil {
		return nil, c, err
	}
	var after uint64
	if c != "" {
		n, err := strconv.ParseUint(string(c), 10, 64)
		if err != nil {
			return nil, c, fmt.Errorf("%w: %q", store.ErrInvalidCursor, c)
		}
		after = n
	}
	msgs, err := j.t.s.readSubject(ctx, logStream, j.subject(), after+1)
	if err != nil {
		return nil, c, fmt.Errorf("read journal of %s: %w", j.t.name, err)
	}
	evs := []store.Event{}
	next := after
	for _, m := range msgs {
		next = m.Seq
		var e store.Event
		if err := json.Unmarshal(m.Data, &e); err != nil {
			j.t.s.opts.Logger.Warn("nats store: journal event cannot be read", "team", j.t.name, "seq", m.Seq, "err", err)
			continue
		}
		evs = append(evs, e)
	}
	if len(msgs) == 0 && after > 0 {
		// A cursor past the stream's end was never returned.
		var info *jetstream.StreamInfo
		err := j.t.s.try(ctx, func(ctx context.Context) (err error) {
			info, err = j.t.s.log.Info(ctx)
			return err
		})
		if err != nil {
			return nil, c, fmt.Errorf("read journal of %s: %w", j.t.name, err)
		}
		if after > info.State.LastSeq {
			return nil, c, fmt.Errorf("%w: %q is past the end of the journal", store.ErrInvalidCursor, c)
		}
	}
	return evs, store.Cursor(strconv.FormatUint(next, 10)), nil
}

func (j *journal) Watch(ctx context.Context) (<-chan struct{}, error) {
	if err := j.t.s.closedErr(); err != nil {
		return nil, err
	}
	return j.t.s.watchSubject(ctx, logStream, j.subject(), nil)
}

type transcripts struct{ t *Team }

var _ store.Transcripts = transcripts{}

func (tr transcripts) subject(member string) string {
	return transcriptPrefix + tr.t.gen + "." + member
}

func (tr transcripts) Append(ctx context.Context, member string, line json.RawMessage) error {
	if err := tr.t.s.closedErr(); err != nil {
		return err
	}
	name, err := store.NormalizeName(member)
	if err != nil {
		return fmt.Errorf("append transcript: %w", err)
	}
	if tr.t.archived != nil {
		return errArchived
	}
	var b bytes.Buffer
	if len(line) == 0 {
		return fmt.Errorf("append transcript of %s: empty line", name)
	}
	if err := json.Compact(&b, line); err != nil {
		return fmt.Errorf("append transcript of %s: not one JSON value: %w", name, err)
	}
	data := secret.RedactBytes(b.Bytes())
	if _, err := tr.t.s.publish(ctx, tr.subject(name), data, ""); err != nil {
		return fmt.Errorf("append transcript of %s in team %s: %w", name, tr.t.name, err)
	}
	return nil
}

func (tr transcripts) Read(ctx context.Context, member string) ([]json.RawMessage, error) {
	if err := tr.t.s.closedErr(); err != nil {
		return nil, err
	}
	name, err := store.NormalizeName(member)
	if err != nil {
		return nil, fmt.Errorf("read transcript: %w", err)
	}
	msgs, err := tr.t.s.readSubject(ctx, logStream, tr.subject(name), 1)
	if err != nil {
		return nil, fmt.Errorf("read transcript of %s: %w", name, err)
	}
	out := []json.RawMessage{}
	for _, m := range msgs {
		if json.Valid(m.Data) {
			out = append(out, json.RawMessage(m.Data))
		}
	}
	return out, nil
}
