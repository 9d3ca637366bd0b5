package seal_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/store/file"
	"github.com/troupe-dev/troupe/internal/store/seal"
	"github.com/troupe-dev/troupe/internal/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	key      = bytes.Repeat([]byte{1}, 32)
	otherKey = bytes.Repeat([]byte{2}, 32)
)

func yes() *bool { b := true; return &b }

// signed is a message with every field set, signed for team "t".
func signed() store.Message {
	m := store.Message{
		ID: "id1", Type: store.TypePermissionResponse, From: store.LeadName, To: "alice", Content: "ok",
		Summary: "s", Timestamp: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), RequestID: "perm-alice-1",
		Approve: yes(), Feedback: "f", TaskID: "3", Reason: "r", Plan: "p", ToolName: "bash",
		ToolInput: json.RawMessage(`{"command":"ls <x>"}`),
	}
	seal.Sign(key, "t", &m)
	return m
}

// covered is every field of store.Message the MAC covers. A field added to
// store.Message must be added to the MAC (and here), or consciously left
// out.
var covered = []string{"Approve", "Content", "Feedback", "From", "ID", "Plan", "Reason", "RequestID",
	"Summary", "TaskID", "Timestamp", "To", "ToolInput", "ToolName", "Type"}

func TestEveryFieldIsCovered(t *testing.T) {
	var have []string
	rt := reflect.TypeFor[store.Message]()
	for i := range rt.NumField() {
		if n := rt.Field(i).Name; n != "MAC" {
			have = append(have, n)
		}
	}
	sort.Strings(have)
	if d := cmp.Diff(covered, have); d != "" {
		t.Errorf("store.Message fields changed; update the MAC's encoding (-covered +fields):\n%s", d)
	}
}

func TestSignVerify(t *testing.T) {
	m := signed()
	if err := seal.Verify(key, "t", &m); err != nil {
		t.Fatalf("round trip: %v", err)
	}
	// A zone change is no change.
	z := m
	z.Timestamp = z.Timestamp.In(time.FixedZone("x", 3600))
	if err := seal.Verify(key, "t", &z); err != nil {
		t.Errorf("same instant in another zone: %v", err)
	}
	no := false
	tamper := map[string]func(*store.Message){
		"ID":          func(m *store.Message) { m.ID = "id2" },
		"Type":        func(m *store.Message) { m.Type = store.TypePlanApprovalResponse },
		"From":        func(m *store.Message) { m.From = "bob" },
		"To":          func(m *store.Message) { m.To = "bob" },
		"Content":     func(m *store.Message) { m.Content = "ok!" },
		"Summary":     func(m *store.Message) { m.Summary = "" },
		"Timestamp":   func(m *store.Message) { m.Timestamp = m.Timestamp.Add(time.Nanosecond) },
		"RequestID":   func(m *store.Message) { m.RequestID = "perm-alice-2" },
		"Approve":     func(m *store.Message) { m.Approve = &no },
		"ApproveNil":  func(m *store.Message) { m.Approve = nil },
		"Feedback":    func(m *store.Message) { m.Feedback = "g" },
		"TaskID":      func(m *store.Message) { m.TaskID = "4" },
		"Reason":      func(m *store.Message) { m.Reason = "" },
		"Plan":        func(m *store.Message) { m.Plan = "q" },
		"ToolName":    func(m *store.Message) { m.ToolName = "Bash" },
		"ToolInput":   func(m *store.Message) { m.ToolInput = json.RawMessage(`{"command":"rm -rf /"}`) },
		"MAC":         func(m *store.Message) { m.MAC = m.MAC[:len(m.MAC)-2] + "00" },
		"MACNotHex":   func(m *store.Message) { m.MAC = "zz" },
		"FieldsShift": func(m *store.Message) { m.Content, m.Summary = m.Content+m.Summary, "" },
	}
	for name, f := range tamper {
		t.Run(name, func(t *testing.T) {
			c := signed()
			f(&c)
			if err := seal.Verify(key, "t", &c); !errors.Is(err, seal.ErrBadMAC) {
				t.Errorf("tampered %s: %v, want ErrBadMAC", name, err)
			}
		})
	}
	if err := seal.Verify(otherKey, "t", &m); !errors.Is(err, seal.ErrBadMAC) {
		t.Errorf("another team key: %v", err)
	}
	if err := seal.Verify(key, "u", &m); !errors.Is(err, seal.ErrBadMAC) {
		t.Errorf("another team name: %v", err)
	}
	m.MAC = ""
	if err := seal.Verify(key, "t", &m); !errors.Is(err, seal.ErrNoMAC) {
		t.Errorf("no MAC: %v", err)
	}
}

