package tui

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestMain(m *testing.M) {
	time.Local = time.UTC // timelines show local time
	goleak.VerifyTestMain(m)
}

var t0 = time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC)

// fakeCtl records what the UI asks.
type fakeCtl struct {
	mu    sync.Mutex
	calls []string
	busy  bool
	snap  Snapshot
}

func (c *fakeCtl) log(s string)       { c.mu.Lock(); c.calls = append(c.calls, s); c.mu.Unlock() }
func (c *fakeCtl) Submit(text string) { c.log("submit " + text) }
func (c *fakeCtl) Interrupt() bool {
	c.log("interrupt")
	return c.busy
}
func (c *fakeCtl) Compact(focus string) { c.log("compact " + focus) }
func (c *fakeCtl) Send(_ context.Context, to, text string) error {
	c.log("send " + to + " " + text)
	return nil
}
func (c *fakeCtl) Answer(_ context.Context, id string, approve bool, feedback string) error {
	c.log("answer " + id + " " + map[bool]string{true: "yes", false: "no"}[approve] + " " + feedback)
	return nil
}
func (c *fakeCtl) Snapshot(context.Context) (Snapshot, error) { c.log("snapshot"); return c.snap, nil }
func (c *fakeCtl) Inbox(_ context.Context, name string) ([]store.Message, error) {
	c.log("inbox " + name)
	return []store.Message{{From: "alice", To: name, Type: store.TypeMessage, Content: "Are the fixtures in testdata/?", Timestamp: t0.Add(90 * time.Second)}}, nil
}

// clock is a settable Now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTest(t *testing.T, opts Options) (*Model, *clock, *fakeCtl) {
	t.Helper()
	clk := &clock{t: t0}
	ctl := &fakeCtl{}
	if opts.Controller == nil && !opts.Demo {
		opts.Controller = ctl
	}
	opts.Now = clk.now
	return New(opts), clk, ctl
}

func send(m *Model, msgs ...tea.Msg) {
	for _, msg := range msgs {
		m.Update(msg)
	}
}

func ev(typ, agentName string, fields map[string]any, at time.Time) TeamMsg {
	return TeamMsg(store.Event{TS: at, Type: typ, Team: "blog", Agent: agentName, Fields: fields})
}

func usage(agentName string, in, out int64) AgentMsg {
	return AgentMsg(agent.Event{Type: agent.EventUsage, Agent: agentName, Usage: &llm.Usage{InputTokens: in, OutputTokens: out}})
}

// usageCached is a call that read cached of its input from the prompt
// cache.
func usageCached(agentName string, in, cached, out int64) AgentMsg {
	return AgentMsg(agent.Event{Type: agent.EventUsage, Agent: agentName, Usage: &llm.Usage{InputTokens: in, CacheReadTokens: cached, OutputTokens: out}})
}

func call(agentName, name, input string) AgentMsg {
	return AgentMsg(agent.Event{Type: agent.EventToolCall, Agent: agentName, Call: &agent.Call{Name: name, Input: json.RawMessage(input)}})
}

