package team_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
)

// driver runs an Interactive for one test and collects what it reports.
type driver struct {
	t        *testing.T
	f        *fixture
	it       *team.Interactive
	updates  chan team.Update
	requests chan store.Message
	events   chan store.Event
}

func drive(t *testing.T, script string, opts ...option) (*fixture, *driver) {
	t.Helper()
	d := &driver{t: t, updates: make(chan team.Update, 256), requests: make(chan store.Message, 16), events: make(chan store.Event, 1024)}
	opts = append(opts, func(c *team.Config) {
		c.HumanRequests = func(m store.Message) bool { d.requests <- m; return true }
		c.OnEvent = func(e store.Event) {
			select {
			case d.events <- e:
			default:
			}
		}
	})
	f := start(t, script, opts...)
	d.f = f
	d.it = team.NewInteractive(f.sess, func(u team.Update) { d.updates <- u })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.it.Run(ctx) }()
	// Registered after start's cleanup, so it runs first: the driver stops
	// before the session closes.
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	})
	return f, d
}

// await returns the first update of kind k that ok accepts (nil: any).
func (d *driver) await(k team.UpdateKind, ok func(team.Update) bool) team.Update {
	d.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case u := <-d.updates:
			if u.Kind == k && (ok == nil || ok(u)) {
				return u
			}
		case <-deadline:
			for _, e := range d.f.journal() {
				d.t.Logf("journal: %s %s %v", e.Agent, e.Type, e.Fields)
			}
			d.t.Fatalf("no %s update within 30s", k)
		}
	}
}

// awaitStatus waits for member's status to become status in the journal.
func (d *driver) awaitStatus(member, status string) {
	d.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e := <-d.events:
			if e.Type == "status" && e.Agent == member && e.Fields["status"] == status {
				return
			}
		case <-deadline:
			d.t.Fatalf("%s never became %s", member, status)
		}
	}
}

func (d *driver) request() store.Message {
	d.t.Helper()
	select {
	case m := <-d.requests:
		return m
	case <-time.After(30 * time.Second):
		d.t.Fatal("no request reached the human within 30s")
	}
	return store.Message{}
}

