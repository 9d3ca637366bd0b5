// Package seal authenticates a team's messages with a MAC made from the
// team's secret key (package teamkey), so that a line written into an inbox
// file by anything but troupe's own processes (an agent's write_file or
// bash) cannot pass for a protocol message: a forged "permission granted,
// from team-lead" is refused instead of running the call it claims to
// allow.
//
// Team wraps any store.Team: its mailbox signs every message it sends and,
// on receipt, refuses protocol messages (Protocol) that carry no MAC or a
// wrong one, and any message whose MAC is wrong or was made for another
// inbox. Refused messages are never handed to the reader: they are consumed
// with the reader's next acknowledgement and reported to Options.OnForgery.
// Plain messages without a MAC (a human's `troupe send` from another
// process, a line typed by hand) are handed out as they are: a forged plain
// message is only text, and the reader sees who it claims to be from.
//
// The package depends on store only; it never imports the team runtime or
// any store implementation.
package seal

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
)

// Errors of verification; Forgery.Err wraps one of them.
var (
	// ErrNoMAC: a protocol message carries no MAC.
	ErrNoMAC = errors.New("protocol message without a MAC")
	// ErrBadMAC: the MAC does not match the message under the team's key
	// (a field was changed, or another key made it).
	ErrBadMAC = errors.New("MAC does not match")
	// ErrWrongInbox: a signed message was found in an inbox it was not sent
	// to (copied from another).
	ErrWrongInbox = errors.New("signed for another inbox")
	// ErrReplay: a signed protocol message this reader was handed before
	// came again (a copy of the line appended anew).
	ErrReplay = errors.New("replayed: already delivered")
)

// Protocol reports whether messages of type typ change what their reader's
// runtime does, and so must be signed: permission, plan approval and
// shutdown requests and responses, and task assignments.
func Protocol(typ string) bool {
	switch typ {
	case store.TypePermissionRequest, store.TypePermissionResponse,
		store.TypePlanApprovalRequest, store.TypePlanApprovalResponse,
		store.TypeShutdownRequest, store.TypeShutdownResponse,
		store.TypeTaskAssignment:
		return true
	}
	return false
}

// version opens every MAC's input, so that a later encoding cannot be
// confused with this one.
const version = "troupe-message-v1"

// sum computes the MAC of m in team: HMAC-SHA256 over every field but MAC
// itself, each length-prefixed, so that no two different messages encode
// alike. The timestamp enters as seconds and nanoseconds (its zone is not
// part of the message); the tool input as encoding/json writes it, which
// is what a store's JSON round trip gives back.
func sum(key []byte, team string, m *store.Message) []byte {
	h := hmac.New(sha256.New, key)
	var n [8]byte
	put := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	approve := ""
	if m.Approve != nil {
		approve = strconv.FormatBool(*m.Approve)
	}
	put(version)
	put(team)
	put(m.ID)
	put(m.Type)
	put(m.From)
	put(m.To)
	put(m.Content)
	put(m.Summary)
	put(strconv.FormatInt(m.Timestamp.Unix(), 10) + "." + strconv.Itoa(m.Timestamp.Nanosecond()))
	put(m.RequestID)
	put(approve)
	put(m.Feedback)
	put(m.TaskID)
	put(m.Reason)
	put(m.Plan)
	put(m.ToolName)
	put(toolInput(m.ToolInput))
	return h.Sum(nil)
}

func toolInput(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return string(raw) // not JSON: no store could write it anyway
	}
	return string(b)
}

// Sign sets m.MAC for team under key. It first puts m in the form a JSON
// round trip gives back (invalid UTF-8 becomes U+FFFD), which is the form
// a reader finds in the store: signed as it was, such a message would be
// refused.
func Sign(key []byte, team string, m *store.Message) {
	m.MAC = ""
	if b, err := json.Marshal(m); err == nil {
		var n store.Message
		if json.Unmarshal(b, &n) == nil {
			*m = n
		}
	}
	m.MAC = hex.EncodeToString(sum(key, team, m))
}

// Verify checks m.MAC for team under key: ErrNoMAC when it has none,
// ErrBadMAC when it does not match.
func Verify(key []byte, team string, m *store.Message) error {
	if m.MAC == "" {
		return ErrNoMAC
	}
	got, err := hex.DecodeString(m.MAC)
	if err != nil || !hmac.Equal(got, sum(key, team, m)) {
		return ErrBadMAC
	}
	return nil
}

