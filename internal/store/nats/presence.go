package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/troupe-dev/troupe/internal/store"
)

var _ store.PresenceReporter = (*Team)(nil)

// presenceKey is the key of the teams bucket where a member's reader says
// where it runs.
func presenceKey(gen, member string) string { return "presence." + gen + "." + member }

type presenceRec struct {
	Host string    `json:"host"`
	PID  int       `json:"pid"`
	At   time.Time `json:"at"`
}

// notePresence records that this process reads member's inbox. A failure
// is logged: presence is for people, and never stops a reader.
func (t *Team) notePresence(ctx context.Context, member string) {
	host, _ := os.Hostname()
	data, _ := json.Marshal(presenceRec{Host: host, PID: os.Getpid(), At: t.s.now()})
	err := t.s.try(ctx, func(ctx context.Context) error {
		_, err := t.s.teams.Put(ctx, presenceKey(t.gen, member), data)
		return err
	})
	if err != nil {
		t.s.opts.Logger.Warn("nats store: record presence", "member", member, "err", err)
	}
}

// Presence returns where each member's inbox is read and how many of its
// messages are not acked (its consumer's pending plus ack-pending).
func (t *Team) Presence(ctx context.Context) ([]store.Presence, error) {
	r, err := t.ReadRoster(ctx)
	if err != nil {
		return nil, err
	}
	mb := &mailbox{t: t}
	var out []store.Presence
	for _, name := range r.Names() {
		p := store.Presence{Member: name}
		var e jetstream.KeyValueEntry
		err := t.s.try(ctx, func(ctx context.Context) (err error) {
			e, err = t.s.teams.Get(ctx, presenceKey(t.gen, name))
			return err
		})
		if err == nil {
			var rec presenceRec
			if json.Unmarshal(e.Value(), &rec) == nil {
				p.Host, p.PID, p.At = rec.Host, rec.PID, rec.At
			}
		} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, fmt.Errorf("presence of %s: %w", name, err)
		}
		var c jetstream.Consumer
		err = t.s.try(ctx, func(ctx context.Context) (err error) {
			c, err = t.s.inbox.Consumer(ctx, mb.consumer(name))
			return err
		})
		switch {
		case errors.Is(err, jetstream.ErrConsumerNotFound):
			// Never read: everything sent is lag.
			msgs, err := t.s.readSubject(ctx, inboxStream, mb.subject(name), 1)
			if err != nil {
				return nil, fmt.Errorf("presence of %s: %w", name, err)
			}
			p.Lag = uint64(len(msgs))
		case err != nil:
			return nil, fmt.Errorf("presence of %s: %w", name, err)
		default:
			info := c.CachedInfo()
			p.Lag = info.NumPending + uint64(info.NumAckPending)
		}
		out = append(out, p)
	}
	return out, nil
}