// story feeds a model the first minutes of a team's work.
func story(m *Model, clk *clock) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	send(m, PromptMsg("Add pagination to the blog API and update the frontend."),
		UpdateMsg(team.Update{Kind: team.UpdateTurnStart, Why: "human"}))
	for _, chunk := range []string{"I'll split this ", "into **two tasks**:\n\n", "1. the API (`GET /posts?page=`)\n", "2. the frontend list\n"} {
		send(m, AgentMsg(agent.Event{Type: agent.EventText, Agent: store.LeadName, Text: chunk}))
	}
	send(m, usageCached(store.LeadName, 600, 2400, 400),
		call(store.LeadName, "TeamCreate", `{"team_name":"blog"}`),
		ev("team_create", store.LeadName, nil, at(2)),
		call(store.LeadName, "TaskCreate", `{"subject":"Paginate GET /posts"}`),
		ev("task_create", store.LeadName, map[string]any{"task": "1", "subject": "Paginate GET /posts", "blocked_by": []string{}}, at(3)),
		call(store.LeadName, "TaskCreate", `{"subject":"Page through posts in the frontend"}`),
		ev("task_create", store.LeadName, map[string]any{"task": "2", "subject": "Page through posts in the frontend", "blocked_by": []string{}}, at(3)),
		ev("task_update", store.LeadName, map[string]any{"task": "2", "status": "pending", "owner": "", "add_blocked_by": []string{"1"}}, at(4)),
		call(store.LeadName, "Task", `{"name":"alice","role":"backend"}`),
		ev("spawn", store.LeadName, map[string]any{"member": "alice", "role": "backend"}, at(5)),
		ev("status", "alice", map[string]any{"member": "alice", "status": "working"}, at(5)),
		call(store.LeadName, "Task", `{"name":"bob","role":"frontend"}`),
		ev("spawn", store.LeadName, map[string]any{"member": "bob", "role": "frontend"}, at(6)),
		ev("status", "bob", map[string]any{"member": "bob", "status": "working"}, at(6)),
		ev("claim", "alice", map[string]any{"task": "1", "owner": "alice", "subject": "Paginate GET /posts"}, at(7)),
		usage("alice", 5200, 800),
		call("alice", "bash", `{"command":"go test ./api/..."}`),
		ev("status", "bob", map[string]any{"member": "bob", "status": "idle"}, at(8)),
		ev("send", "alice", map[string]any{"msg_type": "message", "from": "alice", "to": "bob", "content": "The API takes ?page=N&per_page=M and returns a next link."}, at(20)),
		AgentMsg(agent.Event{Type: agent.EventMessage, Agent: store.LeadName, Message: &llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock("Alice has the API, Bob the frontend once it is done.")}}}),
		UpdateMsg(team.Update{Kind: team.UpdateTurnEnd, Text: "Alice has the API, Bob the frontend once it is done."}),
		UpdateMsg(team.Update{Kind: team.UpdateToLead, Messages: []store.Message{{From: "alice", Type: store.TypeMessage, Content: "Question: should page numbers start at 0 or 1?\n  (The old client assumes 1.)"}}}),
		UpdateMsg(team.Update{Kind: team.UpdateTurnStart, Why: "message from alice"}),
		call(store.LeadName, "SendMessage", `{"recipient":"alice","content":"Start at 1."}`),
		ev("status", "alice", map[string]any{"member": "alice", "status": "waiting"}, at(30)),
	)
	clk.t = t0.Add(42 * time.Second)
}

func checkGolden(t *testing.T, name string, m *Model) {
	t.Helper()
	screen := m.Render()
	lines := strings.Split(screen, "\n")
	if len(lines) != m.height {
		t.Errorf("%s: %d lines, want %d", name, len(lines), m.height)
	}
	for i, l := range lines {
		if w := ansi.StringWidth(l); w != m.width {
			t.Errorf("%s: line %d is %d cells wide, want %d: %q", name, i, w, m.width, ansi.Strip(l))
		}
	}
	got := ansi.Strip(screen) + "\n"
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/tui -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs from %s (-want +got):\n%s", name, path, diff)
	}
}

var sizes = [][2]int{{80, 24}, {120, 40}}

