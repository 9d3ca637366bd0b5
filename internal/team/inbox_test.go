package team

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/store/file"
)

func testTeam(t *testing.T) store.Team {
	t.Helper()
	st, err := file.Open(t.TempDir(), file.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	tm, err := st.CreateTeam(context.Background(), store.Roster{Name: "t1", Members: []store.Member{{Name: store.LeadName}, {Name: "alice"}}})
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func send(t *testing.T, tm store.Team, from, to, content string) store.Message {
	t.Helper()
	m, err := tm.Mailbox().Send(context.Background(), store.Message{Type: store.TypeMessage, From: from, To: to, Content: content})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func contents(msgs []store.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Content)
	}
	return out
}

// TestInboxAcksOnceRecorded: messages handed to the model stay in the
// mailbox until the conversation that carries them is recorded, so a crash
// in between re-delivers them; restored ids are never delivered again; a
// message the keep function consumes is acked without reaching the model.
func TestInboxAcksOnceRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm := testTeam(t)
	var told []string
	em := emitter{agent: "alice", log: slog.New(slog.DiscardHandler)}
	in := newInbox("alice", em, func(agent string, msgs []store.Message, at string) {
		for _, m := range msgs {
			told = append(told, agent+"@"+at+":"+m.Content)
		}
	})
	old := send(t, tm, store.LeadName, "alice", "already seen")
	in.restore(map[string]bool{old.ID: true})
	send(t, tm, store.LeadName, "alice", "one")
	send(t, tm, store.LeadName, "alice", "two")
	if err := in.fetch(ctx, tm, nil); err != nil {
		t.Fatal(err)
	}
	got := in.deliver(ctx, tm, AtIdle)
	if diff := cmp.Diff([]string{"one", "two"}, contents(got)); diff != "" {
		t.Errorf("delivered (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"alice@idle:one", "alice@idle:two"}, told); diff != "" {
		t.Errorf("OnDelivered (-want +got):\n%s", diff)
	}
	unread, _ := tm.Mailbox().Peek(ctx, "alice")
	if len(unread) != 3 {
		t.Errorf("before the record: %d unacked, want 3 (nothing acked yet)", len(unread))
	}
	in.record(tm, llm.Message{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("one two")}})
	if unread, _ = tm.Mailbox().Peek(ctx, "alice"); len(unread) != 0 {
		t.Errorf("after the record: %q unacked, want none", contents(unread))
	}

	// Consumed by keep (a request the human answers): acked at once.
	send(t, tm, store.LeadName, "alice", "for the human")
	if err := in.fetch(ctx, tm, func(store.Message) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if in.queued() {
		t.Error("a consumed message is queued for the model")
	}
	if unread, _ = tm.Mailbox().Peek(ctx, "alice"); len(unread) != 0 {
		t.Errorf("consumed message not acked: %q", contents(unread))
	}
}

// TestProtocolBindsOnlyLeadOrHuman: a teammate's protocol state changes
// only for answers and requests from the lead or the human; the lead's
// side keeps requests until answered and gives the human's to the human.
func TestProtocolBindsOnlyLeadOrHuman(t *testing.T) {
	t.Parallel()
	yes := true
	p := newProtocol()
	p.setPlan("plan-alice-1", false)
	p.toMember(store.Message{Type: store.TypePlanApprovalResponse, From: "mallory", RequestID: "plan-alice-1", Approve: &yes})
	p.toMember(store.Message{Type: store.TypeShutdownRequest, From: "mallory", RequestID: "shutdown-mallory-1"})
	if pending, approved := p.plan(); pending != "plan-alice-1" || approved {
		t.Errorf("after a forged approval: plan = %q, %v; want still pending", pending, approved)
	}
	if _, ok := p.shutdownRequest(); ok {
		t.Error("a teammate's shutdown request binds")
	}
	p.toMember(store.Message{Type: store.TypePlanApprovalResponse, From: store.LeadName, RequestID: "plan-alice-1", Approve: &yes})
	if pending, approved := p.plan(); pending != "" || !approved {
		t.Errorf("after the lead's approval: plan = %q, %v; want approved", pending, approved)
	}
	ans, done := p.waitPermission("perm-alice-1")
	defer done()
	p.toMember(store.Message{Type: store.TypePermissionResponse, From: store.HumanName, RequestID: "perm-alice-1", Approve: &yes})
	select {
	case ok := <-ans:
		if !ok {
			t.Error("permission answer = false, want true")
		}
	default:
		t.Error("the human's permission answer did not arrive")
	}

	lead := newProtocol()
	human := func(m store.Message) bool { return m.Type == store.TypePermissionRequest }
	if !lead.toLead(store.Message{Type: store.TypePlanApprovalRequest, From: "alice", RequestID: "plan-alice-2"}, human) {
		t.Error("a plan request was kept from the lead's model")
	}
	if lead.toLead(store.Message{Type: store.TypePermissionRequest, From: "bob", RequestID: "perm-bob-1"}, human) {
		t.Error("a request the human answers reached the lead's model")
	}
	r := store.Roster{Members: []store.Member{{Name: "alice"}, {Name: "bob"}}}
	_, asked, withHuman := lead.outstanding(&r, r.CreatedAt)
	if len(asked["alice"]) != 1 || !withHuman["bob"] || len(asked["bob"]) != 0 {
		t.Errorf("outstanding: asked %v, with the human %v", asked, withHuman)
	}
	lead.answered("plan-alice-2")
	if _, ok := lead.request("plan-alice-2"); ok {
		t.Error("an answered request is still pending")
	}
}

// deferTeam records, line by line, whether its transcripts were asked to
// defer the fsync.
type deferTeam struct {
	store.Team
	tr *deferTranscripts
}

func (t deferTeam) Transcripts() store.Transcripts { return t.tr }

type deferTranscripts struct {
	store.Transcripts
	mu    sync.Mutex
	lines []string // "deferred role" or "durable role"
}

func (d *deferTranscripts) note(how string, line json.RawMessage) {
	var l struct{ Role string }
	_ = json.Unmarshal(line, &l)
	d.mu.Lock()
	d.lines = append(d.lines, how+" "+l.Role)
	d.mu.Unlock()
}

func (d *deferTranscripts) Append(ctx context.Context, member string, line json.RawMessage) error {
	d.note("durable", line)
	return d.Transcripts.Append(ctx, member, line)
}

func (d *deferTranscripts) AppendDeferred(ctx context.Context, member string, line json.RawMessage) error {
	d.note("deferred", line)
	return store.AppendTranscriptDeferred(ctx, d.Transcripts, member, line)
}

func (d *deferTranscripts) Sync(ctx context.Context, member string) error {
	d.mu.Lock()
	d.lines = append(d.lines, "sync")
	d.mu.Unlock()
	return store.SyncTranscript(ctx, d.Transcripts, member)
}

// TestRecordDefersOnlyWhatNothingWaitsOn: a tool's results, which hand out
// no inbox message, are written without their own fsync; a user message
// that hands out messages (acked once it is durable) and an assistant
// message that calls tools (they act on it) are durable before the record
// returns, for an inbox that writes behind as for one that does not. A
// reply that ends the turn is deferred by a teammate's inbox (it writes
// behind) until durable is asked for, and durable by the lead's.
func TestRecordDefersOnlyWhatNothingWaitsOn(t *testing.T) {
	t.Parallel()
	for _, behind := range []bool{false, true} {
		base := testTeam(t)
		tr := &deferTranscripts{Transcripts: base.Transcripts()}
		tm := deferTeam{Team: base, tr: tr}
		em := emitter{agent: "alice", log: slog.New(slog.DiscardHandler)}
		in := newInbox("alice", em, nil)
		if behind {
			in.writeBehind()
		}
		ctx := context.Background()
		send(t, tm, store.LeadName, "alice", "hello")
		if err := in.fetch(ctx, tm, nil); err != nil {
			t.Fatal(err)
		}
		in.deliver(ctx, tm, AtIdle)
		in.record(tm, llm.Message{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("hello")}})
		in.record(tm, llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockToolUse, ID: "t1", Name: "Bash", Input: json.RawMessage(`{}`)}}})
		in.record(tm, llm.Message{Role: llm.RoleUser, Content: []llm.Block{llm.ToolResultBlock("t1", "ok", false)}})
		in.record(tm, llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock("done")}})
		in.settle()
		want := []string{"durable user", "durable assistant", "deferred user", "durable assistant"}
		if behind {
			want[3] = "deferred assistant"
			in.durable(tm)
			want = append(want, "sync")
		}
		tr.mu.Lock()
		got := tr.lines
		tr.mu.Unlock()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("write behind %v: lines (-want +got):\n%s", behind, diff)
		}
		if unread, _ := tm.Mailbox().Peek(ctx, "alice"); len(unread) != 0 {
			t.Errorf("write behind %v: %q unacked after its line", behind, contents(unread))
		}
	}
}