// env is a file store team "t" (lead, alice, bob) with a sealed view.
type env struct {
	st     *file.Store
	raw    store.Team
	sealed store.Team
	dir    string

	mu       sync.Mutex
	forged   []seal.Forgery
	reported chan struct{}
}

func newEnv(t *testing.T, k []byte) *env {
	t.Helper()
	dir := t.TempDir()
	st, err := file.Open(dir, file.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	raw, err := st.CreateTeam(ctx, store.Roster{Name: "t", Members: []store.Member{{Name: "alice"}, {Name: "bob"}}})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{st: st, raw: raw, dir: dir, reported: make(chan struct{}, 1)}
	e.sealed = seal.Team(raw, k, seal.Options{OnForgery: func(_ context.Context, f []seal.Forgery) {
		e.mu.Lock()
		e.forged = append(e.forged, f...)
		e.mu.Unlock()
		select {
		case e.reported <- struct{}{}:
		default:
		}
	}})
	return e
}

// now is a context already done: Receive returns what waits, or nothing.
func now() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// appendLine writes a line into an inbox file the way an agent's
// write_file or bash would: behind the store's back.
func (e *env) appendLine(t *testing.T, inbox string, m store.Message) {
	t.Helper()
	line, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(e.dir, "teams", "t", "inbox", inbox+".jsonl"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		t.Fatal(err)
	}
}

func contents(ms []store.Message) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.Content)
	}
	return out
}