// check decides whether m, found in inbox, may be handed to its reader.
func check(key []byte, team, inbox string, m *store.Message) error {
	if m.MAC == "" {
		if Protocol(m.Type) {
			return ErrNoMAC
		}
		return nil
	}
	if err := Verify(key, team, m); err != nil {
		return err
	}
	if m.To != inbox {
		return fmt.Errorf("%w: sent to %s", ErrWrongInbox, m.To)
	}
	return nil
}

// Forgery is a message Receive refused.
type Forgery struct {
	// Inbox is the member whose inbox it was found in.
	Inbox string
	// Message is the message as found; its From is only a claim.
	Message store.Message
	// Err says why it was refused (wraps ErrNoMAC, ErrBadMAC,
	// ErrWrongInbox or ErrReplay).
	Err error
}

// Options configure a sealed team.
type Options struct {
	// OnForgery, when set, is told of the messages each Receive refused,
	// after the underlying Receive has returned (it may send messages).
	OnForgery func(ctx context.Context, found []Forgery)
	// Now and NewID fill in a message's timestamp and id before it is
	// signed (defaults: time.Now, store.NewID).
	Now   func() time.Time
	NewID func(time.Time) string
}

// Team returns t with a mailbox that signs and verifies under key. Other
// parts of t (board, journal, transcripts) are passed through: they are not
// mail, and only the team's own runtime writes them.
func Team(t store.Team, key []byte, opts Options) store.Team {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.NewID == nil {
		opts.NewID = store.NewID
	}
	return &team{Team: t, mb: &mailbox{inner: t.Mailbox(), team: t, key: append([]byte(nil), key...), opts: opts, readers: map[string]*reader{}}}
}

// Unwrap returns the team a sealed team wraps (t itself otherwise).
func Unwrap(t store.Team) store.Team {
	if u, ok := t.(interface{ Unwrap() store.Team }); ok {
		return u.Unwrap()
	}
	return t
}

type team struct {
	store.Team
	mb *mailbox
}

func (t *team) Mailbox() store.Mailbox { return t.mb }
func (t *team) Unwrap() store.Team     { return t.Team }

type mailbox struct {
	inner store.Mailbox
	team  store.Team
	key   []byte
	opts  Options

	mu      sync.Mutex
	readers map[string]*reader
}

// reader is what one inbox's reader was handed and has not acked, in
// order, so that refused messages are consumed with the reader's next ack
// and never block its inbox.
type reader struct {
	mu     sync.Mutex
	handed []handed
	// protocol holds the ids of the protocol messages handed out, so that
	// a signed one captured from the inbox and appended again later binds
	// nothing twice. (After a restart the reader's transcript does this.)
	protocol map[string]bool
}

type handed struct {
	id     string
	forged bool
}

func (mb *mailbox) reader(name string) *reader {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	r, ok := mb.readers[name]
	if !ok {
		r = &reader{protocol: map[string]bool{}}
		mb.readers[name] = r
	}
	return r
}

// seal normalises m's names as the store will, fills in what the store
// would fill in, and signs the result. Whether the names are on the roster
// is the store's to check, with its own errors.
func (mb *mailbox) seal(m *store.Message) error {
	to, err := store.NormalizeName(m.To)
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	from, err := store.NormalizeName(m.From)
	if err != nil {
		return fmt.Errorf("send to %s: %w", to, err)
	}
	m.To, m.From = to, from
	if m.Type == "" {
		m.Type = store.TypeMessage
	}
	now := mb.opts.Now()
	if m.ID == "" {
		m.ID = mb.opts.NewID(now)
	}
	if m.Timestamp.IsZero() {
		m.Timestamp = now.UTC()
	}
	Sign(mb.key, mb.team.Name(), m)
	return nil
}

func (mb *mailbox) Send(ctx context.Context, m store.Message) (store.Message, error) {
	if err := mb.seal(&m); err != nil {
		return store.Message{}, err
	}
	return mb.inner.Send(ctx, m)
}