func TestGolden(t *testing.T) {
	cases := []struct {
		name  string
		demo  bool
		setup func(*Model, *clock)
	}{
		{"empty", false, func(*Model, *clock) {}},
		{"chat", false, story},
		{"tasks", false, func(m *Model, c *clock) { story(m, c); m.setView(viewTasks) }},
		{"team", false, func(m *Model, c *clock) { story(m, c); m.setView(viewTeam) }},
		{"merge_queue", false, func(m *Model, c *clock) { story(m, c); mergeSnapshot(m); m.setView(viewTasks) }},
		{"help", false, func(m *Model, c *clock) { story(m, c); m.command("/help") }},
		{"permission", false, func(m *Model, c *clock) {
			story(m, c)
			send(m, RequestMsg(store.Message{Type: store.TypePermissionRequest, From: "alice", RequestID: "perm-alice-1", ToolName: "bash",
				ToolInput: json.RawMessage(`{"command":"rm -rf build/"}`), Content: "alice asks to run bash"}),
				RequestMsg(store.Message{Type: store.TypePlanApprovalRequest, From: "bob", RequestID: "plan-1", Content: "1. Add a pager component\n2. Wire it to ?page="}))
		}},
		{"feedback", false, func(m *Model, c *clock) {
			story(m, c)
			send(m, RequestMsg(store.Message{Type: store.TypePlanApprovalRequest, From: "bob", RequestID: "plan-1", Content: "1. Add a pager component"}))
			m.key(tea.KeyPressMsg{Code: 'f', Text: "f"})
		}},
		{"demo_finished", true, func(m *Model, c *clock) {
			story(m, c)
			send(m, ev("complete", "alice", map[string]any{"task": "1", "status": "completed", "owner": "alice"}, t0.Add(50*time.Second)),
				ev("status", "alice", map[string]any{"member": "alice", "status": "shutdown"}, t0.Add(60*time.Second)),
				FinishedMsg{Summary: "2/2 tasks completed by 2 teammates, 7 messages, 31 model calls"})
		}},
	}
	for _, tc := range cases {
		for _, sz := range sizes {
			t.Run(tc.name, func(t *testing.T) {
				m, clk, _ := newTest(t, Options{Demo: tc.demo})
				send(m, tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
				tc.setup(m, clk)
				m.layout()
				checkGolden(t, tc.name+"_"+sizeName(sz), m)
			})
		}
	}
}

// lastEntry is the last entry of the conversation.
func lastEntry(m *Model) entry {
	es := m.entries()
	if len(es) == 0 {
		return entry{kind: -1}
	}
	return es[len(es)-1]
}

func sizeName(sz [2]int) string { return fmt.Sprintf("%dx%d", sz[0], sz[1]) }

// press sends a key and runs the command it returns, if any (one level:
// the UI's own commands answer at once).
func press(m *Model, k tea.KeyPressMsg) {
	_, cmd := m.Update(k)
	if cmd == nil {
		return
	}
	if msg := cmd(); msg != nil {
		if _, batch := msg.(tea.BatchMsg); !batch {
			m.Update(msg)
		}
	}
}

var enter = tea.KeyPressMsg{Code: tea.KeyEnter}

func typeLine(m *Model, s string) {
	m.input.SetValue(s)
	press(m, enter)
}

func TestInput(t *testing.T) {
	m, _, ctl := newTest(t, Options{})
	typeLine(m, "Build the thing")
	typeLine(m, "@alice check the tests too")
	typeLine(m, "/compact keep the API decisions")
	typeLine(m, "/tasks")
	if m.view != viewTasks {
		t.Errorf("view after /tasks = %v", viewNames[m.view])
	}
	typeLine(m, "/inbox alice")
	if m.view != viewInbox || len(m.inbox) != 1 {
		t.Errorf("/inbox alice: view %v, %d messages", viewNames[m.view], len(m.inbox))
	}
	press(m, tea.KeyPressMsg{Code: tea.KeyEscape})
	if m.view != viewChat {
		t.Errorf("Esc left the view at %v", viewNames[m.view])
	}
	typeLine(m, "   ")
	typeLine(m, "/nonsense")
	if last := lastEntry(m); last.kind != entryError || !strings.Contains(last.text, "/help") {
		t.Errorf("unknown command gave %+v", last)
	}
	want := []string{
		"submit Build the thing",
		"send alice check the tests too",
		"compact keep the API decisions",
		"snapshot",
		"inbox alice",
	}
	if diff := cmp.Diff(want, ctl.calls); diff != "" {
		t.Errorf("controller calls (-want +got):\n%s", diff)
	}
	if m.quitting {
		t.Fatal("quitting before /quit")
	}
	typeLine(m, "/quit")
	if !m.quitting {
		t.Error("/quit did not quit")
	}
}

func TestInterruptAndApprovals(t *testing.T) {
	m, _, ctl := newTest(t, Options{})
	send(m, UpdateMsg(team.Update{Kind: team.UpdateTurnStart}))
	ctl.busy = true
	press(m, tea.KeyPressMsg{Code: tea.KeyEscape})
	send(m, UpdateMsg(team.Update{Kind: team.UpdateTurnEnd, Interrupted: true}))
	if m.busy() {
		t.Error("still busy after the interrupted turn ended")
	}
	send(m,
		RequestMsg(store.Message{Type: store.TypePermissionRequest, From: "alice", RequestID: "perm-1", ToolName: "bash"}),
		RequestMsg(store.Message{Type: store.TypePlanApprovalRequest, From: "bob", RequestID: "plan-1", Content: "the plan"}),
		RequestMsg(store.Message{Type: store.TypePermissionRequest, From: "carol", RequestID: "perm-2", ToolName: "write_file"}))
	press(m, tea.KeyPressMsg{Code: 'x', Text: "x"}) // ignored while a request waits
	press(m, tea.KeyPressMsg{Code: 'y', Text: "y"})
	press(m, tea.KeyPressMsg{Code: 'f', Text: "f"})
	m.input.SetValue("add error handling")
	press(m, enter)
	press(m, tea.KeyPressMsg{Code: 'n', Text: "n"})
	if len(m.requests()) != 0 {
		t.Errorf("%d requests left", len(m.requests()))
	}
	want := []string{"interrupt", "answer perm-1 yes ", "answer plan-1 no add error handling", "answer perm-2 no "}
	if diff := cmp.Diff(want, ctl.calls); diff != "" {
		t.Errorf("controller calls (-want +got):\n%s", diff)
	}
}

// TestVerbatim: what a teammate tells the lead is shown as sent, once,
// whether it came while the lead waited or at one of its tool boundaries
// (delivered as typed messages, never read back from the prompt's text).
func TestVerbatim(t *testing.T) {
	m, _, _ := newTest(t, Options{})
	text := "Line one.\n    indented: keep me\n\nlast *not markdown*"
	fromBob := store.Message{ID: "m-2", From: "bob", Type: store.TypeMessage, Content: text}
	send(m, UpdateMsg(team.Update{Kind: team.UpdateToLead, Messages: []store.Message{{From: "alice", Type: store.TypeMessage, Content: text}}}),
		DeliveredMsg{Agent: store.LeadName, At: "tool_boundary", Messages: []store.Message{fromBob}},
		// The same message reported twice (by the driver and by the
		// team's OnDelivered) is shown once.
		UpdateMsg(team.Update{Kind: team.UpdateToLead, Messages: []store.Message{fromBob}}),
		// A teammate's deliveries are its own transcript's, not the chat's.
		DeliveredMsg{Agent: "bob", At: "idle", Messages: []store.Message{{ID: "m-3", From: "alice", Type: store.TypeMessage, Content: "for bob"}}},
		// The prompt text of a delivery is not read any more.
		AgentMsg(agent.Event{Type: agent.EventDelivered, Agent: store.LeadName, Blocks: []llm.Block{
			llm.TextBlock(`<teammate-message from="carol" type="message">not shown</teammate-message>`)}}))
	var got []string
	for _, e := range m.entries() {
		if e.kind == entryFromTeam {
			got = append(got, e.who+": "+e.text)
		}
	}
	want := []string{"alice: " + text, "bob: " + text}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages to the lead (-want +got):\n%s", diff)
	}
	screen := ansi.Strip(m.Render())
	if !strings.Contains(screen, "│     indented: keep me") || !strings.Contains(screen, "last *not markdown*") {
		t.Errorf("the message was not shown verbatim:\n%s", screen)
	}
}