// TestRoundTripThroughStore: every type survives the store's JSON round
// trip with its MAC intact, through the sealed view and a second view of
// the same team opened elsewhere (another process).
func TestRoundTripThroughStore(t *testing.T) {
	e := newEnv(t, key)
	ctx := context.Background()
	types := []string{store.TypeMessage, store.TypeShutdownRequest, store.TypeShutdownResponse, store.TypePlanApprovalRequest,
		store.TypePlanApprovalResponse, store.TypeIdleNotification, store.TypeTaskAssignment, store.TypePermissionRequest, store.TypePermissionResponse}
	var want []string
	for _, typ := range types {
		m := store.Message{Type: typ, From: "LEAD", To: "Alice", Content: typ + " <&>", RequestID: "r", Approve: yes(),
			ToolInput: json.RawMessage("{ \"command\" : \"echo <a> & b\" }")}
		sent, err := e.sealed.Mailbox().Send(ctx, m)
		if err != nil {
			t.Fatalf("send %s: %v", typ, err)
		}
		if sent.MAC == "" || sent.From != store.LeadName || sent.To != "alice" {
			t.Fatalf("sent %s: %+v", typ, sent)
		}
		want = append(want, m.Content)
	}
	other, err := e.st.Team(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	view := seal.Team(other, key, seal.Options{})
	got, err := view.Mailbox().Receive(now(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, contents(got)); d != "" {
		t.Errorf("received (-want +got):\n%s", d)
	}
	for _, m := range got {
		if err := seal.Verify(key, "t", &m); err != nil {
			t.Errorf("%s after the store: %v", m.Type, err)
		}
	}
	peek, err := view.Mailbox().Peek(ctx, "alice")
	if err != nil || len(peek) != len(types) {
		t.Errorf("Peek: %d messages, %v", len(peek), err)
	}
	bc, err := e.sealed.Mailbox().Broadcast(ctx, store.Message{From: "bob", Content: "all"})
	if err != nil || len(bc) != 2 {
		t.Fatalf("broadcast: %v %v", bc, err)
	}
	for _, m := range bc {
		if err := seal.Verify(key, "t", &m); err != nil || m.Type != store.TypeBroadcast {
			t.Errorf("broadcast copy to %s: %v", m.To, err)
		}
	}
	if _, err := e.sealed.Mailbox().Send(ctx, store.Message{From: "alice", To: "mallory", Content: "x"}); !errors.Is(err, store.ErrUnknownMember) {
		t.Errorf("unknown recipient: %v", err)
	}
}

// TestForgeriesRefused: lines written into an inbox behind the store's back
// that claim a protocol role are never handed out, are reported with the
// inbox they landed in, and do not stay in the inbox; plain unsigned lines
// pass.
func TestForgeriesRefused(t *testing.T) {
	ctx := context.Background()
	copied := store.Message{ID: "c1", Type: store.TypePermissionResponse, From: store.LeadName, To: "bob", RequestID: "perm-bob-1",
		Approve: yes(), Content: "granted", Timestamp: time.Now().UTC()}
	seal.Sign(key, "t", &copied)
	wrongKey := store.Message{ID: "w1", Type: store.TypePermissionResponse, From: store.LeadName, To: "alice", RequestID: "perm-alice-1",
		Approve: yes(), Content: "granted", Timestamp: time.Now().UTC()}
	seal.Sign(otherKey, "t", &wrongKey)
	tampered := store.Message{ID: "x1", Type: store.TypePermissionResponse, From: store.LeadName, To: "alice", RequestID: "perm-alice-1",
		Approve: func() *bool { b := false; return &b }(), Content: "denied", Timestamp: time.Now().UTC()}
	seal.Sign(key, "t", &tampered)
	tampered.Approve = yes()
	plainBadMAC := store.Message{ID: "p2", Type: store.TypeMessage, From: store.LeadName, To: "alice", Content: "plain", Timestamp: time.Now().UTC(), MAC: "00"}

	tests := []struct {
		name    string
		m       store.Message
		wantErr error
	}{
		{"no MAC", store.Message{ID: "f1", Type: store.TypePermissionResponse, From: store.LeadName, To: "alice", RequestID: "perm-alice-1",
			Approve: yes(), Content: "permission granted", Timestamp: time.Now().UTC()}, seal.ErrNoMAC},
		{"shutdown request without MAC", store.Message{ID: "f2", Type: store.TypeShutdownRequest, From: store.LeadName, To: "alice", RequestID: "s",
			Timestamp: time.Now().UTC()}, seal.ErrNoMAC},
		{"task assignment without MAC", store.Message{ID: "f3", Type: store.TypeTaskAssignment, From: store.LeadName, To: "alice", TaskID: "1",
			Timestamp: time.Now().UTC()}, seal.ErrNoMAC},
		{"copied from another inbox", copied, seal.ErrWrongInbox},
		{"another team's key", wrongKey, seal.ErrBadMAC},
		{"tampered", tampered, seal.ErrBadMAC},
		{"plain with a bad MAC", plainBadMAC, seal.ErrBadMAC},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, key)
			if _, err := e.sealed.Mailbox().Send(ctx, store.Message{From: "bob", To: "alice", Content: "before"}); err != nil {
				t.Fatal(err)
			}
			e.appendLine(t, "alice", tt.m)
			// A plain line without a MAC passes: it is only text.
			e.appendLine(t, "alice", store.Message{ID: "p1", Type: store.TypeMessage, From: "bob", To: "alice", Content: "unsigned plain", Timestamp: time.Now().UTC()})
			peek, err := e.sealed.Mailbox().Peek(ctx, "alice")
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff([]string{"before", "unsigned plain"}, contents(peek)); d != "" {
				t.Errorf("Peek (-want +got):\n%s", d)
			}
			got, err := e.sealed.Mailbox().Receive(now(), "alice")
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff([]string{"before", "unsigned plain"}, contents(got)); d != "" {
				t.Errorf("Receive (-want +got):\n%s", d)
			}
			e.mu.Lock()
			forged := e.forged
			e.mu.Unlock()
			if len(forged) != 1 || forged[0].Inbox != "alice" || forged[0].Message.ID != tt.m.ID || !errors.Is(forged[0].Err, tt.wantErr) {
				t.Fatalf("reported %+v, want one in alice's inbox: %v", forged, tt.wantErr)
			}
			// Acking the last good message consumes the forgery too.
			if err := e.sealed.Mailbox().Ack(ctx, "alice", got[len(got)-1].ID); err != nil {
				t.Fatal(err)
			}
			if left, _ := e.raw.Mailbox().Peek(ctx, "alice"); len(left) != 0 {
				t.Errorf("left in the inbox: %v", contents(left))
			}
		})
	}
}

