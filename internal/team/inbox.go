package team

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// Where messages reach a model (Config.OnDelivered, the "deliver" event).
const (
	AtIdle         = "idle"          // they woke the agent
	AtToolBoundary = "tool_boundary" // they arrived during its turn
)

// inbox is one agent's side of its mailbox, the lead's and a teammate's
// alike: receive without blocking, hand to the model, record in the
// transcript, and only then ack, so a crash re-delivers (de-duplicated by
// id) and never loses. Received messages pass through the store's seal
// (a sealed Team refuses forgeries before they get here).
type inbox struct {
	name        string
	em          emitter
	onDelivered func(agent string, msgs []store.Message, at string)

	mu        sync.Mutex
	queue     []store.Message // received, not yet given to the model
	seen      map[string]bool // ids already in the conversation (restored): never delivered twice
	ackTeam   store.Team      // the team of the messages given to the model,
	toAck     string          // acked up to this id once the conversation has recorded them
	delivered []string        // the ids given to the model, recorded with the next user message
	pre       []llm.Message   // the conversation recorded before there was a team (the lead's)

	// Lanes, when set (a teammate's inbox), take the writes that only have
	// to be durable before the agent acts (see record), each lane in order:
	// obs the journal's delivery and status lines and the roster's status,
	// lines the transcript, acks the inbox cursor (an ack is queued by the
	// transcript line it follows). The three go on at once.
	lanes *lanes
}

// lanes are the three ordered writers of an inbox that writes behind.
type lanes struct{ obs, lines, acks *behind }

func newInbox(name string, em emitter, onDelivered func(string, []store.Message, string)) *inbox {
	return &inbox{name: name, em: em, onDelivered: onDelivered}
}

// writeBehind gives the inbox its lanes: it returns before the writes of
// what the model reads are durable.
func (in *inbox) writeBehind() {
	in.lanes = &lanes{obs: newBehind(), lines: newBehind(), acks: newBehind()}
}

// observe runs f, a journal or roster line that observes the agent, after
// the ones queued before it: off the caller's path when the inbox writes
// behind, at once otherwise.
func (in *inbox) observe(f func()) {
	if in.lanes == nil {
		f()
		return
	}
	in.lanes.obs.do(f)
}

// ackAfter acks the inbox up to id once every transcript line and every
// observation queued before is durable. The observations include the
// status "working" of the wake that took the messages: until the ack, a
// lead judging whether the team is done sees the messages waiting; after
// it, the member working. Never idle with nothing to read while it works
// (the lead would end the run under it).
func (in *inbox) ackAfter(t store.Team, id string) {
	ack := func() { ackRetrying(t, in.name, id, in.em.log, ackRetryFirst, ackRetryFor) }
	if in.lanes == nil {
		ack()
		return
	}
	acks, observed := in.lanes.acks, in.lanes.obs.mark()
	in.lanes.lines.do(func() {
		acks.do(func() {
			observed()
			ack()
		})
	})
}

// ackRetrying acks member's inbox up to id, and tries again, for a while,
// an ack that failed for a reason that may pass (a store that is down or
// restarting): an ack lost for good leaves the messages waiting for
// everyone who looks (the lead judging whether the team is done sees mail
// the member will never be woken for, since it has it), until a later ack
// covers them.
func ackRetrying(t store.Team, member, id string, log *slog.Logger, first, until time.Duration) {
	delay, waited := first, time.Duration(0)
	for {
		err := t.Mailbox().Ack(context.Background(), member, id)
		if err == nil {
			return
		}
		if errors.Is(err, store.ErrNotReceived) || errors.Is(err, store.ErrTeamNotFound) || errors.Is(err, store.ErrUnknownMember) ||
			errors.Is(err, store.ErrClosed) || waited >= until {
			log.Warn("ack", "inbox", member, "err", err)
			return
		}
		log.Debug("ack failed; trying again", "inbox", member, "in", delay, "err", err)
		time.Sleep(delay)
		waited += delay
		delay = min(2*delay, 2*time.Second)
	}
}

// How soon a failed ack is tried again, and for how long.
const (
	ackRetryFirst = 50 * time.Millisecond
	ackRetryFor   = 10 * time.Second
)

// settleLines returns once every observation and transcript line queued so
// far is durable (acks may still be under way).
func (in *inbox) settleLines() {
	if in.lanes != nil {
		in.lanes.obs.wait()
		in.lanes.lines.wait()
	}
}

// settle returns once every write queued so far is done.
func (in *inbox) settle() {
	if in.lanes != nil {
		in.settleLines()
		in.lanes.acks.wait()
	}
}

