package mcp

import (
	"context"
	"encoding/json"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/store/file"
	"github.com/troupe-dev/troupe/internal/store/seal"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// teamFixture is a team in a file store, seen sealed by the lead and by the
// external member's server alike, as two processes would see it.
type teamFixture struct {
	lead   store.Team
	server *TeamServer
	client *sdk.ClientSession
}

func newTeamFixture(t testing.TB) *teamFixture {
	t.Helper()
	ctx := context.Background()
	st, err := file.Open(t.TempDir(), file.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	raw, err := st.CreateTeam(ctx, store.Roster{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("0123456789abcdef0123456789abcdef")
	lead := seal.Team(raw, key, seal.Options{})
	ts, err := NewTeamServer(ctx, TeamOptions{Team: seal.Team(raw, key, seal.Options{}), Member: "Reviewer", Role: "reviewer"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.Close() })
	ct, st2 := sdk.NewInMemoryTransports()
	ss, err := ts.Server().Connect(ctx, st2, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "claude-code-test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return &teamFixture{lead: lead, server: ts, client: cs}
}

func (f *teamFixture) call(t testing.TB, name string, args any) (string, *sdk.CallToolResult) {
	t.Helper()
	res, err := f.client.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res
}

func (f *teamFixture) member(t *testing.T) store.Member {
	t.Helper()
	r, err := f.lead.ReadRoster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m, ok := r.Member("reviewer")
	if !ok {
		t.Fatalf("reviewer not on the roster: %+v", r.Members)
	}
	return *m
}

// TestExternalMemberJoinsClaimsAndShutsDown is the proof: a go-sdk
// client joins a team, claims a task, messages the lead and answers a
// shutdown.
func TestExternalMemberJoinsClaimsAndShutsDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newTeamFixture(t)
	if m := f.member(t); m.AgentType != AgentTypeExternal || m.Status != store.StatusIdle || m.Role != "reviewer" || m.HeartbeatAt.IsZero() {
		t.Fatalf("member on joining = %+v", m)
	}
	if _, err := f.lead.Tasks().Create(ctx, store.Task{Subject: "review the parser", Description: "Look for panics."}); err != nil {
		t.Fatal(err)
	}

	var tools []string
	for tl, err := range f.client.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		tools = append(tools, tl.Name)
	}
	sort.Strings(tools)
	if diff := cmp.Diff([]string{"ReceiveMessages", "SendMessage", "TaskCreate", "TaskGet", "TaskList", "TaskUpdate"}, tools); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}

	if out, _ := f.call(t, "TaskList", map[string]any{}); out != "#1 [pending] review the parser" {
		t.Errorf("TaskList = %q", out)
	}
	if out, _ := f.call(t, "TaskUpdate", map[string]any{"taskId": "1", "status": "in_progress"}); !strings.HasPrefix(out, "Claimed #1 [in_progress] review the parser (owner: reviewer)") {
		t.Errorf("claim = %q", out)
	}
	if m := f.member(t); m.Status != store.StatusWorking {
		t.Errorf("status after a call = %s, want working", m.Status)
	}
	// A blocked task cannot be claimed: the claim is the store's
	// compare-and-set.
	if _, err := f.lead.Tasks().Create(ctx, store.Task{Subject: "after review", BlockedBy: []string{"1"}}); err != nil {
		t.Fatal(err)
	}
	if out, res := f.call(t, "TaskUpdate", map[string]any{"taskId": "#2", "status": "in_progress"}); !res.IsError || !strings.Contains(out, "claim task #2") {
		t.Errorf("claim of a blocked task = %q", out)
	}
	if out, _ := f.call(t, "TaskGet", map[string]any{"taskId": "#2"}); !strings.Contains(out, "[pending] after review (blocked by: #1)") {
		t.Errorf("TaskGet = %q", out)
	}

	if out, _ := f.call(t, "SendMessage", map[string]any{"recipient": "lead", "content": "Found a panic in parse.go", "summary": "panic"}); out != "Sent to team-lead." {
		t.Errorf("SendMessage = %q", out)
	}
	if out, res := f.call(t, "SendMessage", map[string]any{"recipient": "nobody", "content": "x"}); !res.IsError || !strings.Contains(out, "team-lead") {
		t.Errorf("to an unknown member: %q (valid names must be listed)", out)
	}
	got := receive(t, f.lead, store.LeadName)
	if len(got) != 1 || got[0].From != "reviewer" || got[0].Content != "Found a panic in parse.go" {
		t.Fatalf("lead got %+v", got)
	}
	if out, _ := f.call(t, "TaskUpdate", map[string]any{"taskId": "1", "status": "completed"}); !strings.Contains(out, "[completed]") {
		t.Errorf("complete = %q", out)
	}

	// The lead asks the member to shut down; the request arrives through
	// ReceiveMessages, the answer goes back signed.
	req, err := f.lead.Mailbox().Send(ctx, store.Message{Type: store.TypeShutdownRequest, From: store.LeadName, To: "reviewer", RequestID: "shutdown-7", Content: "Work is done."})
	if err != nil {
		t.Fatal(err)
	}
	out, res := f.call(t, "ReceiveMessages", map[string]any{"wait_seconds": 30})
	if !strings.Contains(out, `request_id="shutdown-7"`) || !strings.Contains(out, "shutdown_response") {
		t.Errorf("ReceiveMessages = %q", out)
	}
	var rec Received
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &rec); err != nil || len(rec.Messages) != 1 || rec.Messages[0].ID != req.ID || rec.Messages[0].Type != store.TypeShutdownRequest {
		t.Errorf("structured = %s (%v)", b, err)
	}
	if out, res := f.call(t, "SendMessage", map[string]any{"type": "shutdown_response", "request_id": "nope", "approve": true}); !res.IsError {
		t.Errorf("answer to an unknown request accepted: %q", out)
	}
	if out, _ := f.call(t, "SendMessage", map[string]any{"type": "shutdown_response", "request_id": "shutdown-7", "approve": true}); !strings.Contains(out, "Shutdown approved") {
		t.Errorf("shutdown_response = %q", out)
	}
	got = receive(t, f.lead, store.LeadName)
	if len(got) != 1 || got[0].Type != store.TypeShutdownResponse || got[0].Approve == nil || !*got[0].Approve || got[0].RequestID != "shutdown-7" {
		t.Fatalf("lead got %+v", got)
	}
	if m := f.member(t); m.Status != store.StatusShutdown {
		t.Errorf("status after shutdown = %s", m.Status)
	}
	select {
	case <-f.server.Done():
	default:
		t.Error("Done not closed after an approved shutdown")
	}
	if out, res := f.call(t, "TaskList", map[string]any{}); !res.IsError || !strings.Contains(out, "has shut down") && !strings.Contains(out, "left team") {
		t.Errorf("call after shutdown = %q", out)
	}

	// What the member did is journaled in the team's typed form, as a
	// runtime teammate's is, so the UI, usage and resume read it alike.
	evs, err := f.lead.Journal().Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range evs {
		env, err := teamevent.Decode(e)
		if err != nil {
			t.Errorf("journal line %s does not decode: %v", e.Type, err)
			continue
		}
		if _, unknown := env.Event.(teamevent.Unknown); unknown {
			t.Errorf("journal line of unknown type %q", e.Type)
		}
		switch ev := env.Event.(type) {
		case teamevent.Claim:
			if ev.Owner != "reviewer" || ev.Subject != "review the parser" {
				t.Errorf("claim = %+v", ev)
			}
		case teamevent.Protocol:
			if ev.Kind != teamevent.ProtocolShutdown || ev.Approve == nil || !*ev.Approve {
				t.Errorf("protocol = %+v", ev)
			}
		}
		types = append(types, e.Type)
	}
	for _, want := range []string{"spawn", "claim", "complete", "send", "protocol"} {
		if !slices.Contains(types, want) {
			t.Errorf("journal types %v lack %s", types, want)
		}
	}
}

// receive takes what waits in who's inbox, less idle notifications.
func receive(t testing.TB, team store.Team, who string) []store.Message {
	t.Helper()
	var out []store.Message
	for _, m := range receiveAll(t, team, who) {
		if m.Type != store.TypeIdleNotification {
			out = append(out, m)
		}
	}
	return out
}

func receiveAll(t testing.TB, team store.Team, who string) []store.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msgs, err := team.Mailbox().Receive(ctx, who)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) > 0 {
		if err := team.Mailbox().Ack(ctx, who, msgs[len(msgs)-1].ID); err != nil {
			t.Fatal(err)
		}
	}
	return msgs
}

