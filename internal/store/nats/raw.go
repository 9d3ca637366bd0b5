package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/troupe-dev/troupe/internal/store"
)

// rawMsg is one stored message as a direct get returns it.
type rawMsg struct {
	Subject string
	Seq     uint64
	Data    []byte
	Header  natsgo.Header
}

// deleted reports whether m is a KV delete or purge marker.
func (m rawMsg) deleted() bool {
	op := m.Header.Get("KV-Operation")
	return op == "DEL" || op == "PURGE"
}

// write is one message of an atomic batch: data for subject, committed only
// if the subject's last sequence is still expect (0: no message yet).
type write struct {
	subject string
	data    []byte
	del     bool
	expect  uint64
}

// errConflict is a compare-and-set that lost: someone wrote first.
var errConflict = errors.New("concurrent change")

// pubAck is the answer to a publish.
type pubAck struct {
	Stream    string `json:"stream"`
	Seq       uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate"`
	BatchSize int    `json:"count"`
	Error     *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
}

// JetStream error codes this store reacts to.
const (
	errCodeWrongLastSeq      = 10071
	errCodeWrongLastSeqConst = 10164
)

// commit writes ws as one atomic batch (nats-server 2.12 and later): every
// message is stored, or none is. A lost compare-and-set is errConflict.
func (s *Store) commit(ctx context.Context, ws []write) (uint64, error) {
	if len(ws) == 0 {
		return 0, nil
	}
	if len(ws) == 1 {
		// One key needs no batch: a publish with the expected revision is
		// the compare-and-set, and skips the batch's staging on disk.
		w := ws[0]
		m := natsgo.NewMsg(w.subject)
		m.Data = w.data
		m.Header.Set("Nats-Expected-Last-Subject-Sequence", strconv.FormatUint(w.expect, 10))
		// The id makes a retry after a lost answer safe: the server knows
		// the write and answers it again instead of refusing the
		// compare-and-set that the first attempt already won.
		m.Header.Set("Nats-Msg-Id", s.opts.NewID())
		if w.del {
			m.Header.Set("KV-Operation", "DEL")
		}
		reply, err := s.request(ctx, m)
		if err != nil {
			return 0, fmt.Errorf("write %s: %w", w.subject, err)
		}
		return ackSeq(reply.Data, 1)
	}
	id := s.opts.NewID()
	for i, w := range ws {
		m := natsgo.NewMsg(w.subject)
		m.Data = w.data
		m.Header.Set("Nats-Batch-Id", id)
		m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
		m.Header.Set("Nats-Expected-Last-Subject-Sequence", strconv.FormatUint(w.expect, 10))
		if w.del {
			m.Header.Set("KV-Operation", "DEL")
		}
		if i < len(ws)-1 {
			if err := s.nc.PublishMsg(m); err != nil {
				return 0, err
			}
			continue
		}
		m.Header.Set("Nats-Batch-Commit", "1")
		// A batch is not sent again (its staged messages are gone with
		// a lost answer), but it waits no longer than any request.
		cctx, cancel := context.WithTimeout(ctx, requestTimeout)
		reply, err := s.nc.RequestMsgWithContext(cctx, m)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("commit %d writes: %w", len(ws), err)
		}
		return ackSeq(reply.Data, len(ws))
	}
	return 0, nil
}

// ackSeq reads the answer to a write of n messages.
func ackSeq(data []byte, n int) (uint64, error) {
	var ack pubAck
	if err := json.Unmarshal(data, &ack); err != nil {
		return 0, fmt.Errorf("commit: bad answer %q: %w", data, err)
	}
	if ack.Error != nil {
		switch ack.Error.ErrCode {
		case errCodeWrongLastSeq, errCodeWrongLastSeqConst:
			return 0, errConflict
		}
		return 0, fmt.Errorf("commit %d writes: %s (code %d)", n, ack.Error.Description, ack.Error.ErrCode)
	}
	return ack.Seq, nil
}