func TestSnapshotDead(t *testing.T) {
	m, _, _ := newTest(t, Options{})
	send(m, snapshotMsg{snap: Snapshot{
		Roster: &store.Roster{Name: "blog", Members: []store.Member{
			{Name: "alice", Role: "backend", Status: store.StatusWorking},
			{Name: "bob", Status: store.StatusShutdown},
		}},
		Tasks:   []store.Task{{ID: "1", Subject: "x", Status: store.TaskInProgress, Owner: "alice"}},
		Running: map[string]bool{},
	}})
	if got, _ := m.team.Member("alice"); got.Status != "dead" {
		t.Errorf("alice is %s, want dead (not running, not shut down)", got.Status)
	}
	if got, _ := m.team.Member("bob"); got.Status != store.StatusShutdown {
		t.Errorf("bob is %s", got.Status)
	}
}

func TestToolLine(t *testing.T) {
	for in, want := range map[string]string{
		`{"command":"go test ./..."}`: "bash go test ./...",
		`{"recipient":"bob"}`:         "bash → bob",
		`{}`:                          "bash",
		`not json`:                    "bash",
	} {
		if got := toolLine("bash", json.RawMessage(in)); got != want {
			t.Errorf("toolLine(%s) = %q, want %q", in, got, want)
		}
	}
}