// restore sets the ids the restored conversation already has.
func (in *inbox) restore(seen map[string]bool) {
	in.mu.Lock()
	in.seen = seen
	in.mu.Unlock()
}

// fetch moves what waits in the mailbox into the queue without blocking.
// keep sees each new message first (the protocols' bookkeeping); a message
// it returns false for is consumed without reaching the model.
func (in *inbox) fetch(ctx context.Context, t store.Team, keep func(store.Message) bool) error {
	now, cancel := context.WithCancel(ctx)
	cancel()
	msgs, err := t.Mailbox().Receive(now, in.name)
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if len(msgs) == 0 {
		return nil
	}
	kept := 0
	for _, m := range msgs {
		in.mu.Lock()
		dup := in.seen[m.ID]
		in.mu.Unlock()
		if dup || (keep != nil && !keep(m)) {
			continue // already in the restored conversation, or answered elsewhere
		}
		in.mu.Lock()
		in.queue = append(in.queue, m)
		in.mu.Unlock()
		kept++
	}
	if kept > 0 {
		return nil
	}
	// Nothing for the model: consumed now, or with the delivery still
	// waiting to be recorded (acking past it would lose it in a crash).
	last := msgs[len(msgs)-1].ID
	in.mu.Lock()
	waiting := in.toAck != "" || len(in.queue) > 0
	if in.toAck != "" {
		in.toAck, in.ackTeam = last, t
	}
	in.mu.Unlock()
	if !waiting {
		// Behind the transcript lines still being written: acking before
		// them would lose their messages in a crash.
		in.ackAfter(t, last)
	}
	return nil
}

// queued reports whether messages wait for the model.
func (in *inbox) queued() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.queue) > 0
}

// take empties the queue for the model; the messages are acked once the
// conversation has recorded them.
func (in *inbox) take(t store.Team) []store.Message {
	in.mu.Lock()
	defer in.mu.Unlock()
	q := in.queue
	in.queue = nil
	if len(q) > 0 {
		in.ackTeam, in.toAck = t, q[len(q)-1].ID
		in.delivered = append(in.delivered, ids(q)...)
	}
	return q
}

// told journals that msgs reached the model (at AtIdle or
// AtToolBoundary) and passes them to Config.OnDelivered.
func (in *inbox) told(ctx context.Context, t store.Team, msgs []store.Message, at string) {
	if len(msgs) == 0 {
		return
	}
	// An observation: it need not be durable before the model reads them.
	in.observe(func() {
		in.em.emit(ctx, t, teamevent.Deliver{Member: in.name, IDs: ids(msgs), At: at})
		if in.onDelivered != nil {
			in.onDelivered(in.name, msgs, at)
		}
	})
}

// deliver takes the queue and tells of it.
func (in *inbox) deliver(ctx context.Context, t store.Team, at string) []store.Message {
	msgs := in.take(t)
	in.told(ctx, t, msgs, at)
	return msgs
}

// record writes a message of the conversation to the transcript, then acks
// the inbox messages it carries. Without a team (the lead before
// TeamCreate) it is kept for flushPre.
//
// An inbox that writes behind returns from a user message (what the model
// is about to read) before it is written: the model request goes out while
// the line is fsynced, and the ack follows the line in order, so a crash
// before it hands the messages out again and the transcript's ids fold the
// repeat. An assistant message (what the model decided) returns only once
// it and every line before it are durable: no tool acts on a conversation
// a crash could lose. Its acks may still be under way: losing one only
// hands its messages out again.
//
// A user message that hands out no inbox message (a tool's results, the
// prompt of a claimed task) is written without its own fsync: the next
// assistant message's fsync makes it durable with it. Until then a crash
// of the machine can lose it, which leaves the transcript a crash of the
// process could leave too (a call without its result is answered as
// interrupted on resume, a prompt is given again by the board), and
// nothing is acked or acted on meanwhile.
//
// So is a teammate's reply that ends its turn (no tool call): no tool acts
// on it. It is written before record returns, so a killed process keeps
// it. What the member does next decides when it is fsynced: a task it
// claims at once goes ahead, and the fsync of the first call of that
// task's turn covers the reply and the task's prompt together (one fsync
// per task fewer); a status it writes or a message it sends waits for it
// first (durable). A crash of the machine in between loses the reply
// alone, as a crash just before the reply came would have, and the board
// gives the claimed task again.
func (in *inbox) record(t store.Team, m llm.Message) {
	if t == nil {
		in.mu.Lock()
		in.pre = append(in.pre, m)
		in.mu.Unlock()
		return
	}
	var delivered []string
	var at store.Team
	id := ""
	if m.Role == llm.RoleUser {
		in.mu.Lock()
		at, id, delivered = in.ackTeam, in.toAck, in.delivered
		in.ackTeam, in.toAck, in.delivered = nil, "", nil
		in.mu.Unlock()
	}
	endTurn := in.lanes != nil && m.Role != llm.RoleUser && len(m.ToolUses()) == 0
	deferred := m.Role == llm.RoleUser && len(delivered) == 0 || endTurn
	if in.lanes == nil {
		appendTranscript(t, in.name, m, delivered, deferred, in.em.log)
	} else {
		in.lanes.lines.do(func() { appendTranscript(t, in.name, m, delivered, deferred, in.em.log) })
	}
	if at != nil && id != "" {
		in.ackAfter(at, id)
	}
	if m.Role != llm.RoleUser {
		in.settleLines() // for an end of turn, written: its fsync comes later
	}
}