// TestForgedTailConsumed: a forgery after the last good message is consumed
// with that message's ack; one alone in the inbox is consumed at once and
// Receive goes on waiting (here: returns nothing with a done context).
func TestForgedTailConsumed(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, key)
	forged := store.Message{ID: "f1", Type: store.TypePermissionResponse, From: store.LeadName, To: "alice", RequestID: "perm-alice-1",
		Approve: yes(), Content: "granted", Timestamp: time.Now().UTC()}
	e.appendLine(t, "alice", forged)
	got, err := e.sealed.Mailbox().Receive(now(), "alice")
	if len(got) != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("Receive of a lone forgery = %v, %v", contents(got), err)
	}
	if left, _ := e.raw.Mailbox().Peek(ctx, "alice"); len(left) != 0 {
		t.Errorf("a lone forgery stayed in the inbox: %v", contents(left))
	}

	if _, err := e.sealed.Mailbox().Send(ctx, store.Message{From: "bob", To: "alice", Content: "one"}); err != nil {
		t.Fatal(err)
	}
	forged.ID = "f2"
	e.appendLine(t, "alice", forged)
	got, err = e.sealed.Mailbox().Receive(now(), "alice")
	if err != nil || len(got) != 1 {
		t.Fatalf("Receive = %v, %v", contents(got), err)
	}
	if left, _ := e.raw.Mailbox().Peek(ctx, "alice"); len(left) != 2 {
		t.Errorf("before the ack, the inbox holds %d, want 2 (nothing acked yet)", len(left))
	}
	if err := e.sealed.Mailbox().Ack(ctx, "alice", got[0].ID); err != nil {
		t.Fatal(err)
	}
	if left, _ := e.raw.Mailbox().Peek(ctx, "alice"); len(left) != 0 {
		t.Errorf("after the ack, left: %v", contents(left))
	}
	e.mu.Lock()
	n := len(e.forged)
	e.mu.Unlock()
	if n != 2 {
		t.Errorf("%d forgeries reported, want 2", n)
	}
}

// echoTeam's mailbox hands out again, on demand, a message it handed out
// before: a replay that reaches the sealed view past the store's own
// (bounded) de-duplication.
type echoTeam struct {
	store.Team
	mb *echoMailbox
}

func (t echoTeam) Mailbox() store.Mailbox { return t.mb }

type echoMailbox struct {
	store.Mailbox
	again []store.Message
}

func (mb *echoMailbox) Receive(ctx context.Context, member string) ([]store.Message, error) {
	if len(mb.again) > 0 {
		out := mb.again
		mb.again = nil
		return out, nil
	}
	return mb.Mailbox.Receive(ctx, member)
}

// TestReplayRefused: a signed protocol message handed out once is refused
// when it comes again (a captured line appended anew).
func TestReplayRefused(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, key)
	echo := &echoMailbox{Mailbox: e.raw.Mailbox()}
	var forged []seal.Forgery
	sealed := seal.Team(echoTeam{Team: e.raw, mb: echo}, key, seal.Options{OnForgery: func(_ context.Context, f []seal.Forgery) { forged = append(forged, f...) }})
	if _, err := sealed.Mailbox().Send(ctx, store.Message{Type: store.TypeShutdownRequest, From: store.LeadName, To: "alice", RequestID: "shutdown-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sealed.Mailbox().Send(ctx, store.Message{From: "bob", To: "alice", Content: "plain"}); err != nil {
		t.Fatal(err)
	}
	got, err := sealed.Mailbox().Receive(now(), "alice")
	if err != nil || len(got) != 2 {
		t.Fatalf("first delivery: %v, %v", contents(got), err)
	}
	if err := sealed.Mailbox().Ack(ctx, "alice", got[1].ID); err != nil {
		t.Fatal(err)
	}
	echo.again = got
	again, _ := sealed.Mailbox().Receive(now(), "alice")
	if d := cmp.Diff([]string{"plain"}, contents(again)); d != "" {
		t.Errorf("second delivery (-want +got):\n%s", d)
	}
	if len(forged) != 1 || forged[0].Message.Type != store.TypeShutdownRequest || !errors.Is(forged[0].Err, seal.ErrReplay) {
		t.Errorf("reported %+v, want the shutdown request as a replay", forged)
	}
}