// modeCtl is a controller that can switch the lead's mode.
type modeCtl struct {
	fakeCtl
	set  []string
	fail bool
}

func (c *modeCtl) SetPermissionMode(mode string) error {
	if c.fail {
		return errors.New("team: cannot switch")
	}
	c.set = append(c.set, mode)
	return nil
}

// Shift+Tab cycles the lead's mode as Claude Code does, bypassPermissions
// only for a session that started in it, and the status line always shows
// the mode in force.
func TestShiftTabCyclesPermissionMode(t *testing.T) {
	shiftTab := tea.KeyPressMsg{Code: tea.KeyTab, Mod: tea.ModShift}
	for _, tc := range []struct {
		start   string
		presses int
		want    []string
	}{
		{"", 4, []string{"acceptEdits", "plan", "default", "acceptEdits"}},
		{"plan", 1, []string{"default"}},
		{"bypassPermissions", 5, []string{"default", "acceptEdits", "plan", "bypassPermissions", "default"}},
		{"delegate", 2, nil},
	} {
		t.Run(tc.start, func(t *testing.T) {
			ctl := &modeCtl{}
			m, _, _ := newTest(t, Options{Controller: ctl, PermissionMode: tc.start})
			shown := tc.start
			if shown == "" {
				shown = "default"
			}
			if !strings.Contains(m.statusLine(), shown) {
				t.Fatalf("status line %q does not show the mode %s", m.statusLine(), shown)
			}
			for range tc.presses {
				send(m, shiftTab)
			}
			if diff := cmp.Diff(tc.want, ctl.set); diff != "" {
				t.Errorf("modes set (-want +got):\n%s", diff)
			}
			if len(tc.want) > 0 {
				shown = tc.want[len(tc.want)-1]
			}
			if !strings.Contains(m.statusLine(), shown) {
				t.Errorf("status line %q does not show the mode %s", m.statusLine(), shown)
			}
		})
	}
}

// A refused switch keeps the mode shown and says why.
func TestShiftTabRefused(t *testing.T) {
	ctl := &modeCtl{fail: true}
	m, _, _ := newTest(t, Options{Controller: ctl})
	send(m, tea.KeyPressMsg{Code: tea.KeyTab, Mod: tea.ModShift})
	if !strings.Contains(m.statusLine(), "mode default") {
		t.Errorf("status line %q: want mode default kept", m.statusLine())
	}
	if !strings.Contains(m.Render(), "cannot switch") {
		t.Errorf("the refusal is not shown:\n%s", m.Render())
	}
}

// TestWarningShown: a change to the files that configure the agents, made
// during the session, is put on the screen for the human to review.
func TestWarningShown(t *testing.T) {
	m, _, _ := newTest(t, Options{})
	text := "/w/.claude/settings.json was changed by a bash command; the change is not applied to this session. Review it."
	send(m, UpdateMsg(team.Update{Kind: team.UpdateWarning, Text: text}))
	screen := ansi.Strip(m.Render())
	if !strings.Contains(screen, "✗ /w/.claude/settings.json was changed by a bash") {
		t.Errorf("the warning is not on the screen:\n%s", screen)
	}
}