// directGet sends a batched direct get to stream and collects the messages
// up to the end-of-batch marker. more reports that the batch stopped short.
func (s *Store) directGet(ctx context.Context, stream string, req map[string]any) (msgs []rawMsg, more bool, err error) {
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, requestTimeout)
		msgs, more, err = s.directGetOnce(actx, stream, req)
		cancel()
		if err == nil || attempt == requestAttempts || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return msgs, more, err
		}
	}
}

func (s *Store) directGetOnce(ctx context.Context, stream string, req map[string]any) (msgs []rawMsg, more bool, err error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, false, err
	}
	_, batch := req["batch"]
	_, multi := req["multi_last"]
	if !batch && !multi {
		m, err := s.request(ctx, &natsgo.Msg{Subject: "$JS.API.DIRECT.GET." + stream, Data: body})
		if err != nil {
			if cerr := s.closedErr(); cerr != nil {
				return nil, false, cerr
			}
			return nil, false, fmt.Errorf("direct get from %s: %w", stream, err)
		}
		if st := m.Header.Get("Status"); st == "404" {
			return nil, false, nil
		} else if st != "" {
			return nil, false, fmt.Errorf("direct get from %s: status %s %s", stream, st, m.Header.Get("Description"))
		}
		seq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		if err != nil {
			return nil, false, fmt.Errorf("direct get from %s: no sequence in %v", stream, m.Header)
		}
		return []rawMsg{{Subject: m.Header.Get("Nats-Subject"), Seq: seq, Data: m.Data, Header: m.Header}}, false, nil
	}
	replies, done, err := s.replies()
	if err != nil {
		return nil, false, err
	}
	defer done()
	if err := s.nc.PublishRequest("$JS.API.DIRECT.GET."+stream, replies.subject, body); err != nil {
		return nil, false, err
	}
	for {
		var m *natsgo.Msg
		select {
		case m = <-replies.ch:
		case <-ctx.Done():
			err = ctx.Err()
		case <-s.done:
			err = store.ErrClosed
		}
		if err != nil {
			if errors.Is(err, natsgo.ErrConnectionClosed) || errors.Is(err, natsgo.ErrBadSubscription) {
				if cerr := s.closedErr(); cerr != nil {
					return nil, false, cerr
				}
			}
			return nil, false, fmt.Errorf("direct get from %s: %w", stream, err)
		}
		if len(m.Data) == 0 && m.Header != nil {
			switch status := m.Header.Get("Status"); status {
			case "204": // end of batch
				np, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
				return msgs, np > 0, nil
			case "404":
				return msgs, false, nil
			case "413":
				return nil, false, errTooMany
			case "":
			default:
				if m.Header.Get("Nats-Sequence") == "" {
					return nil, false, fmt.Errorf("direct get from %s: status %s %s", stream, status, m.Header.Get("Description"))
				}
			}
		}
		seq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		if err != nil {
			return nil, false, fmt.Errorf("direct get from %s: no sequence in %v", stream, m.Header)
		}
		msgs = append(msgs, rawMsg{Subject: m.Header.Get("Nats-Subject"), Seq: seq, Data: m.Data, Header: m.Header})
	}
}

// readSubject returns every message of subject (wildcards allowed) in
// stream from sequence from on, in order, page after page.
func (s *Store) readSubject(ctx context.Context, stream, subject string, from uint64) ([]rawMsg, error) {
	if from == 0 {
		from = 1
	}
	var out []rawMsg
	for {
		msgs, more, err := s.directGet(ctx, stream, map[string]any{"seq": from, "next_by_subj": subject, "batch": 1000})
		if err != nil {
			return nil, err
		}
		out = append(out, msgs...)
		if !more || len(msgs) == 0 {
			return out, nil
		}
		from = msgs[len(msgs)-1].Seq + 1
	}
}

// errTooMany is a multi-get over more keys than the server answers at once
// (1024).
var errTooMany = errors.New("too many keys for one multi-get")

