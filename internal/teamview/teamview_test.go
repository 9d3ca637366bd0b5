package teamview

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/store/file"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/usage"
)

func TestMain(m *testing.M) {
	time.Local = time.UTC
	goleak.VerifyTestMain(m)
}

var t0 = time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// ev is a journal line as the team writes it, sent through Encode and
// Decode as every consumer receives it.
func ev(t *testing.T, who string, s int, e teamevent.Event) teamevent.Envelope {
	t.Helper()
	se, err := teamevent.Encode(who, e)
	if err != nil {
		t.Fatal(err)
	}
	se.TS, se.Team = at(s), "blog"
	env, err := teamevent.Decode(se)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

// lines are a timeline as "who: text".
func lines(es []Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Who+": "+e.Text)
	}
	return out
}

func ids(ps []Pending) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.ID)
	}
	return out
}

var cmpOpts = []cmp.Option{cmpopts.EquateEmpty(), cmpopts.IgnoreFields(Member{}, "DoingSince", "TurnSince")}

// TestReduce reduces sequences of typed inputs and checks the snapshots.
func TestReduce(t *testing.T) {
	lead := func(status string) Member { return Member{Name: store.LeadName, Status: status} }
	cases := []struct {
		name     string
		inputs   func(t *testing.T) []any
		roster   []Member
		board    []store.Task // nil: not checked
		timeline []string     // nil: not checked
		pending  []string
		human    []string
	}{
		{
			name: "spawn, claim, complete",
			inputs: func(t *testing.T) []any {
				return []any{
					ev(t, store.LeadName, 1, teamevent.TeamCreate{Description: "blog"}),
					ev(t, store.LeadName, 2, teamevent.TaskCreate{Task: "1", Subject: "API"}),
					ev(t, store.LeadName, 3, teamevent.TaskCreate{Task: "2", Subject: "frontend", BlockedBy: []string{"1"}}),
					ev(t, store.LeadName, 4, teamevent.Spawn{Member: "alice", Role: "backend", Model: "claude-sonnet-4-5", Mode: "in-process"}),
					ev(t, "alice", 5, teamevent.Status{Member: "alice", Status: store.StatusWorking}),
					ev(t, "alice", 6, teamevent.Claim{Task: "1", Owner: "alice", Subject: "API"}),
					ev(t, "alice", 7, teamevent.TaskComplete{TaskChange: teamevent.TaskChange{Task: "1", Status: store.TaskCompleted, Owner: "alice"}}),
					ev(t, "alice", 8, teamevent.Status{Member: "alice", Status: store.StatusIdle}),
				}
			},
			roster: []Member{lead(store.StatusIdle), {Name: "alice", Role: "backend", Model: "claude-sonnet-4-5", Mode: "in-process", Status: store.StatusIdle}},
			board: []store.Task{
				{ID: "1", Subject: "API", Status: store.TaskCompleted, Owner: "alice"},
				{ID: "2", Subject: "frontend", Status: store.TaskPending},
			},
			timeline: []string{
				"team-lead: creates team blog",
				"team-lead: adds task #1: API",
				"team-lead: adds task #2: frontend",
				"team-lead: spawns alice (backend)",
				"alice: claims task #1: API",
				"alice: completes task #1",
			},
		},
		{
			name: "a claim shows as the member's current task",
			inputs: func(t *testing.T) []any {
				return []any{
					ev(t, store.LeadName, 1, teamevent.TaskCreate{Task: "3", Subject: "docs"}),
					ev(t, store.LeadName, 2, teamevent.Spawn{Member: "bob"}),
					ev(t, "bob", 3, teamevent.Claim{Task: "3", Owner: "bob", Subject: "docs"}),
				}
			},
			roster: []Member{lead(store.StatusIdle), {Name: "bob", Status: StatusStarting, Task: "3", Subject: "docs"}},
		},
		{
			name: "a dead member's task goes back to the board",
			inputs: func(t *testing.T) []any {
				return []any{
					ev(t, store.LeadName, 1, teamevent.TaskCreate{Task: "1", Subject: "API"}),
					ev(t, store.LeadName, 2, teamevent.Spawn{Member: "alice"}),
					ev(t, "alice", 3, teamevent.Claim{Task: "1", Owner: "alice", Subject: "API"}),
					ev(t, store.LeadName, 9, teamevent.Dead{Member: "alice", HeartbeatAt: at(4), FreedTasks: []string{"1"}}),
				}
			},
			roster:   []Member{lead(store.StatusIdle), {Name: "alice", Status: StatusDead}},
			board:    []store.Task{{ID: "1", Subject: "API", Status: store.TaskPending}},
			timeline: []string{"team-lead: adds task #1: API", "team-lead: spawns alice", "alice: claims task #1: API", "alice: is dead: no heartbeat since 09:00:04; task #1 back on the board"},
		},
		{
			name: "a member neither running nor shut down is dead",
			inputs: func(t *testing.T) []any {
				return []any{Snapshot{
					Roster: &store.Roster{Name: "blog", Members: []store.Member{
						{Name: "alice", Role: "backend", Status: store.StatusWorking, Model: "m1"},
						{Name: "bob", Status: store.StatusShutdown},
						{Name: "carol", Status: store.StatusIdle, Worktree: "/w/carol"},
					}},
					Tasks:   []store.Task{{ID: "1", Subject: "x", Status: store.TaskInProgress, Owner: "alice"}},
					Running: map[string]bool{"carol": true},
				}}
			},
			roster: []Member{lead(store.StatusIdle), {Name: "alice", Role: "backend", Model: "m1", Status: StatusDead, Task: "1", Subject: "x"},
				{Name: "bob", Status: store.StatusShutdown}, {Name: "carol", Status: store.StatusIdle, Worktree: "/w/carol"}},
		},
		{
			name: "a member on another machine shows its host",
			inputs: func(t *testing.T) []any {
				return []any{Snapshot{
					Roster: &store.Roster{Name: "blog", Members: []store.Member{
						{Name: "alice", Status: store.StatusIdle},
						{Name: "bob", Status: store.StatusIdle},
					}},
					Presence: []store.Presence{{Member: "alice", Host: "build-2", PID: 4242}, {Member: "bob"}},
				}}
			},
			roster: []Member{lead(store.StatusIdle), {Name: "alice", Status: store.StatusIdle, Host: "build-2:4242"},
				{Name: "bob", Status: store.StatusIdle}},
		},
		{
			name: "a permission request pending, then answered",
			inputs: func(t *testing.T) []any {
				return []any{
					ev(t, "alice", 1, teamevent.Protocol{Kind: teamevent.ProtocolPermission, RequestID: "perm-1", Member: "alice", Tool: "bash"}),
					ev(t, "bob", 2, teamevent.Protocol{Kind: teamevent.ProtocolPlanRequest, RequestID: "plan-1", Member: "bob"}),
					Request(store.Message{Type: store.TypePermissionRequest, From: "alice", RequestID: "perm-1", ToolName: "bash"}),
					ev(t, "alice", 3, teamevent.Permission{RequestID: "perm-1", Member: "alice", Tool: "bash", Approve: true}),
				}
			},
			roster:   []Member{lead(store.StatusIdle)},
			timeline: []string{"alice: sends a permission request for bash", "bob: sends a plan approval request", "alice: bash was allowed"},
			pending:  []string{"plan-1"},
		},
		{
			name: "the human's request stays until answered; an answer seen first hides it",
			inputs: func(t *testing.T) []any {
				return []any{
					Request(store.Message{Type: store.TypePermissionRequest, From: "alice", RequestID: "perm-1", ToolName: "bash"}),
					Request(store.Message{Type: store.TypePlanApprovalRequest, From: "bob", RequestID: "plan-1"}),
					ev(t, "human", 3, teamevent.Protocol{Kind: teamevent.ProtocolPlanResponse, RequestID: "plan-2", Member: "carol", Approve: no()}),
					Request(store.Message{Type: store.TypePlanApprovalRequest, From: "carol", RequestID: "plan-2"}),
					Answered{RequestID: "perm-1"},
				}
			},
			roster:  []Member{lead(store.StatusIdle)},
			pending: []string{"plan-1"},
			human:   []string{"plan-1"},
		},
		{
			name: "task dependencies and deletion",
			inputs: func(t *testing.T) []any {
				return []any{
					ev(t, store.LeadName, 1, teamevent.TaskCreate{Task: "1", Subject: "a"}),
					ev(t, store.LeadName, 1, teamevent.TaskCreate{Task: "2", Subject: "b"}),
					ev(t, store.LeadName, 1, teamevent.TaskCreate{Task: "3", Subject: "c"}),
					ev(t, store.LeadName, 2, teamevent.TaskUpdate{TaskChange: teamevent.TaskChange{Task: "2", Status: store.TaskPending, AddBlockedBy: []string{"1"}}}),
					ev(t, store.LeadName, 2, teamevent.TaskUpdate{TaskChange: teamevent.TaskChange{Task: "1", Status: store.TaskPending, AddBlocks: []string{"3"}}}),
					ev(t, store.LeadName, 3, teamevent.TaskUpdate{TaskChange: teamevent.TaskChange{Task: "3", Status: store.TaskDeleted}}),
				}
			},
			roster: []Member{lead(store.StatusIdle)},
			board: []store.Task{
				{ID: "1", Subject: "a", Status: store.TaskPending, Blocks: []string{"2"}},
				{ID: "2", Subject: "b", Status: store.TaskPending, BlockedBy: []string{"1"}},
			},
		},
		{
			name: "shut down and stopped",
			inputs: func(t *testing.T) []any {
				return []any{
					ev(t, store.LeadName, 1, teamevent.Spawn{Member: "alice"}),
					ev(t, store.LeadName, 1, teamevent.Spawn{Member: "bob"}),
					ev(t, "alice", 2, teamevent.Status{Member: "alice", Status: store.StatusShutdown}),
					ev(t, "alice", 3, teamevent.Stopped{Member: "alice"}),
					ev(t, "bob", 3, teamevent.Stopped{Member: "bob", Why: "killed"}),
				}
			},
			roster:   []Member{lead(store.StatusIdle), {Name: "alice", Status: store.StatusShutdown}, {Name: "bob", Status: StatusStopped}},
			timeline: []string{"team-lead: spawns alice", "team-lead: spawns bob", "alice: has shut down", "alice: stopped", "bob: stopped: killed"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := New(Options{})
			for _, in := range tc.inputs(t) {
				if !v.Apply(t0, in) {
					t.Fatalf("Apply(%T) refused", in)
				}
			}
			if diff := cmp.Diff(tc.roster, v.Roster(), cmpOpts...); diff != "" {
				t.Errorf("roster (-want +got):\n%s", diff)
			}
			if tc.board != nil {
				if diff := cmp.Diff(tc.board, v.Board().Tasks, cmpOpts...); diff != "" {
					t.Errorf("board (-want +got):\n%s", diff)
				}
			}
			if tc.timeline != nil {
				if diff := cmp.Diff(tc.timeline, lines(v.Timeline(Filter{}))); diff != "" {
					t.Errorf("timeline (-want +got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(tc.pending, ids(v.Pending(false)), cmpOpts...); diff != "" {
				t.Errorf("pending (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.human, ids(v.Pending(true)), cmpOpts...); diff != "" {
				t.Errorf("pending for the human (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTimelineFilter: the timeline is filtered by the member an entry
// concerns (sender or recipient) and by journal type.
func TestTimelineFilter(t *testing.T) {
	v := New(Options{})
	for _, e := range []teamevent.Envelope{
		ev(t, store.LeadName, 1, teamevent.Spawn{Member: "alice"}),
		ev(t, "alice", 2, teamevent.Send{ID: "m1", MsgType: store.TypeMessage, From: "alice", To: "bob", Content: "hi bob"}),
		ev(t, "bob", 3, teamevent.Send{ID: "m2", MsgType: store.TypeIdleNotification, From: "bob", To: store.LeadName}),
		ev(t, store.LeadName, 4, teamevent.Send{ID: "m3", MsgType: store.TypePlanApprovalResponse, From: store.LeadName, To: "bob", Approve: yes(), Content: "ok"}),
		ev(t, "bob", 5, teamevent.Deliver{Member: "bob", IDs: []string{"m1", "m3"}, At: "idle"}),
	} {
		v.Apply(t0, e)
	}
	for _, tc := range []struct {
		f    Filter
		want []string
	}{
		{Filter{}, []string{"team-lead: spawns alice", "alice: → bob: hi bob", "team-lead: approves bob's plan: ok", "bob: receives 2 message(s) while idle"}},
		{Filter{Member: "bob"}, []string{"alice: → bob: hi bob", "team-lead: approves bob's plan: ok", "bob: receives 2 message(s) while idle"}},
		{Filter{Member: "alice"}, []string{"team-lead: spawns alice", "alice: → bob: hi bob"}},
		{Filter{Member: "bob", Types: []string{"send"}}, []string{"alice: → bob: hi bob", "team-lead: approves bob's plan: ok"}},
		{Filter{Types: []string{"usage"}}, nil},
	} {
		if diff := cmp.Diff(tc.want, lines(v.Timeline(tc.f))); diff != "" {
			t.Errorf("Timeline(%+v) (-want +got):\n%s", tc.f, diff)
		}
	}
}

// TestTranscript: streamed text, tool calls and delivered messages make a
// member's transcript; a message reported twice is shown once; a driverless
// view takes the lead's turns from its events and its messages from the
// journal.
func TestTranscript(t *testing.T) {
	type item struct {
		Kind      ItemKind
		Who, Text string
	}
	items := func(v *View, name string) []item {
		var out []item
		for _, it := range v.Transcript(name) {
			out = append(out, item{it.Kind, it.Who, it.Text})
		}
		return out
	}
	msg := store.Message{ID: "m1", From: "alice", Type: store.TypeMessage, Content: "done\n  indented"}
	t.Run("driven", func(t *testing.T) {
		v := New(Options{})
		v.Apply(at(0), Prompt{Text: "build it"})
		v.Apply(at(1), TurnStart{Why: "human"})
		for _, chunk := range []string{"I'll ", "plan."} {
			v.Apply(at(2), agent.Event{Type: agent.EventText, Agent: store.LeadName, Text: chunk})
		}
		if got, _ := v.Member(store.LeadName); !got.InTurn || got.Doing != "writing" || got.Status != store.StatusWorking {
			t.Errorf("lead while writing: %+v", got)
		}
		v.Apply(at(3), agent.Event{Type: agent.EventMessage, Agent: store.LeadName, Message: &llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock("I'll plan it.")}}})
		v.Apply(at(3), agent.Event{Type: agent.EventToolCall, Agent: store.LeadName, Call: &agent.Call{Name: "bash", Input: []byte(`{"command":"ls"}`)}})
		v.Apply(at(4), agent.Event{Type: agent.EventToolResult, Agent: store.LeadName, Call: &agent.Call{Name: "bash"}, Result: toolErr("no such file")})
		v.Apply(at(5), Delivered{Agent: store.LeadName, Messages: []store.Message{msg, {ID: "i1", From: "bob", Type: store.TypeIdleNotification}}, At: "tool_boundary"})
		v.Apply(at(6), Delivered{Agent: store.LeadName, Messages: []store.Message{msg}, At: "idle"})
		v.Apply(at(6), Delivered{Agent: "bob", Messages: []store.Message{{ID: "m2", From: store.LeadName, Type: store.TypeShutdownRequest, Content: "stop"}}, At: "idle"})
		v.Apply(at(7), TurnEnd{Err: errors.New("overloaded")})
		v.Apply(at(8), Warning{Text: "settings changed"})
		want := []item{
			{ItemHuman, store.HumanName, "build it"},
			{ItemText, "", "I'll plan it."},
			{ItemTool, "", "bash ls"},
			{ItemToolError, "", "bash: no such file"},
			{ItemMessage, "alice", "done\n  indented"},
			{ItemError, "", "the lead's turn failed: overloaded"},
			{ItemError, "", "settings changed"},
		}
		if diff := cmp.Diff(want, items(v, store.LeadName)); diff != "" {
			t.Errorf("lead's transcript (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]item{{ItemMessage, "team-lead [shutdown_request]", "stop"}}, items(v, "bob")); diff != "" {
			t.Errorf("bob's transcript (-want +got):\n%s", diff)
		}
		if got, _ := v.Member(store.LeadName); got.InTurn || got.Status != store.StatusIdle {
			t.Errorf("lead after its turn: %+v", got)
		}
	})
	t.Run("driverless", func(t *testing.T) {
		v := New(Options{Driverless: true})
		v.Apply(at(1), agent.Event{Type: agent.EventText, Agent: store.LeadName, Text: "Let me see."})
		if got, _ := v.Member(store.LeadName); !got.InTurn {
			t.Errorf("the lead's first event did not start its turn: %+v", got)
		}
		v.Apply(at(2), ev(t, "alice", 2, teamevent.Send{ID: "m1", MsgType: store.TypeMessage, From: "alice", To: store.LeadName, Content: "done"}))
		v.Apply(at(2), Delivered{Agent: store.LeadName, Messages: []store.Message{{ID: "m1", From: "alice", Type: store.TypeMessage, Content: "done"}}})
		v.Apply(at(3), agent.Event{Type: agent.EventMessage, Agent: store.LeadName, Message: &llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock("All done.")}}})
		want := []item{{ItemText, "", "Let me see."}, {ItemMessage, "alice", "done"}, {ItemText, "", "All done."}}
		if diff := cmp.Diff(want, items(v, store.LeadName)); diff != "" {
			t.Errorf("lead's transcript (-want +got):\n%s", diff)
		}
		if got, _ := v.Member(store.LeadName); got.InTurn {
			t.Errorf("a final message without tool calls did not end the turn: %+v", got)
		}
	})
}

// TestUsage: a call reported both by the journal and by the agent's events
// is counted once; costs use the prices; the series keeps running totals.
func TestUsage(t *testing.T) {
	prices := usage.Prices{"m": {Input: 1, Output: 10}}
	v := New(Options{Prices: prices})
	call := func(name string, in, out int64) agent.Event {
		return agent.Event{Type: agent.EventUsage, Agent: name, Model: "m", Usage: &llm.Usage{InputTokens: in, OutputTokens: out}}
	}
	// In process the journal's line comes first, then the agent's event.
	v.Apply(at(1), ev(t, "alice", 1, teamevent.Usage{AgentName: "alice", InputTokens: 1000, OutputTokens: 100, Model: "m", Kind: teamevent.UsageWork, Task: "1"}))
	v.Apply(at(1), call("alice", 1000, 100))
	// The lead's calls before the team exists come as agent events only,
	// and are journaled later.
	v.Apply(at(2), call(store.LeadName, 2000, 0))
	v.Apply(at(3), ev(t, store.LeadName, 3, teamevent.Usage{AgentName: store.LeadName, InputTokens: 2000, Model: "m", Kind: teamevent.UsageCoordination}))
	v.Apply(at(4), ev(t, "alice", 4, teamevent.Usage{AgentName: "alice", InputTokens: 500, Model: "unknown-model", Kind: teamevent.UsageCoordination}))
	want := []UsagePoint{
		{At: at(1), Member: "alice", Kind: teamevent.UsageWork, Task: "1", Tokens: 1100, CostUSD: 0.002, TotalTokens: 1100, TotalCostUSD: 0.002},
		{At: at(2), Member: store.LeadName, Kind: teamevent.UsageCoordination, Tokens: 2000, CostUSD: 0.002, TotalTokens: 2000, TotalCostUSD: 0.002},
		{At: at(4), Member: "alice", Kind: teamevent.UsageCoordination, Tokens: 500, TotalTokens: 1600, TotalCostUSD: 0.002},
	}
	if diff := cmp.Diff(want, v.Usage(""), cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if got := len(v.Usage("alice")); got != 2 {
		t.Errorf("alice's calls: %d, want 2", got)
	}
	c := v.Counts()
	if c.Tokens != 3600 || fmt.Sprintf("%.3f", c.CostUSD) != "0.004" {
		t.Errorf("counts: %d tokens, $%f; want 3600, $0.004", c.Tokens, c.CostUSD)
	}
	if a, _ := v.Member("alice"); a.Model != "m" {
		t.Errorf("alice's model %q, want it from her calls", a.Model)
	}
}

// TestLoad: a view built late from a store whose journal holds the team's
// events shows what a view that watched them live shows.
func TestLoad(t *testing.T) {
	ctx := context.Background()
	st, err := file.Open(t.TempDir(), file.Options{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	team, err := st.CreateTeam(ctx, store.Roster{Name: "blog"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := team.UpdateRoster(ctx, func(r *store.Roster) error {
		r.Members = append(r.Members, store.Member{Name: "alice", Role: "backend", Model: "m", Status: store.StatusWorking},
			store.Member{Name: "bob", Role: "frontend", Status: store.StatusIdle})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t1, err := team.Tasks().Create(ctx, store.Task{Subject: "API"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := team.Tasks().Create(ctx, store.Task{Subject: "frontend", BlockedBy: []string{t1.ID}}); err != nil {
		t.Fatal(err)
	}
	if _, err := team.Tasks().Claim(ctx, t1.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	events := []struct {
		who string
		e   teamevent.Event
	}{
		{store.LeadName, teamevent.TeamCreate{Description: "blog"}},
		{store.LeadName, teamevent.TaskCreate{Task: "1", Subject: "API"}},
		{store.LeadName, teamevent.TaskCreate{Task: "2", Subject: "frontend", BlockedBy: []string{"1"}}},
		{store.LeadName, teamevent.Spawn{Member: "alice", Role: "backend", Model: "m"}},
		{store.LeadName, teamevent.Spawn{Member: "bob", Role: "frontend"}},
		{"alice", teamevent.Claim{Task: "1", Owner: "alice", Subject: "API"}},
		{"alice", teamevent.Usage{AgentName: "alice", InputTokens: 300, OutputTokens: 30, Model: "m", Kind: teamevent.UsageWork, Task: "1"}},
		{"alice", teamevent.Protocol{Kind: teamevent.ProtocolPermission, RequestID: "perm-1", Member: "alice", Tool: "bash"}},
		{"alice", teamevent.Send{ID: "m1", MsgType: store.TypeMessage, From: "alice", To: "bob", Content: "soon"}},
		{"bob", teamevent.Status{Member: "bob", Status: store.StatusIdle}},
		{"future", teamevent.Unknown{Kind: "from_a_newer_troupe", Fields: map[string]any{"x": 1.0}}},
	}
	live := New(Options{})
	for _, e := range events {
		se, err := teamevent.Encode(e.who, e.e)
		if err != nil {
			t.Fatal(err)
		}
		if err := team.Journal().Append(ctx, se); err != nil {
			t.Fatal(err)
		}
		se.Team, se.TS = "blog", t0
		env, err := teamevent.Decode(se)
		if err != nil {
			t.Fatal(err)
		}
		live.Apply(t0, env)
	}
	// A line of the wrong shape is skipped, here as there.
	if err := team.Journal().Append(ctx, store.Event{Type: "claim", Agent: "x", Fields: map[string]any{"task": []string{"not", "a", "string"}}}); err != nil {
		t.Fatal(err)
	}
	running := map[string]bool{"alice": true}
	r, _ := team.ReadRoster(ctx)
	b, _ := team.Tasks().Board(ctx)
	live.Apply(t0, Snapshot{Roster: &r, Tasks: b.Tasks, Corrupt: b.Corrupt, Running: running})

	late, err := Load(ctx, team, running, Options{})
	if err != nil {
		t.Fatal(err)
	}
	opts := append(cmpOpts, cmpopts.IgnoreFields(Entry{}, "Seq"), cmpopts.IgnoreFields(store.Task{}, "CreatedAt", "UpdatedAt"))
	for _, check := range []struct {
		what      string
		want, got any
	}{
		{"roster", live.Roster(), late.Roster()},
		{"board", live.Board(), late.Board()},
		{"timeline", live.Timeline(Filter{}), late.Timeline(Filter{})},
		{"usage", live.Usage(""), late.Usage("")},
		{"pending", live.Pending(false), late.Pending(false)},
		{"team", live.Team(), late.Team()},
	} {
		if diff := cmp.Diff(check.want, check.got, opts...); diff != "" {
			t.Errorf("%s: live (-) and loaded late (+) differ:\n%s", check.what, diff)
		}
	}
	// And what they show is the team's state.
	want := []Member{{Name: store.LeadName, Status: store.StatusIdle},
		{Name: "alice", Role: "backend", Model: "m", Status: store.StatusWorking, Task: "1", Subject: "API", Tokens: 330, InputTokens: 300},
		{Name: "bob", Role: "frontend", Status: StatusDead}}
	if diff := cmp.Diff(want, late.Roster(), cmpOpts...); diff != "" {
		t.Errorf("roster loaded late (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"perm-1"}, ids(late.Pending(false))); diff != "" {
		t.Errorf("pending loaded late (-want +got):\n%s", diff)
	}
	if got := lines(late.Timeline(Filter{Types: []string{"from_a_newer_troupe"}})); len(got) != 1 {
		t.Errorf("the unknown line is not on the timeline: %q", got)
	}
}

// TestLoadFails: an unreadable store is an error naming the team.
func TestLoadFails(t *testing.T) {
	_, err := Load(context.Background(), brokenTeam{}, nil, Options{})
	if err == nil || err.Error() != "teamview: read journal of crew: disk gone" {
		t.Errorf("Load = %v", err)
	}
}

type brokenTeam struct{ store.Team }

func (brokenTeam) Name() string           { return "crew" }
func (brokenTeam) Journal() store.Journal { return brokenJournal{} }

type brokenJournal struct{ store.Journal }

func (brokenJournal) Read(context.Context) ([]store.Event, error) {
	return nil, errors.New("disk gone")
}

// TestApplyIgnoresStrangers: an input of a type the view does not know
// changes nothing.
func TestApplyIgnoresStrangers(t *testing.T) {
	v := New(Options{})
	if v.Apply(t0, "a string") || v.Apply(t0, nil) {
		t.Error("Apply accepted an unknown input")
	}
	if diff := cmp.Diff([]Member{{Name: store.LeadName, Status: store.StatusIdle}}, v.Roster(), cmpOpts...); diff != "" {
		t.Errorf("roster (-want +got):\n%s", diff)
	}
}

func toolErr(content string) *tool.Result { return &tool.Result{Content: content, IsError: true} }

// TestMemberCacheHitRatio: a roster row carries the member's input and
// cache-read tokens, for its hit ratio beside its tokens.
func TestMemberCacheHitRatio(t *testing.T) {
	tests := []struct {
		name  string
		calls []teamevent.Usage
		want  float64
	}{
		{name: "no calls", want: 0},
		{name: "first call writes", calls: []teamevent.Usage{{InputTokens: 100, CacheWriteTokens: 900}}, want: 0},
		{name: "second call reads", calls: []teamevent.Usage{
			{InputTokens: 100, CacheWriteTokens: 900},
			{InputTokens: 50, CacheReadTokens: 900, CacheWriteTokens: 50},
		}, want: 0.45},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := New(Options{})
			v.Apply(at(0), ev(t, "alice", 0, teamevent.Spawn{Member: "alice"}))
			for i, u := range tt.calls {
				u.AgentName, u.Model = "alice", "m"
				v.Apply(at(i+1), ev(t, "alice", i+1, u))
			}
			a, ok := v.Member("alice")
			if !ok {
				t.Fatal("alice is not on the roster")
			}
			if got := a.CacheHitRatio(); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("hit ratio = %v (%d read of %d input), want %v", got, a.CacheReadTokens, a.InputTokens, tt.want)
			}
		})
	}
}

// TestMergeQueue: the merge queue is read from the tasks' metadata "merge"
// of a snapshot (as the store gives it back: maps and lists of any), in
// completion order; tasks without a record, and records that cannot be
// read, are left out; a later snapshot replaces it.
func TestMergeQueue(t *testing.T) {
	v := New(Options{})
	rec := func(status string, s int, extra map[string]any) map[string]any {
		m := map[string]any{"owner": "bob", "branch": "troupe/crew/bob", "status": status, "at": at(s).Format(time.RFC3339Nano)}
		for k, x := range extra {
			m[k] = x
		}
		return map[string]any{"merge": m}
	}
	v.Apply(at(0), Snapshot{Roster: &store.Roster{Name: "crew"}, Tasks: []store.Task{
		{ID: "1", Subject: "API", Status: store.TaskCompleted, Metadata: rec("merged", 20, map[string]any{"how": "fast-forward", "commit": "abc123"})},
		{ID: "2", Subject: "UI", Status: store.TaskInProgress, Metadata: rec("conflict", 30, map[string]any{"conflicts": []any{map[string]any{"file": "a.txt", "hunks": []any{}}}})},
		{ID: "3", Subject: "Docs", Status: store.TaskCompleted, Metadata: rec("queued", 10, nil)},
		{ID: "4", Subject: "plain", Status: store.TaskPending},
		{ID: "5", Subject: "bad", Status: store.TaskCompleted, Metadata: map[string]any{"merge": "not a record"}},
	}})
	want := []MergeEntry{
		{Task: "3", Subject: "Docs", Owner: "bob", Branch: "troupe/crew/bob", Status: "queued", At: at(10)},
		{Task: "1", Subject: "API", Owner: "bob", Branch: "troupe/crew/bob", Status: "merged", How: "fast-forward", Commit: "abc123", At: at(20)},
		{Task: "2", Subject: "UI", Owner: "bob", Branch: "troupe/crew/bob", Status: "conflict", Files: []string{"a.txt"}, At: at(30)},
	}
	if d := cmp.Diff(want, v.MergeQueue(), cmpopts.EquateEmpty()); d != "" {
		t.Errorf("MergeQueue (-want +got):\n%s", d)
	}
	v.Apply(at(1), Snapshot{Roster: &store.Roster{Name: "crew"}, Tasks: []store.Task{{ID: "1", Subject: "API", Status: store.TaskCompleted}}})
	if got := v.MergeQueue(); len(got) != 0 {
		t.Errorf("MergeQueue after a snapshot without records = %+v; want none", got)
	}
}