// TestCorruptTaskOnBoard: a task whose file cannot be read is shown on the
// board as corrupt, with its file and what is wrong.
func TestCorruptTaskOnBoard(t *testing.T) {
	m, _, _ := newTest(t, Options{})
	send(m, snapshotMsg{snap: Snapshot{
		Roster:  &store.Roster{Name: "crew"},
		Tasks:   []store.Task{{ID: "1", Subject: "fine", Status: store.TaskPending}},
		Corrupt: []store.Corrupt{{ID: "2", Path: "/w/.troupe/teams/crew/tasks/2.json", Err: "unexpected end of JSON input"}},
	}})
	m.setView(viewTasks)
	m.layout()
	screen := ansi.Strip(m.Render())
	if !strings.Contains(screen, "✗ #2 corrupt: unexpected end of JSON input") {
		t.Errorf("the corrupt task is not on the board:\n%s", screen)
	}
}

// TestJournalAsReadFromDisk: journal lines read back from a file (lists as
// []any, numbers as float64) show as their in-process twins do.
func TestJournalAsReadFromDisk(t *testing.T) {
	m, _, _ := newTest(t, Options{})
	send(m, tea.WindowSizeMsg{Width: 120, Height: 40},
		ev("task_create", store.LeadName, map[string]any{"task": "1", "subject": "API"}, t0),
		ev("task_create", store.LeadName, map[string]any{"task": "2", "subject": "UI", "blocked_by": []any{}}, t0),
		ev("task_update", store.LeadName, map[string]any{"task": "2", "status": "pending", "owner": "", "add_blocked_by": []any{"1"}}, t0),
		ev("claim", "alice", map[string]any{"task": []any{"not a string"}}, t0), // skipped, not half-applied
	)
	m.setView(viewTasks)
	m.layout()
	screen := ansi.Strip(m.Render())
	if !strings.Contains(screen, "#2 UI") || !strings.Contains(screen, "waits for #1") {
		t.Errorf("the dependency read from disk is not on the board:\n%s", screen)
	}
	if strings.Contains(screen, "alice") {
		t.Errorf("a malformed claim was applied:\n%s", screen)
	}
}

// TestRequestAnsweredElsewhere: a request the journal says was answered
// (from another UI, or timed out) leaves the prompt.
func TestRequestAnsweredElsewhere(t *testing.T) {
	m, _, _ := newTest(t, Options{})
	send(m,
		RequestMsg(store.Message{Type: store.TypePermissionRequest, From: "alice", RequestID: "perm-1", ToolName: "bash"}),
		RequestMsg(store.Message{Type: store.TypePlanApprovalRequest, From: "bob", RequestID: "plan-1", Content: "the plan"}),
		ev("permission", "alice", map[string]any{"request_id": "perm-1", "member": "alice", "tool": "bash", "approve": false, "why": "no answer in time"}, t0))
	var got []string
	for _, p := range m.requests() {
		got = append(got, p.ID)
	}
	if diff := cmp.Diff([]string{"plan-1"}, got); diff != "" {
		t.Errorf("requests waiting (-want +got):\n%s", diff)
	}
}

// Once the team exists, Shift+Tab reaches delegate mode and goes on back
// to default; the status line shows the team's pattern, theme and the
// lead's character.
func TestShiftTabDelegateWithTeam(t *testing.T) {
	shiftTab := tea.KeyPressMsg{Code: tea.KeyTab, Mod: tea.ModShift}
	ctl := &modeCtl{}
	m, _, _ := newTest(t, Options{Controller: ctl, PermissionMode: "plan"})
	send(m, shiftTab) // no team: plan -> default, delegate is not offered
	send(m, snapshotMsg{snap: Snapshot{Roster: &store.Roster{Name: "t", Pattern: "fixed-theme", Theme: "orchard",
		Personas: []store.Persona{{Name: "Quince", Member: store.LeadName}}}}})
	send(m, shiftTab, shiftTab, shiftTab, shiftTab)
	if diff := cmp.Diff([]string{"default", "acceptEdits", "plan", "delegate", "default"}, ctl.set); diff != "" {
		t.Errorf("modes set (-want +got):\n%s", diff)
	}
	m.resize(200, 24)
	if line := m.statusLine(); !strings.Contains(line, "fixed-theme · theme orchard (lead: Quince)") {
		t.Errorf("status line %q does not show the team's rules", line)
	}
}

