package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/troupe-dev/troupe/internal/store"
)

// Each inbox is subject troupe.in.<gen>.<member> of the inbox stream, read
// through the durable consumer in_<gen>_<member>, which acks all up to a
// message (AckAll): its ack floor is the reader's durable position.

type mailbox struct{ t *Team }

var _ store.Mailbox = (*mailbox)(nil)

func (mb *mailbox) subject(member string) string  { return inboxPrefix + mb.t.gen + "." + member }
func (mb *mailbox) consumer(member string) string { return "in_" + mb.t.gen + "_" + token(member) }

// reader is this client's side of one inbox: what it handed out and not yet
// acked, so that a message is never handed out twice by one client.
type reader struct {
	mu   chan struct{} // a lock that a waiting Receive gives up on ctx
	cons jetstream.Consumer
	// The consumer delivers into buf as the server pushes (a message
	// comes only once stored, so a wake is never early) and arrived
	// wakes a waiting Receive.
	cc      jetstream.ConsumeContext
	bufMu   sync.Mutex
	buf     []jetstream.Msg
	arrived chan struct{}
	pending map[string]jetstream.Msg
	seqOf   map[string]uint64
	floor   uint64 // acked up to this stream sequence
	seen    map[string]bool
	high    uint64 // the highest stream sequence taken from buf
	// durable names the consumer once open (for a rewind, which needs
	// no lock: reconnected).
	durable atomic.Pointer[string]
	// watchers are the wake channels of this client's watches of the
	// inbox: a message pushed again after a rewind wakes them, as the
	// watch itself sees only new messages.
	watchMu  sync.Mutex
	watchers map[chan struct{}]bool
	// stallCheck is set while a check for a stalled push is scheduled.
	stallCheck atomic.Bool
}

func (r *reader) wakeWatchers() {
	r.watchMu.Lock()
	defer r.watchMu.Unlock()
	for ch := range r.watchers {
		wake(ch)
	}
}

func (r *reader) watch(ch chan struct{}) (stop func()) {
	r.watchMu.Lock()
	defer r.watchMu.Unlock()
	if r.watchers == nil {
		r.watchers = map[chan struct{}]bool{}
	}
	r.watchers[ch] = true
	return func() {
		r.watchMu.Lock()
		defer r.watchMu.Unlock()
		delete(r.watchers, ch)
	}
}

type readers struct {
	sync.Mutex
	m map[string]*reader
}