// TestInteractiveTeam: the human's goal starts the lead; a teammate's
// permission request goes to the human, whose answer lets it run; the
// teammate's message to the lead is reported verbatim and wakes the lead;
// the human's @message reaches the teammate.
func TestInteractiveTeam(t *testing.T) {
	t.Parallel()
	f, d := drive(t, `
rules:
  - agent: team-lead
    contains: "Build a team"
    reply:
      - text: "Creating the team."
      - tool_use: {name: TeamCreate, input: {team_name: live}}
      - tool_use: {name: Task, input: {team_name: live, name: alice, description: a, permission_mode: default, prompt: "Create the marker."}}
  - agent: team-lead
    contains: "marker is made"
    reply: [{text: "Alice made the marker."}]
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
  - agent: alice
    contains: "hello from the keyboard"
    reply: [{text: "Hello, human."}]
  - agent: alice
    contains: "Create the marker."
    reply:
      - tool_use: {name: bash, input: {command: "touch marker"}}
  - agent: alice
    contains: "(no output)"
    reply:
      - tool_use: {name: SendMessage, input: {recipient: team-lead, content: "The marker is made.\n  Exactly as asked."}}
  - agent: alice
    times: 0
    reply: [{text: "Done."}]
`)
	d.it.Submit("Build a team.")
	if u := d.await(team.UpdateTurnStart, nil); u.Why != "human" {
		t.Errorf("first turn woken by %q, want human", u.Why)
	}
	req := d.request()
	if req.Type != store.TypePermissionRequest || req.From != "alice" || req.ToolName != "bash" {
		t.Fatalf("request = %+v, want alice's permission request for bash", req)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "marker")); err == nil {
		t.Fatal("bash ran before the human answered")
	}
	// Member.askPermission starts watching its inbox only after it says it
	// is waiting; an answer sent before that would not wake it.
	d.awaitStatus("alice", team.StatusWaiting)
	if err := d.it.Answer(t.Context(), req.RequestID, true, ""); err != nil {
		t.Fatal(err)
	}
	got := d.await(team.UpdateToLead, nil)
	if len(got.Messages) != 1 || got.Messages[0].Content != "The marker is made.\n  Exactly as asked." {
		t.Errorf("to lead = %+v, want alice's message verbatim", got.Messages)
	}
	end := d.await(team.UpdateTurnEnd, func(u team.Update) bool { return u.Text == "Alice made the marker." })
	if end.Err != nil || end.Interrupted {
		t.Errorf("turn end = %+v", end)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "marker")); err != nil {
		t.Errorf("the approved command did not run: %v", err)
	}
	for _, body := range f.requests(store.LeadName) {
		if strings.Contains(body, "perm-") {
			t.Error("the lead's model saw the permission request that went to the human")
		}
	}

	if err := d.it.Send(t.Context(), "alice", "hello from the keyboard"); err != nil {
		t.Fatal(err)
	}
	if err := d.it.Send(t.Context(), "nobody", "hi"); err == nil || !strings.Contains(err.Error(), "alice") {
		t.Errorf("sending to an unknown member: %v, want an error listing alice", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(strings.Join(f.requests("alice"), "\n"), "hello from the keyboard") {
		if time.Now().After(deadline) {
			t.Fatal("the human's message never reached alice's model")
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
}

// TestInteractiveInterrupt: Interrupt stops the lead's turn and keeps the
// conversation; the next input carries on from it.
func TestInteractiveInterrupt(t *testing.T) {
	t.Parallel()
	f, d := drive(t, `
rules:
  - agent: team-lead
    contains: "Say hi"
    reply: [{text: "hi"}]
  - agent: team-lead
    contains: "Think slowly"
    latency: 60s
    reply: [{text: "too late"}]
`)
	if d.it.Interrupt() {
		t.Error("Interrupt with no turn in progress reported one")
	}
	d.it.Submit("Think slowly.")
	d.await(team.UpdateTurnStart, nil)
	if !d.it.Busy() || !d.it.Interrupt() {
		t.Fatal("no turn to interrupt")
	}
	end := d.await(team.UpdateTurnEnd, nil)
	if !end.Interrupted || end.Err != nil {
		t.Errorf("interrupted turn ended with %+v", end)
	}
	d.it.Submit("Say hi.")
	if end := d.await(team.UpdateTurnEnd, nil); end.Text != "hi" || end.Err != nil {
		t.Errorf("next turn = %+v", end)
	}
	bodies := f.requests(store.LeadName)
	last := lastUserTurn(t, bodies[len(bodies)-1])
	for _, want := range []string{"Think slowly.", "interrupted your previous turn", "Say hi."} {
		if !strings.Contains(last, want) {
			t.Errorf("the turn after the interrupt lost %q: %s", want, last)
		}
	}
}

// TestInteractiveCompact: /compact replaces the lead's conversation with
// its summary, between turns.
func TestInteractiveCompact(t *testing.T) {
	t.Parallel()
	f, d := drive(t, `
rules:
  - agent: team-lead
    contains: "context window is nearly full"
    reply: [{text: "Summary: the code word is pelican."}]
  - agent: team-lead
    contains: "pelican"
    reply: [{text: "Noted."}]
`)
	d.it.Submit("The code word is pelican.")
	d.await(team.UpdateTurnEnd, nil)
	d.it.Compact("")
	if u := d.await(team.UpdateCompacted, nil); u.Err != nil {
		t.Fatalf("compact: %v", u.Err)
	}
	var text []string
	for _, m := range f.sess.Lead().Messages() {
		text = append(text, m.Text())
	}
	all := strings.Join(text, "\n")
	if !strings.Contains(all, "Summary: the code word is pelican.") || strings.Contains(all, "Noted.") {
		t.Errorf("conversation after /compact:\n%s", all)
	}
}

// TestOnDelivered: the messages handed to each model reach
// Config.OnDelivered as they were sent, with where: the teammate's prompt
// wakes it (idle), the lead's message arrives during its long tool call
// (tool_boundary), and the teammate's report wakes the lead (idle).
func TestOnDelivered(t *testing.T) {
	t.Parallel()
	type got struct{ Agent, From, Content, At string }
	var mu sync.Mutex
	var seen []got
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Interrupt"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: busy}}
      - tool_use: {name: Task, input: {team_name: busy, name: worker, description: w, prompt: "Run the long job."}}
      - tool_use: {name: bash, input: {command: "until [ -f started ]; do sleep 0.01; done; echo worker started"}}
      - tool_use: {name: SendMessage, input: {recipient: worker, content: "change of plan: use port 9090"}}
      - tool_use: {name: write_file, input: {path: go, content: "go"}}
  - agent: team-lead
    contains: "now on 9090"
    reply: [{text: "good"}]
  - agent: team-lead
    reply: [{text: "sent"}]
  - agent: worker
    contains: "Run the long job."
    reply:
      - tool_use: {name: bash, input: {command: "touch started; until [ -f go ]; do sleep 0.01; done; echo long job finished"}}
  - agent: worker
    contains: "change of plan"
    reply:
      - tool_use: {name: SendMessage, input: {recipient: team-lead, content: "now on 9090"}}
  - agent: worker
    reply: [{text: "Switched."}]
`, func(c *team.Config) {
		c.PermissionMode = team.PermBypass
		c.OnDelivered = func(agent string, msgs []store.Message, at string) {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				if m.Type == store.TypeIdleNotification {
					continue // when they reach the lead depends on timing
				}
				seen = append(seen, got{agent, m.From, m.Content, at})
			}
		}
	})
	f.run("Interrupt the worker.")
	want := []got{
		{"worker", store.LeadName, "Run the long job.", team.AtIdle},
		{"worker", store.LeadName, "change of plan: use port 9090", team.AtToolBoundary},
		{store.LeadName, "worker", "now on 9090", team.AtIdle},
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("OnDelivered (-want +got):\n%s", diff)
	}
}