// TestQuitWhileWorking: quitting while members work asks first and says
// how to resume; quitting an idle team or a finished story does not ask.
func TestQuitWhileWorking(t *testing.T) {
	ctrlC := tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
	key := func(r rune) tea.KeyPressMsg { return tea.KeyPressMsg{Code: r, Text: string(r)} }
	working := []tea.Msg{
		ev("team_create", store.LeadName, map[string]any{}, t0),
		ev("spawn", store.LeadName, map[string]any{"member": "alice", "role": "backend"}, t0),
		ev("status", "alice", map[string]any{"member": "alice", "status": "working"}, t0),
	}
	idle := append(slices.Clone(working), ev("status", "alice", map[string]any{"member": "alice", "status": "idle"}, t0))
	leadTurn := []tea.Msg{PromptMsg("go"), AgentMsg(agent.Event{Type: agent.EventText, Agent: store.LeadName, Text: "Working on it"})}
	tests := []struct {
		name            string
		opts            Options
		before          []tea.Msg
		keys            []tea.Msg
		wantQuit        bool
		wantInterrupted bool
		wantNote        string // in the last note
	}{
		{name: "idle team quits at once", before: idle, keys: []tea.Msg{ctrlC}, wantQuit: true},
		{name: "working asks first", before: working, keys: []tea.Msg{ctrlC},
			wantNote: "alice still working. Quit now? They stop where they are. The team stays resumable: troupe resume blog. Press y to quit"},
		{name: "any other key stays", before: working, keys: []tea.Msg{ctrlC, key('n')}, wantNote: "Not quitting; the team carries on."},
		{name: "y quits, interrupted", before: working, keys: []tea.Msg{ctrlC, key('y')}, wantQuit: true, wantInterrupted: true},
		{name: "a second ctrl+c quits", before: working, keys: []tea.Msg{ctrlC, ctrlC}, wantQuit: true, wantInterrupted: true},
		{name: "/quit asks too", before: working, keys: []tea.Msg{typed("/quit"), enter, key('y')}, wantQuit: true, wantInterrupted: true},
		{name: "exact resume command", opts: Options{ResumeCommand: func(team string) string { return "troupe resume " + team + " --workspace /w" }},
			before: working, keys: []tea.Msg{ctrlC}, wantNote: "troupe resume blog --workspace /w."},
		{name: "demo: q while the lead works", opts: Options{Demo: true}, before: leadTurn, keys: []tea.Msg{key('q')},
			wantNote: "team-lead still working"},
		{name: "demo: q then y", opts: Options{Demo: true}, before: leadTurn, keys: []tea.Msg{key('q'), key('y')}, wantQuit: true, wantInterrupted: true},
		{name: "demo: finished quits at once", opts: Options{Demo: true}, before: append(slices.Clone(leadTurn), FinishedMsg{Summary: "done"}),
			keys: []tea.Msg{key('q')}, wantQuit: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _, _ := newTest(t, tt.opts)
			send(m, tt.before...)
			for _, k := range tt.keys {
				if s, ok := k.(typedMsg); ok {
					m.input.SetValue(string(s))
					continue
				}
				m.Update(k)
			}
			if m.quitting != tt.wantQuit || m.Interrupted() != tt.wantInterrupted {
				t.Errorf("quitting %v interrupted %v, want %v %v", m.quitting, m.Interrupted(), tt.wantQuit, tt.wantInterrupted)
			}
			if tt.wantNote != "" {
				if last := lastEntry(m); last.kind != entryNote || !strings.Contains(last.text, tt.wantNote) {
					t.Errorf("last entry %+v, want a note with %q", last, tt.wantNote)
				}
			}
			if tt.wantNote != "" && strings.Contains(tt.wantNote, "Quit now") {
				if r := ansi.Strip(m.Render()); !strings.Contains(r, "Quit while alice work?") {
					t.Errorf("the bottom does not ask:\n%s", r)
				}
			}
		})
	}
}