func (mb *mailbox) reader(member string) *reader {
	s := mb.t.s
	s.readers.Lock()
	defer s.readers.Unlock()
	if s.readers.m == nil {
		s.readers.m = map[string]*reader{}
	}
	key := mb.t.gen + "/" + member
	r := s.readers.m[key]
	if r == nil {
		r = &reader{mu: make(chan struct{}, 1), arrived: make(chan struct{}, 1), pending: map[string]jetstream.Msg{}, seqOf: map[string]uint64{}, seen: map[string]bool{}}
		s.readers.m[key] = r
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

// open makes sure the member's consumer exists and, the first time this
// client reads the inbox, rewinds it to its ack floor: what an earlier
// reader was handed but never acked is handed out again at once.
func (mb *mailbox) open(ctx context.Context, r *reader, member string) error {
	if r.cons != nil {
		return nil
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       mb.consumer(member),
		FilterSubject: mb.subject(member),
		AckPolicy:     jetstream.AckAllPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		// Redelivery is this store's job (after a reader restarts), not
		// the server's: a reader still holds what it was handed.
		AckWait:       24 * time.Hour,
		MaxAckPending: 1 << 20,
		MaxDeliver:    -1,
		Replicas:      mb.t.s.opts.Replicas,
	}
	var cons jetstream.Consumer
	err := mb.t.s.try(ctx, func(ctx context.Context) (err error) {
		cons, err = mb.t.s.inbox.CreateOrUpdateConsumer(ctx, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("inbox of %s in team %s: consumer: %w", member, mb.t.name, err)
	}
	var info *jetstream.ConsumerResetResponse
	err = mb.t.s.try(ctx, func(ctx context.Context) (err error) {
		info, err = mb.t.s.inbox.ResetConsumer(ctx, cfg.Durable)
		return err
	})
	if err != nil {
		return fmt.Errorf("inbox of %s in team %s: rewind consumer: %w", member, mb.t.name, err)
	}
	r.floor = info.AckFloor.Stream
	r.cons = cons
	r.durable.Store(&cfg.Durable)
	if err := mb.consume(r, member); err != nil {
		r.cons = nil
		return err
	}
	mb.t.notePresence(ctx, member)
	return nil
}

// consume has the server push the reader's consumer into its buffer.
func (mb *mailbox) consume(r *reader, member string) error {
	cc, err := r.cons.Consume(func(m jetstream.Msg) {
		r.bufMu.Lock()
		r.buf = append(r.buf, m)
		r.bufMu.Unlock()
		wake(r.arrived)
		// Mostly the watch itself woke them already; after a rewind
		// only this does.
		r.wakeWatchers()
	}, jetstream.PullMaxMessages(256), jetstream.PullExpiry(5*time.Second), jetstream.PullHeartbeat(time.Second), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		if !errors.Is(err, jetstream.ErrNoHeartbeat) {
			mb.t.s.opts.Logger.Debug("nats store: inbox consumer", "member", member, "err", err)
		}
	}))
	if err != nil {
		return fmt.Errorf("inbox of %s in team %s: consume: %w", member, mb.t.name, err)
	}
	r.cc = cc
	mb.t.s.onClose(cc.Stop)
	return nil
}

func (mb *mailbox) member(ctx context.Context, name string) (string, error) {
	if err := mb.t.s.closedErr(); err != nil {
		return "", err
	}
	r, err := mb.t.rosterOnly(ctx)
	if err != nil {
		return "", err
	}
	return store.ResolveMember(&r, name)
}

// Send validates m and publishes it to its recipient's subject. The id is
// also the publish's Nats-Msg-Id, so a send retried after a lost answer is
// stored once.
func (mb *mailbox) Send(ctx context.Context, m store.Message) (store.Message, error) {
	if err := mb.t.s.closedErr(); err != nil {
		return store.Message{}, err
	}
	r, err := mb.t.rosterOnly(ctx)
	if err != nil {
		return store.Message{}, fmt.Errorf("send: %w", err)
	}
	return mb.send(ctx, &r, m)
}

func (mb *mailbox) send(ctx context.Context, r *store.Roster, m store.Message) (store.Message, error) {
	m, err := store.PrepareMessage(r, m, mb.t.s.opts.NewID, mb.t.s.now)
	if err != nil {
		return store.Message{}, err
	}
	to := m.To
	data, err := json.Marshal(&m)
	if err != nil {
		return store.Message{}, fmt.Errorf("send to %s: %w", to, err)
	}
	if _, err := mb.t.s.publish(ctx, mb.subject(to), data, mb.t.gen+"/"+to+"/"+m.ID); err != nil {
		return store.Message{}, fmt.Errorf("send to %s in team %s: %w", to, mb.t.name, err)
	}
	return m, nil
}

func (mb *mailbox) Broadcast(ctx context.Context, m store.Message) ([]store.Message, error) {
	if err := mb.t.s.closedErr(); err != nil {
		return nil, err
	}
	r, err := mb.t.rosterOnly(ctx)
	if err != nil {
		return nil, fmt.Errorf("broadcast: %w", err)
	}
	return store.BroadcastEach(&r, m, func(c store.Message) (store.Message, error) { return mb.send(ctx, &r, c) })
}

// Receive hands out what the consumer delivers past what this client was
// already handed; it waits on a core subscription to the inbox's subject,
// which every publish reaches, so that nothing polls.
func (mb *mailbox) Receive(ctx context.Context, member string) ([]store.Message, error) {
	// A name once resolved stays resolved for this client: a member is
	// never renamed, and a reader that keeps receiving should not pay a
	// roster read on every wake.
	key := mb.t.gen + "/" + member
	name, ok := "", false
	if v, hit := mb.t.s.resolved.Load(key); hit {
		name, ok = v.(string), true
	}
	if !ok {
		n, err := mb.member(context.WithoutCancel(ctx), member)
		if err != nil {
			return nil, fmt.Errorf("receive: %w", err)
		}
		name = n
		mb.t.s.resolved.Store(key, name)
	} else if err := mb.t.s.closedErr(); err != nil {
		return nil, fmt.Errorf("receive: %w", err)
	}
	r := mb.reader(name)
	if err := r.lock(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	defer r.unlock()
	// A Receive that may wait notes the messages sent meanwhile, through a
	// core subscription to the inbox's subject (subscribed before last is
	// read, so a message stored after that read is noted): a push that
	// goes quiet while it waits (a cluster node killed, the consumer's
	// leader moved) is found by the stall check below, which otherwise
	// knows only what was stored when Receive began. Best effort: without
	// it a quiet push waits for the next Receive's check.
	var sent chan struct{}
	if ctx.Err() == nil {
		sent = make(chan struct{}, 1)
		sub, err := mb.t.s.nc.Subscribe(mb.subject(name), func(*natsgo.Msg) { wake(sent) })
		if err != nil {
			sent = nil
		} else {
			defer sub.Unsubscribe()
		}
	}
	// The consumer pushes in batches: what was in the inbox when Receive
	// was called is handed out in one answer, as the contract has it, so
	// Receive waits for the push to reach the subject's last message.
	last, err := mb.lastSeq(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("receive for %s: %w", name, err)
	}
	var out []store.Message
	// A message stored past what the consumer pushed and still not pushed
	// after pushStall: the consumer is repushed from its ack floor (its
	// pull can go quiet around a hub restart and a rewind). recheck: a
	// message was sent since last was read, which is read again when the
	// timer fires.
	stall := time.NewTimer(time.Duration(pushStall.Load()))
	defer stall.Stop()
	recheck := false
	for {
		if err := mb.open(context.WithoutCancel(ctx), r, name); err != nil {
			return nil, err
		}
		out = append(out, mb.take(r)...)
		if len(out) > 0 && r.high >= last {
			return out, nil
		}
		var stalled <-chan time.Time
		if r.high < last || recheck {
			stalled = stall.C
		}
		if err := ctx.Err(); err != nil {
			if r.high < last {
				mb.checkPushLater(r, name, last)
			}
			if len(out) > 0 {
				return out, nil // handed out to this client: never dropped
			}
			return nil, err
		}
		if f := receiveWaits.Load(); f != nil {
			(*f)()
		}
		select {
		case <-ctx.Done():
			if len(out) > 0 {
				return out, nil // handed out to this client: never dropped
			}
			return nil, ctx.Err()
		case <-mb.t.s.done:
			return nil, store.ErrClosed
		case <-r.arrived:
		case <-sent:
			if !recheck && r.high >= last {
				// Not while a stall is timed already: a send after
				// each other must not put it off.
				stall.Reset(time.Duration(pushStall.Load()))
			}
			recheck = true
		case <-stalled:
			if recheck {
				recheck = false
				if l, err := mb.lastSeq(ctx, name); err == nil {
					last = max(last, l)
				}
			}
			if r.high < last {
				mb.repush(ctx, r, name)
			}
			stall.Reset(time.Duration(pushStall.Load()))
		}
	}
}

// checkPushLater, for a Receive that could not wait, looks again after
// pushStall: a message stored at last and still not pushed restarts the
// push, and the inbox's watchers are woken to receive it.
func (mb *mailbox) checkPushLater(r *reader, member string, last uint64) {
	if !r.stallCheck.CompareAndSwap(false, true) {
		return
	}
	time.AfterFunc(time.Duration(pushStall.Load()), func() {
		defer r.stallCheck.Store(false)
		select {
		case r.mu <- struct{}{}:
		default:
			return // a Receive is in: it watches for the stall itself
		}
		if mb.t.s.closedErr() == nil && r.high < last {
			mb.repush(context.Background(), r, member)
		}
		r.unlock()
		wake(r.arrived)
		r.wakeWatchers()
	})
}

// receiveWaits, when set (tests), is called by Receive each time before it
// waits.
var receiveWaits atomic.Pointer[func()]

// pushStall is how long Receive waits for a message it knows is stored
// before it restarts the push (in nanoseconds; tests shorten it).
var pushStall atomic.Int64

func init() { pushStall.Store(int64(3 * time.Second)) }

// repush restarts r's consumer from its ack floor; the caller holds r.
// What comes again that r already handed out is skipped by id.
func (mb *mailbox) repush(ctx context.Context, r *reader, member string) {
	name := r.durable.Load()
	if name == nil || r.cc == nil {
		return
	}
	r.cc.Stop()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
	defer cancel()
	if _, err := mb.t.s.inbox.ResetConsumer(rctx, *name); err != nil {
		mb.t.s.opts.Logger.Debug("nats store: repush inbox consumer", "member", member, "err", err)
	}
	if err := mb.consume(r, member); err != nil {
		mb.t.s.opts.Logger.Warn("nats store: repush inbox consumer", "member", member, "err", err)
		r.cons = nil // open makes it again
	}
}

// lastSeq is the stream sequence of the last message sent to member's
// inbox (0: none). While the hub restarts the question times out: it is
// asked again, as request does, until ctx or the store ends (a reader
// waiting on its inbox outlives a hub restart).
func (mb *mailbox) lastSeq(ctx context.Context, member string) (uint64, error) {
	var seq uint64
	err := mb.t.s.retryTransient(ctx, func() error {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
		defer cancel()
		m, err := mb.t.s.inbox.GetLastMsgForSubject(rctx, mb.subject(member))
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			seq = 0
			return nil
		case err != nil:
			return err
		}
		seq = m.Sequence
		return nil
	})
	return seq, err
}

// reconnected rewinds the consumer of every inbox this client reads to
// its ack floor: the server may have counted as delivered what was on the
// wire when the connection broke (a hub killed -9), and with explicit
// acks and a day's ack wait it would never push those messages again.
// What comes again that this client already handed out is skipped by id;
// the rest wakes its Receive and its watchers. The copies of boards are
// dropped (boardcache.go): claims go to the server until each is loaded
// again.
func (s *Store) reconnected() {
	s.dropCaches()
	s.readers.Lock()
	var open []*reader
	for _, r := range s.readers.m {
		if r.durable.Load() != nil {
			open = append(open, r)
		}
	}
	s.readers.Unlock()
	for _, r := range open {
		go s.rewind(r)
	}
}

func (s *Store) rewind(r *reader) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	name := *r.durable.Load()
	err := s.try(ctx, func(ctx context.Context) error {
		_, err := s.inbox.ResetConsumer(ctx, name)
		return err
	})
	if err != nil {
		if !errors.Is(err, store.ErrClosed) {
			s.opts.Logger.Warn("nats store: rewind inbox consumer after a reconnect", "consumer", name, "err", err)
		}
		return
	}
	wake(r.arrived)
	r.wakeWatchers()
}

// take hands out what the consumer delivered and this client has not
// handed out yet.
func (mb *mailbox) take(r *reader) []store.Message {
	r.bufMu.Lock()
	got := r.buf
	r.buf = nil
	r.bufMu.Unlock()
	var out []store.Message
	var behind jetstream.Msg // the newest pushed again at or below r.floor
	for _, jm := range got {
		md, err := jm.Metadata()
		if err != nil {
			continue
		}
		seq := md.Sequence.Stream
		r.high = max(r.high, seq)
		if seq <= r.floor {
			behind = jm
			continue
		}
		var m store.Message
		if err := json.Unmarshal(jm.Data(), &m); err != nil || store.ValidateMessage(&m) != nil {
			// A message that cannot be read is consumed with the next
			// ack; it is logged, never handed out.
			mb.t.s.opts.Logger.Warn("nats store: unreadable message", "team", mb.t.name, "subject", jm.Subject(), "seq", seq)
			continue
		}
		if r.seen[m.ID] {
			if _, ok := r.pending[m.ID]; ok {
				// Delivered again after a rewind: the ack goes through
				// the newest delivery.
				r.pending[m.ID] = jm
			}
			continue
		}
		r.seen[m.ID] = true
		r.pending[m.ID] = jm
		r.seqOf[m.ID] = seq
		out = append(out, m)
	}
	if behind != nil {
		mb.ackAgain(behind)
	}
	return out
}

// ackAgain acks jm, which this client acked before, once more. A message
// at or below the reader's floor is pushed again only by a consumer whose
// own floor is behind it: a hub killed -9 loses the acks of its last tenth
// of a second (it writes a consumer's state at most ten times a second),
// and after the restart that message counts as unread for everyone who
// peeks (a lead judging whether the team is done sees mail its member will
// never be woken for), until an ack past it. Best effort, bounded by one
// request's timeout (the caller holds the reader): when it fails, the
// next push of it (a repush, a reconnect) tries again.
func (mb *mailbox) ackAgain(jm jetstream.Msg) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	err := mb.t.s.try(ctx, jm.DoubleAck)
	if err != nil {
		mb.t.s.opts.Logger.Debug("nats store: ack again a message the server lost the ack of", "team", mb.t.name, "subject", jm.Subject(), "err", err)
	}
}