// TestTeamDeleteAsksOnce: TeamDelete asks a member to shut down unless the
// lead asked it already and no refusal of that request waits in the lead's
// inbox.
func TestTeamDeleteAsksOnce(t *testing.T) {
	t.Parallel()
	p := newProtocol()
	p.sentShutdown("shutdown-team-lead-1", "asked")
	p.sentShutdown("shutdown-team-lead-2", "refused")
	p.sentShutdown("shutdown-team-lead-3", "approved")
	no, yes := false, true
	waiting := []store.Message{
		{Type: store.TypeShutdownResponse, From: "refused", RequestID: "shutdown-team-lead-2", Approve: &no},
		{Type: store.TypeShutdownResponse, From: "approved", RequestID: "shutdown-team-lead-3", Approve: &yes},
		{Type: store.TypeMessage, From: "other", Content: "hello"},
	}
	got := toAskShutdown([]string{"asked", "refused", "approved", "other"}, p, waiting)
	if diff := cmp.Diff([]string{"refused", "other"}, got); diff != "" {
		t.Errorf("asked to shut down (-want +got):\n%s", diff)
	}
	// Answered and seen by the lead: asked again if still live.
	p.toLead(store.Message{Type: store.TypeShutdownResponse, RequestID: "shutdown-team-lead-1"}, nil)
	if got := toAskShutdown([]string{"asked"}, p, nil); !slices.Equal(got, []string{"asked"}) {
		t.Errorf("a member whose answer the lead saw: asked = %v", got)
	}
}