// typedMsg puts text in the input line (the test's own message).
type typedMsg string

func typed(s string) typedMsg { return typedMsg(s) }

// TestTeamResumedAndArchived: the chat says when the team came back, and
// once it is deleted that it finished, was archived and where its usage
// is; nobody works in an archived team.
func TestTeamResumedAndArchived(t *testing.T) {
	m, _, _ := newTest(t, Options{})
	send(m,
		HistoryMsg{
			store.Event{TS: t0, Type: "team_create", Team: "blog", Agent: store.LeadName, Fields: map[string]any{}},
			store.Event{TS: t0, Type: "spawn", Team: "blog", Agent: store.LeadName, Fields: map[string]any{"member": "alice", "role": "backend"}},
		},
		ev("resume", store.LeadName, map[string]any{"restarted": []string{"alice"}}, t0),
	)
	if got, want := lastEntry(m).text, "Team blog resumed: alice back with their conversations."; got != want {
		t.Errorf("after resume the chat says %q, want %q", got, want)
	}
	if _, ok := m.team.Member("alice"); !ok || m.Team() != "blog" {
		t.Errorf("the history did not rebuild the team: alice %v, team %q", ok, m.Team())
	}
	if n := len(m.entries()); n != 1 {
		t.Errorf("the history added %d entries to the chat, want only the resume note", n)
	}
	send(m, ev("team_delete", store.LeadName, map[string]any{"members": []string{"alice"}}, t0))
	want := "Team blog finished and was archived; its usage: troupe usage blog."
	if got := lastEntry(m).text; !strings.HasPrefix(got, want) {
		t.Errorf("after TeamDelete the chat says %q, want it to start %q", got, want)
	}
	if r := ansi.Strip(m.Render()); !strings.Contains(r, "team blog (archived)") || strings.Contains(r, "TeamCreate") {
		t.Errorf("the screen after TeamDelete:\n%s", r)
	}
	if m.Team() != "" {
		t.Errorf("Team() = %q after the team was archived", m.Team())
	}
}

// mergeSnapshot is the board of the story with teammates in worktrees:
// task 1 merged, task 2 back with bob after a conflict, task 3 queued.
func mergeSnapshot(m *Model) {
	rec := func(owner, status string, s int, extra map[string]any) map[string]any {
		r := map[string]any{"owner": owner, "branch": "troupe/blog/" + owner, "status": status, "at": t0.Add(time.Duration(s) * time.Second).Format(time.RFC3339Nano)}
		maps.Copy(r, extra)
		return map[string]any{"merge": r}
	}
	send(m, snapshotMsg{snap: Snapshot{
		Roster: &store.Roster{Name: "blog", Members: []store.Member{
			{Name: store.LeadName, Status: store.StatusIdle},
			{Name: "alice", Role: "backend", Status: store.StatusIdle, Worktree: "/w/.troupe/worktrees/blog/alice"},
			{Name: "bob", Role: "frontend", Status: store.StatusWorking, Worktree: "/w/.troupe/worktrees/blog/bob"},
		}},
		Tasks: []store.Task{
			{ID: "1", Subject: "Paginate GET /posts", Status: store.TaskCompleted, Owner: "alice",
				Metadata: rec("alice", "merged", 40, map[string]any{"how": "fast-forward", "commit": "1f2e3d4c5b6a"})},
			{ID: "2", Subject: "Page through posts in the frontend", Status: store.TaskInProgress, Owner: "bob",
				Metadata: rec("bob", "conflict", 50, map[string]any{"conflicts": []any{map[string]any{"file": "web/posts.js"}}})},
			{ID: "3", Subject: "Document the pager", Status: store.TaskCompleted, Owner: "alice", Metadata: rec("alice", "queued", 60, nil)},
		},
	}})
}