// lastOf returns the last message of every subject matching filter in
// bucket's stream, delete markers included. Up to 1024 keys that is one
// multi-get; a bigger set (a board of thousands of tasks) is read through a
// KV watcher, which streams the last value of every key however many.
func (s *Store) lastOf(ctx context.Context, bucket, filter string) ([]rawMsg, error) {
	msgs, more, err := s.directGet(ctx, "KV_"+bucket, map[string]any{"multi_last": []string{"$KV." + bucket + "." + filter}})
	if errors.Is(err, errTooMany) || (err == nil && more) {
		return s.lastOfAll(ctx, bucket, filter)
	}
	if err != nil {
		return nil, err
	}
	return msgs, nil
}

// lastOfAll reads the last message of every key matching filter with a
// watcher that ends once it has delivered them.
func (s *Store) lastOfAll(ctx context.Context, bucket, filter string) ([]rawMsg, error) {
	kv, err := s.bucket(bucket)
	if err != nil {
		return nil, err
	}
	var out []rawMsg
	err = s.retryTransient(ctx, func() error {
		out = out[:0]
		wctx, cancel := context.WithTimeout(ctx, 4*requestTimeout)
		defer cancel()
		w, err := kv.Watch(wctx, filter)
		if err != nil {
			return err
		}
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-wctx.Done():
				return fmt.Errorf("read %s of %s: %w", filter, bucket, wctx.Err())
			case <-s.done:
				return store.ErrClosed
			case e, ok := <-w.Updates():
				if !ok {
					return fmt.Errorf("read %s of %s: watcher ended", filter, bucket)
				}
				if e == nil {
					return nil // the last values as of the watch's start are in
				}
				m := rawMsg{Subject: kvSubject(bucket, e.Key()), Seq: e.Revision(), Data: e.Value(), Header: natsgo.Header{}}
				switch e.Operation() {
				case jetstream.KeyValueDelete:
					m.Header.Set("KV-Operation", "DEL")
				case jetstream.KeyValuePurge:
					m.Header.Set("KV-Operation", "PURGE")
				}
				out = append(out, m)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// bucket is the KV handle of a bucket by name.
func (s *Store) bucket(name string) (jetstream.KeyValue, error) {
	switch name {
	case tasksBucket:
		return s.tasks, nil
	case teamsBucket:
		return s.teams, nil
	case beatsBucket:
		return s.beats, nil
	}
	return nil, fmt.Errorf("no bucket %s", name)
}

// lastFor returns the last message of one key of bucket (ok false if the
// key never had one). A delete marker is returned: its sequence is what a
// compare-and-set expects.
func (s *Store) lastFor(ctx context.Context, bucket, key string) (rawMsg, bool, error) {
	msgs, _, err := s.directGet(ctx, "KV_"+bucket, map[string]any{"last_by_subj": "$KV." + bucket + "." + key})
	if err != nil {
		return rawMsg{}, false, err
	}
	if len(msgs) == 0 {
		return rawMsg{}, false, nil
	}
	return msgs[0], true, nil
}

// keyOf is the key of a KV subject of bucket.
func keyOf(bucket, subject string) string { return strings.TrimPrefix(subject, "$KV."+bucket+".") }

func kvSubject(bucket, key string) string { return "$KV." + bucket + "." + key }

// replyBox receives the answers to one batched request.
type replyBox struct {
	subject string
	ch      chan *natsgo.Msg
}

// replyMux is one subscription for the answers to every batched request
// of a store: a subscription per request costs a round of SUB and UNSUB.
type replyMux struct {
	mu     sync.Mutex
	sub    *natsgo.Subscription
	prefix string
	next   uint64
	boxes  map[string]*replyBox
}

// replies opens a reply box; done closes it.
func (s *Store) replies() (*replyBox, func(), error) {
	r := &s.mux
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sub == nil {
		r.prefix = natsgo.NewInbox() + "."
		r.boxes = map[string]*replyBox{}
		sub, err := s.nc.Subscribe(r.prefix+"*", func(m *natsgo.Msg) {
			r.mu.Lock()
			b := r.boxes[m.Subject]
			r.mu.Unlock()
			if b != nil {
				select {
				case b.ch <- m:
				default: // more than asked for: the request fails on its count
				}
			}
		})
		if err != nil {
			return nil, nil, err
		}
		r.sub = sub
	}
	r.next++
	b := &replyBox{subject: r.prefix + strconv.FormatUint(r.next, 10), ch: make(chan *natsgo.Msg, maxBatch+16)}
	r.boxes[b.subject] = b
	return b, func() {
		r.mu.Lock()
		delete(r.boxes, b.subject)
		r.mu.Unlock()
	}, nil
}

// maxBatch bounds the messages of one batched get (the server answers at
// most 1024 for a multi_last).
const maxBatch = 1100

// A request that gets no answer in requestTimeout is sent again, up to
// requestAttempts times: while a cluster node dies or a leader is elected,
// requests are dropped. Every request retried is idempotent (a read, or a
// write with a Nats-Msg-Id the server de-duplicates).
const (
	requestTimeout  = 4 * time.Second
	requestAttempts = 8
)

// transientErr says whether err is what a request gets while the server
// restarts, a node dies or a leader is elected: worth asking again.
func transientErr(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, natsgo.ErrNoResponders) || errors.Is(err, natsgo.ErrTimeout)
}

// request sends m and waits for its answer, retrying as above.
func (s *Store) request(ctx context.Context, m *natsgo.Msg) (*natsgo.Msg, error) {
	var reply *natsgo.Msg
	err := s.try(ctx, func(actx context.Context) error {
		var err error
		reply, err = s.nc.RequestMsgWithContext(actx, m)
		if err == nil && reply.Header.Get("Status") == "503" {
			err = natsgo.ErrNoResponders
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return reply, nil
}

// try runs fn, an idempotent request to the server, with a deadline of
// requestTimeout for each attempt, retried as retryTransient does. Every
// request of the store goes through it or has a deadline of its own
// (watches aside, whose ctx is their lifetime, and Open's, which its
// caller bounds): a request lost while a node dies or a leader is
// elected, or one the server drops without an answer (an ack past a new
// consumer leader's delivered sequence), would otherwise wait for the
// caller's whole deadline.
func (s *Store) try(ctx context.Context, fn func(context.Context) error) error {
	return s.retryTransient(ctx, func() error {
		actx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		return fn(actx)
	})
}

// retryTransient runs fn until it succeeds, fails for good, or has failed
// transiently (transientErr) requestAttempts times, backing off between
// tries; an error once the store is closed is store.ErrClosed. fn bounds
// each try itself.
func (s *Store) retryTransient(ctx context.Context, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil {
			return nil
		}
		if cerr := s.closedErr(); cerr != nil {
			return cerr
		}
		if !transientErr(err) {
			return err
		}
		if ctx.Err() != nil {
			// The caller gave up: its own error says so, not the
			// timeout of a try that may have run without its ctx.
			return ctx.Err()
		}
		if attempt == requestAttempts {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return store.ErrClosed
		case <-time.After(time.Duration(attempt) * 50 * time.Millisecond): // backs off from a cluster in failover
		}
	}
}

// publish stores data on subject of a stream, with msgID (made up when
// empty) so that a retried publish is stored once.
func (s *Store) publish(ctx context.Context, subject string, data []byte, msgID string) (uint64, error) {
	m := natsgo.NewMsg(subject)
	m.Data = data
	if msgID == "" {
		msgID = s.opts.NewID()
	}
	m.Header.Set("Nats-Msg-Id", msgID)
	reply, err := s.request(ctx, m)
	if err != nil {
		return 0, err
	}
	return ackSeq(reply.Data, 1)
}