// Ack acks the message with id and, the consumer acking all, every one
// before it, and waits for the server to confirm.
func (mb *mailbox) Ack(ctx context.Context, member, id string) error {
	name, err := mb.member(ctx, member)
	if err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	r := mb.reader(name)
	if err := r.lock(ctx); err != nil {
		return err
	}
	defer r.unlock()
	jm, ok := r.pending[id]
	if !ok {
		if r.seen[id] {
			return nil // acked already, with a later one
		}
		return fmt.Errorf("ack %s for %s: %w", id, name, store.ErrNotReceived)
	}
	// Sent again until the server answers: an ack is dropped unanswered
	// when it reaches a consumer leader that has not yet delivered that
	// far (just elected, or rewound after a reconnect), and acking at or
	// below the floor again is answered as done.
	if err := mb.t.s.try(ctx, jm.DoubleAck); err != nil {
		return fmt.Errorf("ack %s for %s in team %s: %w", id, name, mb.t.name, err)
	}
	seq := r.seqOf[id]
	if seq > r.floor {
		r.floor = seq
	}
	for k, s := range r.seqOf {
		if s <= seq {
			delete(r.pending, k)
			delete(r.seqOf, k)
		}
	}
	return nil
}

// Peek reads the inbox's subject past the consumer's ack floor.
func (mb *mailbox) Peek(ctx context.Context, member string) ([]store.Message, error) {
	name, err := mb.member(ctx, member)
	if err != nil {
		return nil, fmt.Errorf("peek: %w", err)
	}
	var floor uint64
	var info jetstream.Consumer
	err = mb.t.s.try(ctx, func(ctx context.Context) (err error) {
		info, err = mb.t.s.inbox.Consumer(ctx, mb.consumer(name))
		return err
	})
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
	case err != nil:
		return nil, fmt.Errorf("peek %s: %w", name, err)
	default:
		floor = info.CachedInfo().AckFloor.Stream
	}
	msgs, err := mb.t.s.readSubject(ctx, inboxStream, mb.subject(name), floor+1)
	if err != nil {
		return nil, fmt.Errorf("peek %s: %w", name, err)
	}
	out := []store.Message{}
	seen := map[string]bool{}
	for _, rm := range msgs {
		var m store.Message
		if json.Unmarshal(rm.Data, &m) != nil || store.ValidateMessage(&m) != nil || seen[m.ID] {
			continue
		}
		seen[m.ID] = true
		out = append(out, m)
	}
	return out, nil
}

