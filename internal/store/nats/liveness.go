package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/troupe-dev/troupe/internal/store"
)

// Liveness on this store: a member's heartbeat is not a compare-and-set of
// the whole roster (every beat of every member would contend with every
// real change of it) but one key per member in its own bucket, written
// with a per-message TTL. A member that stops beating loses its key when
// the TTL runs out; the server leaves a marker, so a watcher of the bucket
// hears of the death without polling. ReadRoster folds the keys that are
// still there into the members' HeartbeatAt, so the team's reaper, which
// derives "dead" from a stale HeartbeatAt, works as on the file store.

// beatsBucket holds the heartbeat keys, <gen>.<member>.
const beatsBucket = "troupe_beats"

// DefaultHeartbeatTTL is how long a heartbeat key lives unless beaten
// again: the team's lease (team.Lease), past which a member is dead.
const DefaultHeartbeatTTL = 30 * time.Second

// beatMarkerTTL is how long the server keeps the marker of an expired
// heartbeat, for watchers that reconnect late.
const beatMarkerTTL = 10 * time.Minute

func beatKey(gen, member string) string { return gen + "." + member }

// beatRec is the value of a heartbeat key.
type beatRec struct {
	At   time.Time `json:"at"`
	Host string    `json:"host,omitempty"`
	PID  int       `json:"pid,omitempty"`
}

// beatsConfig is the bucket's configuration: per-key TTL needs limit
// markers (nats-server 2.11 and later).
func beatsConfig(replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket: beatsBucket, Description: "troupe: member heartbeats, one key per member with a TTL",
		History: 1, Storage: jetstream.FileStorage, Replicas: replicas, LimitMarkerTTL: beatMarkerTTL,
	}
}

// readBeats returns the live heartbeat of every member of the team that
// has one (an expired or deleted key is absent).
func (t *Team) readBeats(ctx context.Context) (map[string]time.Time, error) {
	msgs, err := t.s.lastOf(ctx, beatsBucket, t.gen+".>")
	if err != nil {
		return nil, fmt.Errorf("heartbeats of team %s: %w", t.name, err)
	}
	out := map[string]time.Time{}
	for _, m := range msgs {
		if m.deleted() || m.Header.Get("Nats-Marker-Reason") != "" {
			continue
		}
		var rec beatRec
		if json.Unmarshal(m.Data, &rec) != nil {
			continue // a damaged beat is no beat; the roster's own time stands
		}
		out[strings.TrimPrefix(keyOf(beatsBucket, m.Subject), t.gen+".")] = rec.At
	}
	return out, nil
}

// beat writes the heartbeat keys of members, each living for the store's
// heartbeat TTL.
func (t *Team) beat(ctx context.Context, members map[string]time.Time) error {
	host, _ := os.Hostname()
	ttl := t.s.opts.HeartbeatTTL
	for name, at := range members {
		data, err := json.Marshal(beatRec{At: at, Host: host, PID: os.Getpid()})
		if err != nil {
			return err
		}
		m := natsgo.NewMsg(kvSubject(beatsBucket, beatKey(t.gen, name)))
		m.Data = data
		m.Header.Set(jetstream.MsgTTLHeader, ttl.String())
		reply, err := t.s.request(ctx, m)
		if err == nil {
			_, err = ackSeq(reply.Data, 1)
		}
		if err != nil {
			return fmt.Errorf("heartbeat of %s in team %s: %w", name, t.name, err)
		}
	}
	return nil
}

// forgetBeats drops the heartbeat keys of members whose heartbeat the
// roster moved back, so that the roster's stale time is the one read.
func (t *Team) forgetBeats(ctx context.Context, cur, next store.Roster) {
	for _, name := range store.HeartbeatsBack(&cur, &next) {
		// A delete, not a purge: watchers tell it from an expiry.
		err := t.s.try(ctx, func(ctx context.Context) error { return t.s.beats.Delete(ctx, beatKey(t.gen, name)) })
		if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.s.opts.Logger.Warn("nats store: drop heartbeat", "member", name, "err", err)
		}
	}
}

// WatchDeaths returns a channel that receives the name of every member of
// the team whose heartbeat key expires (its TTL ran out without a beat)
// from now on. It is closed when ctx ends or the store closes.
func (t *Team) WatchDeaths(ctx context.Context) (<-chan string, error) {
	w, err := t.s.beats.Watch(ctx, t.gen+".>", jetstream.UpdatesOnly())
	if err != nil {
		return nil, fmt.Errorf("watch heartbeats of team %s: %w", t.name, err)
	}
	out := make(chan string, 16)
	go func() {
		defer close(out)
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.s.done:
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				// An expired key comes as a purge (marker reason MaxAge);
				// the store itself only ever deletes these keys.
				if e == nil || e.Operation() != jetstream.KeyValuePurge {
					continue
				}
				select {
				case out <- strings.TrimPrefix(e.Key(), t.gen+"."):
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}