func TestShutdownHandsBackTasksAndRefusalNeedsReason(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newTeamFixture(t)
	if _, err := f.lead.Tasks().Create(ctx, store.Task{Subject: "half done"}); err != nil {
		t.Fatal(err)
	}
	f.call(t, "TaskUpdate", map[string]any{"taskId": "1", "status": "in_progress"})
	for _, id := range []string{"s1", "s2"} {
		if _, err := f.lead.Mailbox().Send(ctx, store.Message{Type: store.TypeShutdownRequest, From: store.LeadName, To: "reviewer", RequestID: id, Content: "stop"}); err != nil {
			t.Fatal(err)
		}
	}
	f.call(t, "ReceiveMessages", map[string]any{"wait_seconds": 0})
	if out, res := f.call(t, "SendMessage", map[string]any{"type": "shutdown_response", "request_id": "s1", "approve": false}); !res.IsError || !strings.Contains(out, "needs a reason") {
		t.Errorf("refusal without reason = %q", out)
	}
	if out, _ := f.call(t, "SendMessage", map[string]any{"type": "shutdown_response", "request_id": "s1", "approve": false, "reason": "still reviewing"}); out != "Shutdown refused; keep working." {
		t.Errorf("refusal = %q", out)
	}
	f.call(t, "SendMessage", map[string]any{"type": "shutdown_response", "request_id": "s2", "approve": true})
	task, err := f.lead.Tasks().Get(ctx, "1")
	if err != nil {
		t.Fatal(err)
	}
	if task.Owner != "" || task.Status != store.TaskPending {
		t.Errorf("task after shutdown = %+v, want back on the board", task)
	}
	got := receive(t, f.lead, store.LeadName)
	if len(got) != 2 || !strings.Contains(got[1].Content, "#1 went back to the board") {
		t.Errorf("lead got %+v", got)
	}
}

func TestJoinRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := file.Open(t.TempDir(), file.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	team, err := st.CreateTeam(ctx, store.Roster{Name: "t", Members: []store.Member{{Name: "alice", AgentType: "general-purpose", Status: store.StatusIdle}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"alice", "team-lead", "human", "Bad Name!"} {
		if ts, err := NewTeamServer(ctx, TeamOptions{Team: team, Member: name}); err == nil {
			ts.Close()
			t.Errorf("joining as %q accepted", name)
		}
	}
}

func TestResources(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newTeamFixture(t)
	if _, err := f.lead.Tasks().Create(ctx, store.Task{Subject: "one"}); err != nil {
		t.Fatal(err)
	}
	var uris []string
	for r, err := range f.client.Resources(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		uris = append(uris, r.URI)
	}
	slices.Sort(uris)
	if diff := cmp.Diff([]string{"troupe://team/t/board", "troupe://team/t/roster"}, uris); diff != "" {
		t.Fatalf("resources (-want +got):\n%s", diff)
	}
	res, err := f.client.ReadResource(ctx, &sdk.ReadResourceParams{URI: "troupe://team/t/roster"})
	if err != nil {
		t.Fatal(err)
	}
	var r store.Roster
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &r); err != nil || len(r.Members) != 1 || r.Members[0].AgentType != AgentTypeExternal {
		t.Errorf("roster resource = %s (%v)", res.Contents[0].Text, err)
	}
	res, err = f.client.ReadResource(ctx, &sdk.ReadResourceParams{URI: "troupe://team/t/board"})
	if err != nil || !strings.Contains(res.Contents[0].Text, `"subject": "one"`) {
		t.Errorf("board resource = %+v, %v", res, err)
	}
}

// TestReceiveWakesOnSend: a waiting ReceiveMessages returns when a message
// arrives, well before its wait is over.
func TestReceiveWakesOnSend(t *testing.T) {
	t.Parallel()
	f := newTeamFixture(t)
	got := make(chan string, 1)
	go func() {
		out, _ := f.call(t, "ReceiveMessages", map[string]any{"wait_seconds": 600})
		got <- out
	}()
	waitWaiting(f.server)
	if m := f.member(t); m.Status != store.StatusIdle {
		t.Errorf("status while waiting = %s, want idle", m.Status)
	}
	if _, err := f.lead.Mailbox().Send(context.Background(), store.Message{Type: store.TypeMessage, From: store.LeadName, To: "reviewer", Content: "wake up"}); err != nil {
		t.Fatal(err)
	}
	select {
	case out := <-got:
		if !strings.Contains(out, "wake up") {
			t.Errorf("ReceiveMessages = %q", out)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ReceiveMessages did not return after a send")
	}
}

// TestIdleNotification: a member that goes from working to waiting tells
// the lead once, as a runtime teammate does.
func TestIdleNotification(t *testing.T) {
	t.Parallel()
	f := newTeamFixture(t)
	f.call(t, "ReceiveMessages", map[string]any{"wait_seconds": 0}) // idle already: no notice
	f.call(t, "TaskList", map[string]any{})
	f.call(t, "ReceiveMessages", map[string]any{"wait_seconds": 0})
	f.call(t, "ReceiveMessages", map[string]any{"wait_seconds": 0})
	var idle int
	for _, m := range receiveAll(t, f.lead, store.LeadName) {
		if m.Type == store.TypeIdleNotification && m.From == "reviewer" {
			idle++
		}
	}
	if idle != 1 {
		t.Errorf("idle notifications = %d, want 1", idle)
	}
}

// waitWaiting returns once a ReceiveMessages call of s is under way.
func waitWaiting(s *TeamServer) {
	for {
		s.mu.Lock()
		n := s.waiting
		s.mu.Unlock()
		if n > 0 {
			return
		}
		runtime.Gosched()
	}
}

// BenchmarkReceiveLatency measures the store's wake figure through MCP:
// the time from a send to the return of a client's waiting
// ReceiveMessages call (reported as p50 and p99).
func BenchmarkReceiveLatency(b *testing.B) {
	f := newTeamFixture(b)
	ctx := context.Background()
	var lat []time.Duration
	for b.Loop() {
		done := make(chan time.Time, 1)
		go func() {
			f.call(b, "ReceiveMessages", map[string]any{"wait_seconds": 60})
			done <- time.Now()
		}()
		waitWaiting(f.server)
		start := time.Now()
		if _, err := f.lead.Mailbox().Send(ctx, store.Message{Type: store.TypeMessage, From: store.LeadName, To: "reviewer", Content: "ping"}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, (<-done).Sub(start))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// TestCloseLetsTheNameRejoin: a client that leaves without shutting down
// leaves its member stale (dead to the team) and the name free to join.
func TestCloseLetsTheNameRejoin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := file.Open(t.TempDir(), file.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	team, err := st.CreateTeam(ctx, store.Roster{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := NewTeamServer(ctx, TeamOptions{Team: team, Member: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	ts.Close()
	r, _ := team.ReadRoster(ctx)
	if m, _ := r.Member("bob"); time.Since(m.HeartbeatAt) < time.Hour {
		t.Errorf("heartbeat after Close = %s, want stale", m.HeartbeatAt)
	}
	again, err := NewTeamServer(ctx, TeamOptions{Team: team, Member: "bob"})
	if err != nil {
		t.Fatalf("rejoin: %v", err)
	}
	again.Close()
}