// Broadcast signs one copy per recipient: each is its own message, with
// its own id and recipient.
func (mb *mailbox) Broadcast(ctx context.Context, m store.Message) ([]store.Message, error) {
	r, err := mb.team.ReadRoster(ctx)
	if err != nil {
		return nil, fmt.Errorf("broadcast: %w", err)
	}
	from, err := store.ResolveSender(&r, m.From)
	if err != nil {
		return nil, fmt.Errorf("broadcast: %w", err)
	}
	if m.Type == "" {
		m.Type = store.TypeBroadcast
	}
	m.From = from
	var out []store.Message
	for _, to := range r.Recipients() {
		if to == from {
			continue
		}
		c := m
		c.To, c.ID, c.MAC = to, "", ""
		if err := mb.seal(&c); err != nil {
			return out, err
		}
		sent, err := mb.inner.Send(ctx, c)
		if err != nil {
			return out, err
		}
		out = append(out, sent)
	}
	return out, nil
}

// Receive hands out the messages that pass check. Refused ones are
// recorded, so that the reader's acks consume them, and reported; when
// nothing else came it receives again, as if they had never arrived.
func (mb *mailbox) Receive(ctx context.Context, member string) ([]store.Message, error) {
	inbox, err := store.NormalizeName(member)
	if err != nil {
		return nil, fmt.Errorf("receive: %w", err)
	}
	rd := mb.reader(inbox)
	for {
		msgs, err := mb.inner.Receive(ctx, member)
		if len(msgs) == 0 {
			return msgs, err
		}
		good := make([]store.Message, 0, len(msgs))
		var forged []Forgery
		rd.mu.Lock()
		for _, m := range msgs {
			cerr := check(mb.key, mb.team.Name(), inbox, &m)
			if cerr == nil && Protocol(m.Type) {
				if rd.protocol[m.ID] {
					cerr = ErrReplay
				}
				rd.protocol[m.ID] = true
			}
			if cerr != nil {
				forged = append(forged, Forgery{Inbox: inbox, Message: m, Err: cerr})
				rd.handed = append(rd.handed, handed{id: m.ID, forged: true})
				continue
			}
			good = append(good, m)
			rd.handed = append(rd.handed, handed{id: m.ID})
		}
		// Refused messages at the head of what is unacked are consumed at
		// once: no good message before them waits for its ack. Should that
		// fail, they are refused (and reported) again next time.
		_ = mb.consumeLocked(ctx, inbox, rd, -1)
		rd.mu.Unlock()
		if len(forged) > 0 && mb.opts.OnForgery != nil {
			mb.opts.OnForgery(ctx, forged)
		}
		if len(good) > 0 || err != nil {
			return good, err
		}
		// Only refused messages: look again. With a done ctx that takes
		// what arrived meanwhile (a report of these to this very inbox)
		// or ends; otherwise it waits, as the caller asked.
	}
}

// consumeLocked acks, in the store, everything handed out up to index i
// and the refused messages right after it (i = -1: only refused messages
// at the head), and forgets them.
func (mb *mailbox) consumeLocked(ctx context.Context, inbox string, rd *reader, i int) error {
	j := i
	for j+1 < len(rd.handed) && rd.handed[j+1].forged {
		j++
	}
	if j < 0 {
		return nil
	}
	if err := mb.inner.Ack(context.WithoutCancel(ctx), inbox, rd.handed[j].id); err != nil {
		return err
	}
	rd.handed = rd.handed[j+1:]
	return nil
}

func (mb *mailbox) Ack(ctx context.Context, member, id string) error {
	inbox, err := store.NormalizeName(member)
	if err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	rd := mb.reader(inbox)
	rd.mu.Lock()
	defer rd.mu.Unlock()
	for i, h := range rd.handed {
		if h.id == id && !h.forged {
			return mb.consumeLocked(ctx, inbox, rd, i)
		}
	}
	// Not handed out through this wrapper: the store decides.
	return mb.inner.Ack(ctx, member, id)
}

// Peek leaves out what Receive would refuse.
func (mb *mailbox) Peek(ctx context.Context, member string) ([]store.Message, error) {
	inbox, err := store.NormalizeName(member)
	if err != nil {
		return nil, fmt.Errorf("peek: %w", err)
	}
	msgs, err := mb.inner.Peek(ctx, member)
	if err != nil {
		return nil, err
	}
	out := msgs[:0]
	for _, m := range msgs {
		if check(mb.key, mb.team.Name(), inbox, &m) == nil {
			out = append(out, m)
		}
	}
	return out, nil
}

func (mb *mailbox) Watch(ctx context.Context, member string) (<-chan struct{}, error) {
	return mb.inner.Watch(ctx, member)
}