// Watch wakes on every message sent to member, from a core subscription to
// the inbox's subject.
func (mb *mailbox) Watch(ctx context.Context, member string) (<-chan struct{}, error) {
	// The member is checked even when ctx has ended: a bad name is an
	// error, not an empty watch.
	name, err := mb.member(context.WithoutCancel(ctx), member)
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	ch, err := mb.t.s.watchSubject(ctx, inboxStream, mb.subject(name), mb.reader(name).watch)
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	return ch, nil
}

// watchSubject returns a coalescing wake channel fed by an ordered
// consumer of what stream stores on subject from now on, closed when ctx
// ends or the store closes. A consumer, not a core subscription: a message
// reaches it only once stored, so a reader woken finds it.
// also, when not nil, registers the consumer's wake channel elsewhere as
// well until the watch ends.
func (s *Store) watchSubject(ctx context.Context, stream, subject string, also func(chan struct{}) func()) (<-chan struct{}, error) {
	oc, err := s.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverNewPolicy, HeadersOnly: true,
	})
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", subject, err)
	}
	// The consumer's callback may still run after Stop: it signals in,
	// which is never closed, and only the goroutine below touches out.
	in := make(chan struct{}, 1)
	cc, err := oc.Consume(func(jetstream.Msg) { wake(in) })
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", subject, err)
	}
	out := make(chan struct{}, 1)
	unregister := func() {}
	if also != nil {
		unregister = also(in)
	}
	go func() {
		defer close(out)
		defer cc.Stop()
		defer unregister()
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.done:
				return
			case <-in:
				wake(out)
			}
		}
	}()
	return out, nil
}

// flush waits until the server has seen everything sent so far (a new
// subscription included).
func (s *Store) flush(ctx context.Context) error {
	fctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return s.nc.FlushWithContext(fctx)
}