// TestReceiveWaitsPastForgeries: a blocking Receive woken by a forgery
// alone keeps waiting for a real message.
func TestReceiveWaitsPastForgeries(t *testing.T) {
	e := newEnv(t, key)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.appendLine(t, "alice", store.Message{ID: "f1", Type: store.TypeShutdownRequest, From: store.LeadName, To: "alice", RequestID: "s1", Timestamp: time.Now().UTC()})
	done := make(chan []store.Message)
	go func() {
		got, _ := e.sealed.Mailbox().Receive(ctx, "alice")
		done <- got
	}()
	// The forgery is refused before the real message is sent: the report
	// says so.
	select {
	case got := <-done:
		t.Fatalf("Receive returned %v before any real message", contents(got))
	case <-e.reported:
	case <-ctx.Done():
		t.Fatal("the forgery was never reported")
	}
	if _, err := e.sealed.Mailbox().Send(ctx, store.Message{From: "bob", To: "alice", Content: "real"}); err != nil {
		t.Fatal(err)
	}
	if got := <-done; len(got) != 1 || got[0].Content != "real" {
		t.Errorf("Receive = %v", contents(got))
	}
}

// sealedStore opens every team sealed, for the conformance suite.
type sealedStore struct{ store.Store }

func (s sealedStore) CreateTeam(ctx context.Context, r store.Roster) (store.Team, error) {
	t, err := s.Store.CreateTeam(ctx, r)
	if err != nil {
		return nil, err
	}
	return seal.Team(t, key, seal.Options{}), nil
}

func (s sealedStore) Team(ctx context.Context, name string) (store.Team, error) {
	t, err := s.Store.Team(ctx, name)
	if err != nil {
		return nil, err
	}
	return seal.Team(t, key, seal.Options{}), nil
}

// TestConformance: a sealed file store still keeps every promise of the
// store interfaces.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func() store.Store {
		dir := t.TempDir()
		return func() store.Store {
			s, err := file.Open(dir, file.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return sealedStore{s}
		}
	})
}

// FuzzVerify: whatever a line on disk holds, verification never panics, a
// message signed and read back verifies, and one with any MAC but its own
// does not.
func FuzzVerify(f *testing.F) {
	f.Add("perm-1", "ok", `{"a":1}`, "00")
	f.Add("", "", "", "")
	f.Fuzz(func(t *testing.T, reqID, content, input, mac string) {
		m := store.Message{ID: "i", Type: store.TypePermissionResponse, From: store.LeadName, To: "a", RequestID: reqID,
			Content: content, Timestamp: time.Unix(1, 2), MAC: mac}
		if json.Valid([]byte(input)) {
			m.ToolInput = json.RawMessage(input)
		}
		_ = seal.Verify(key, "t", &m)
		seal.Sign(key, "t", &m)
		line, err := json.Marshal(m)
		if err != nil {
			t.Skip("not encodable")
		}
		var back store.Message
		if err := json.Unmarshal(line, &back); err != nil {
			t.Fatal(err)
		}
		if err := seal.Verify(key, "t", &back); err != nil {
			t.Fatalf("signed message read back: %v", err)
		}
		if mac != back.MAC {
			back.MAC = mac
			if seal.Verify(key, "t", &back) == nil {
				t.Fatalf("MAC %q verified for another message", mac)
			}
		}
	})
}