// durable is settle, and the transcript's lines written without an fsync
// made durable too (see record).
func (in *inbox) durable(t store.Team) {
	in.settle()
	if t == nil {
		return
	}
	if err := store.SyncTranscript(context.Background(), t.Transcripts(), in.name); err != nil && in.em.log != nil {
		in.em.log.Warn("transcript", "member", in.name, "err", err)
	}
}

// flushPre starts t's transcript for this agent with the conversation it
// had before t existed.
func (in *inbox) flushPre(t store.Team) {
	in.mu.Lock()
	pre := in.pre
	in.pre = nil
	in.mu.Unlock()
	markSpawn(t, in.name)
	for _, m := range pre {
		appendTranscript(t, in.name, m, nil, false, in.em.log)
	}
}

// drop consumes what the model will never read (its agent shut down),
// noting the ids in the transcript first.
func (in *inbox) drop(ctx context.Context, t store.Team) {
	in.settle()
	in.mu.Lock()
	q := in.queue
	in.queue = nil
	in.mu.Unlock()
	if len(q) == 0 {
		return
	}
	line, _ := json.Marshal(map[string]any{"ts": time.Now().UTC(), "type": "unread_at_shutdown", "ids": ids(q)})
	_ = t.Transcripts().Append(context.WithoutCancel(ctx), in.name, line)
	if err := t.Mailbox().Ack(context.WithoutCancel(ctx), in.name, q[len(q)-1].ID); err != nil {
		in.em.log.Warn("ack", "inbox", in.name, "err", err)
	}
}

func ids(msgs []store.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

// appendTranscript writes msg to name's transcript; deferred, without
// waiting for its fsync (see record).
func appendTranscript(t store.Team, name string, msg llm.Message, delivered []string, deferred bool, log *slog.Logger) {
	line, err := json.Marshal(transcriptLine{TS: time.Now().UTC(), Message: msg, Delivered: delivered})
	if err == nil {
		if deferred {
			err = store.AppendTranscriptDeferred(context.Background(), t.Transcripts(), name, line)
		} else {
			err = t.Transcripts().Append(context.Background(), name, line)
		}
	}
	if err != nil && log != nil {
		log.Warn("transcript", "member", name, "err", err)
	}
}

// behind runs writes one after another on a goroutine of its own, in the
// order they were queued; the goroutine ends when the queue is empty, so
// an idle agent keeps none.
type behind struct {
	mu      sync.Mutex
	cond    *sync.Cond
	queue   []func()
	running bool
	queued  uint64 // writes queued so far
	done    uint64 // writes done so far
}

func newBehind() *behind {
	b := &behind{}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// do queues f.
func (b *behind) do(f func()) {
	b.mu.Lock()
	b.queue = append(b.queue, f)
	b.queued++
	if !b.running {
		b.running = true
		go b.run()
	}
	b.mu.Unlock()
}

func (b *behind) run() {
	b.mu.Lock()
	for len(b.queue) > 0 {
		f := b.queue[0]
		b.queue[0] = nil
		b.queue = b.queue[1:]
		b.mu.Unlock()
		f()
		b.mu.Lock()
		b.done++
		b.cond.Broadcast()
	}
	b.running = false
	b.queue = nil
	b.mu.Unlock()
}

// wait returns once every write queued before it is done.
func (b *behind) wait() { b.mark()() }

// mark returns a wait for the writes queued so far, not for those queued
// after.
func (b *behind) mark() func() {
	b.mu.Lock()
	want := b.queued
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		for b.done < want {
			b.cond.Wait()
		}
		b.mu.Unlock()
	}
}
