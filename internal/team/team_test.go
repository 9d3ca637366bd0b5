package team_test

import (
	"context"
	"encoding/json"
	"github.com/troupe-dev/troupe/internal/racetest"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/troupe-dev/troupe/internal/llm/anthropic"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi/fakeapitest"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/store/file"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/teamkey"
	"github.com/troupe-dev/troupe/internal/tool"
)

func TestMain(m *testing.M) {
	racetest.QuickExit()
	if os.Getenv(agentEnv) != "" {
		os.Exit(runAgentProcess())
	}
	goleak.VerifyTestMain(m)
}

// fixture is one session against a scripted fake API.
type fixture struct {
	t     *testing.T
	srv   *fakeapi.Server
	sess  *team.Session
	state string
	ws    string
	st    *file.Store
	keys  *teamkey.Keys
}

// testPoll is the store's poll in the fixtures.
var testPoll = 50 * time.Millisecond

type option func(*team.Config)

func withMode(mode string) option { return func(c *team.Config) { c.TeammateMode = mode } }

// forModes runs a test with teammates in process and as processes: the
// same behaviour is expected of both.
func forModes(t *testing.T, test func(t *testing.T, mode option)) {
	for _, m := range []string{team.ModeInProcess, team.ModeProcess} {
		t.Run(m, func(t *testing.T) {
			t.Parallel()
			test(t, withMode(m))
		})
	}
}

// startMode is start with the teammate mode chosen by forModes.
func startMode(t *testing.T, mode option, script string, opts ...option) *fixture {
	t.Helper()
	return start(t, script, append(opts, mode)...)
}

func start(t *testing.T, script string, opts ...option) *fixture {
	t.Helper()
	return startOn(t, fakeapitest.StartTest(t, script), opts...)
}

// startOn is start against a fake API the test made (its own options).
func startOn(t *testing.T, srv *fakeapi.Server, opts ...option) *fixture {
	t.Helper()
	ws := t.TempDir()
	state := filepath.Join(ws, ".troupe")
	st, err := file.Open(state, file.Options{PollInterval: testPoll})
	if err != nil {
		t.Fatal(err)
	}
	w, err := tool.OpenWorkspace(ws)
	if err != nil {
		t.Fatal(err)
	}
	p, err := anthropic.New(anthropic.Config{APIKey: "test", BaseURL: srv.URL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	// Keys outside the workspace, as in real use: every test runs sealed.
	keys, err := teamkey.New(teamkey.Options{StateDir: state, Dir: filepath.Join(t.TempDir(), "keys")})
	if err != nil {
		t.Fatal(err)
	}
	// Bypass unless a test says otherwise: most scripts are about the team,
	// not permissions (the session itself defaults to the default mode).
	cfg := team.Config{Store: st, Provider: p, Workspace: w, Keys: keys}
	cfg.ShutdownWait, cfg.PermissionMode = 30*time.Second, team.PermBypass
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.TeammateMode == team.ModeProcess {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cfg.AgentCommand = []string{exe}
		cfg.AgentEnv = append(cfg.AgentEnv, agentEnv+"=1", "TROUPE_TEST_STATE="+state, "TROUPE_TEST_WS="+ws, "TROUPE_TEST_URL="+srv.URL())
	}
	sess, err := team.NewSession(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, srv: srv, sess: sess, state: state, ws: ws, st: st, keys: keys}
	t.Cleanup(func() {
		_ = sess.Close()
		_ = st.Close()
		_ = w.Close()
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	})
	return f
}

func (f *fixture) run(goal string) *team.Result {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := f.sess.RunHeadless(ctx, goal)
	if err != nil {
		f.t.Fatalf("RunHeadless: %v", err)
	}
	if n := f.srv.Unmatched(); n != 0 {
		f.t.Errorf("%d model calls matched no rule", n)
	}
	for _, r := range f.srv.Requests() {
		if r.Status != 200 {
			f.t.Errorf("call %d (%s) got status %d", r.N, r.Agent, r.Status)
		}
	}
	return res
}

// requests returns the bodies the given agent sent, in order.
func (f *fixture) requests(agent string) []string {
	var out []string
	for _, r := range f.srv.Requests() {
		if r.Agent == agent {
			out = append(out, string(r.Body))
		}
	}
	return out
}

// lastUserTurn returns the last message of a request body, as JSON text.
func lastUserTurn(t *testing.T, body string) string {
	t.Helper()
	var req struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	return string(req.Messages[len(req.Messages)-1])
}

func (f *fixture) journal() []store.Event {
	f.t.Helper()
	tm, err := f.st.Team(context.Background(), f.sess.TeamName())
	if err != nil {
		f.t.Fatal(err)
	}
	ev, err := tm.Journal().Read(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return ev
}

func (f *fixture) roster() store.Roster {
	f.t.Helper()
	tm, err := f.st.Team(context.Background(), f.sess.TeamName())
	if err != nil {
		f.t.Fatal(err)
	}
	r, err := tm.ReadRoster(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

const aliceBobScript = `
rules:
  - agent: team-lead
    contains: "Greet each other"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: pair}}
      - tool_use: {name: Task, input: {team_name: pair, name: alice, description: greeter, prompt: "Say hello to bob."}}
      - tool_use: {name: Task, input: {team_name: pair, name: bob, description: listener, prompt: "Wait for alice to greet you, then tell the lead."}}
  - agent: team-lead
    contains: "bob heard alice"
    reply: [{text: "Both teammates talked."}]
  - agent: team-lead
    contains: "Spawned teammate bob"
    reply: [{text: "Team started."}]
  - agent: alice
    contains: "Say hello to bob."
    reply:
      - tool_use: {name: SendMessage, input: {recipient: bob, content: "hello bob, this is alice", summary: greeting}}
  - agent: alice
    reply: [{text: "Greeted bob."}]
  - agent: bob
    contains: "hello bob, this is alice"
    reply:
      - tool_use: {name: SendMessage, input: {recipient: team-lead, content: "bob heard alice"}}
  - agent: bob
    contains: "Wait for alice"
    reply: [{text: "Waiting for alice."}]
  - agent: bob
    reply: [{text: "Told the lead."}]
`

// TestAliceMessagesBob is seed 000's first try-it case: spawn alice and bob
// and have alice message bob; bob tells the lead, whose inbox wakes it.
func TestAliceMessagesBob(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{team.ModeInProcess, team.ModeProcess} {
		t.Run(mode, func(t *testing.T) {
			f := start(t, aliceBobScript, withMode(mode))
			res := f.run("Greet each other.")
			if res.Text != "Both teammates talked." {
				t.Errorf("lead's last text = %q", res.Text)
			}
			bob := f.requests("bob")
			found := false
			for _, b := range bob {
				if strings.Contains(lastUserTurn(t, b), `\u003cteammate-message from=\"alice\" type=\"message\" summary=\"greeting\"\u003ehello bob, this is alice`) ||
					strings.Contains(lastUserTurn(t, b), `<teammate-message from=\"alice\" type=\"message\" summary=\"greeting\">hello bob, this is alice`) {
					found = true
				}
			}
			if !found {
				t.Errorf("bob never received alice's message; bob's turns:\n%s", strings.Join(bob, "\n"))
			}
			if res.Stats.LeadTurnsFromIdleOnly != 0 {
				t.Errorf("lead turns from idle notifications alone = %d", res.Stats.LeadTurnsFromIdleOnly)
			}
			if res.Stats.LeadModelTurns != 3 {
				t.Errorf("lead model turns = %d, want 3", res.Stats.LeadModelTurns)
			}
			r := f.roster()
			for _, m := range r.Members {
				if m.Status != store.StatusIdle {
					t.Errorf("%s is %s at the end, want idle", m.Name, m.Status)
				}
			}
			// Every state change of every member is in the journal.
			var statuses []string
			for _, e := range f.journal() {
				if e.Type == "status" && e.Fields["member"] == "alice" {
					statuses = append(statuses, e.Fields["status"].(string))
				}
			}
			if len(statuses) < 2 || statuses[0] != "working" || statuses[len(statuses)-1] != "idle" {
				t.Errorf("alice's statuses = %v", statuses)
			}
		})
	}
}

// TestBroadcastAndUnknownRecipient: a broadcast reaches every member but the
// sender; a message to a name not on the roster is refused with the list.
func TestBroadcastAndUnknownRecipient(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, mode option) {
		f := startMode(t, mode, `
rules:
  - agent: team-lead
    contains: "Status round"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: crew}}
      - tool_use: {name: Task, input: {team_name: crew, name: ann, description: a, prompt: "Stand by."}}
      - tool_use: {name: Task, input: {team_name: crew, name: ben, description: b, prompt: "Stand by."}}
      - tool_use: {name: SendMessage, input: {type: broadcast, content: "status: schema frozen"}}
      - tool_use: {name: SendMessage, input: {recipient: zed, content: "are you there?"}}
  - agent: team-lead
    reply: [{text: "Broadcast done."}]
  - agent: ann
    times: 0
    reply: [{text: "ok"}]
  - agent: ben
    times: 0
    reply: [{text: "ok"}]
`)
		f.run("Status round.")
		lead := f.requests("team-lead")
		last := lastUserTurn(t, lead[1])
		if !strings.Contains(last, "Broadcast sent to ann, ben.") {
			t.Errorf("broadcast result: %s", last)
		}
		if !strings.Contains(last, `unknown member \"zed\" in team crew (members: team-lead, ann, ben)`) {
			t.Errorf("unknown recipient result: %s", last)
		}
		for _, who := range []string{"ann", "ben"} {
			all := strings.Join(f.requests(who), "\n")
			if !strings.Contains(all, `type=\"broadcast\"`) || !strings.Contains(all, "status: schema frozen") {
				t.Errorf("%s did not get the broadcast", who)
			}
		}
		if strings.Contains(strings.Join(lead[1:], "\n"), `type=\"broadcast\"`) {
			t.Error("the sender received its own broadcast")
		}
	})
}

// TestManagementToolsRefused: a teammate has no management tools (they are
// not even offered), and delegate mode refuses the lead's bash.
func TestManagementToolsRefused(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, mode option) {
		f := startMode(t, mode, `
rules:
  - agent: team-lead
    contains: "Try it"
    reply:
      - tool_use: {name: bash, input: {command: "echo I should not run"}}
      - tool_use: {name: TeamCreate, input: {team_name: strict}}
      - tool_use: {name: Task, input: {team_name: strict, name: rogue, description: r, prompt: "Take over."}}
  - agent: team-lead
    reply: [{text: "ok"}]
  - agent: rogue
    contains: "Take over."
    reply:
      - tool_use: {name: TeamDelete, input: {force: true}}
      - tool_use: {name: Task, input: {team_name: strict, name: clone, description: c, prompt: "x"}}
  - agent: rogue
    reply: [{text: "I cannot."}]
`, func(c *team.Config) { c.Delegate = true })
		f.run("Try it.")
		lead := lastUserTurn(t, f.requests("team-lead")[1])
		if !strings.Contains(lead, "delegate mode") || strings.Contains(lead, "I should not run\\n") {
			t.Errorf("lead's bash was not refused: %s", lead)
		}
		rogue := f.requests("rogue")
		if strings.Contains(rogue[0], `"name":"TeamDelete"`) || strings.Contains(rogue[0], `"name":"Task"`) {
			t.Error("a teammate was offered a management tool")
		}
		last := lastUserTurn(t, rogue[1])
		if !strings.Contains(last, `unknown tool \"TeamDelete\"`) || !strings.Contains(last, `unknown tool \"Task\"`) {
			t.Errorf("rogue's management calls were not refused: %s", last)
		}
		if len(f.roster().Members) != 1 {
			t.Errorf("roster = %+v", f.roster().Members)
		}
	})
}

// TestMessageArrivesAtToolBoundary: a message sent while a teammate runs a
// long tool call reaches it with that call's result, not only when it goes
// idle.
func TestMessageArrivesAtToolBoundary(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, mode option) {
		f := startMode(t, mode, `
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
    reply: [{text: "sent"}]
  - agent: worker
    contains: "Run the long job."
    reply:
      - tool_use: {name: bash, input: {command: "touch started; until [ -f go ]; do sleep 0.01; done; echo long job finished"}}
  - agent: worker
    contains: "change of plan"
    reply: [{text: "Switching to 9090."}]
`)
		f.run("Interrupt the worker.")
		w := f.requests("worker")
		if len(w) != 2 {
			t.Fatalf("worker made %d calls, want 2", len(w))
		}
		turn := lastUserTurn(t, w[1])
		ri := strings.Index(turn, "long job finished")
		mi := strings.Index(turn, "change of plan: use port 9090")
		if ri < 0 || mi < 0 || mi < ri {
			t.Errorf("want the tool result then the message in one turn, got: %s", turn)
		}
		var at string
		for _, e := range f.journal() {
			if e.Type == "deliver" && e.Fields["member"] == "worker" && at == "" && len(e.Fields["ids"].([]any)) == 1 {
				if e.Fields["at"] == "tool_boundary" {
					at = "tool_boundary"
				}
			}
		}
		if at != "tool_boundary" {
			t.Error("no delivery at a tool boundary in the journal")
		}
	})
}

// TestShutdownRejectedThenApproved: a teammate with unfinished work refuses
// with a reason; once idle with nothing owned it approves at once, without a
// model call. The writer's tool waits for the file "asked", which the lead
// writes right after its request, so the request lands mid-task.
func TestShutdownRejectedThenApproved(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, mode option) {
		f := startMode(t, mode, `
rules:
  - agent: team-lead
    contains: "Shut down early"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: stop}}
      - tool_use: {name: TaskCreate, input: {subject: "Write the report"}}
      - tool_use: {name: Task, input: {team_name: stop, name: writer, description: w, prompt: "Work on the board."}}
      - tool_use: {name: bash, input: {command: "until [ -f claimed ]; do sleep 0.01; done; echo writer busy"}}
      - tool_use: {name: SendMessage, input: {type: shutdown_request, recipient: writer, content: "Please stop."}}
      - tool_use: {name: write_file, input: {path: asked, content: "yes"}}
  - agent: team-lead
    contains: "report is written"
    reply:
      - tool_use: {name: SendMessage, input: {type: shutdown_request, recipient: writer}}
  - agent: team-lead
    contains: "I need to finish task #1"
    times: 0
    reply: [{text: "Understood."}]
  - agent: team-lead
    contains: "approves the shutdown"
    reply: [{text: "Writer stopped."}]
  - agent: team-lead
    contains: "Shutdown request"
    times: 0
    reply: [{text: "Waiting for the answer."}]
  - agent: writer
    contains: "Work on the board."
    reply: [{text: "Ready."}]
  - agent: writer
    contains: "You claimed task #1"
    reply:
      - tool_use: {name: bash, input: {command: "touch claimed; until [ -f asked ]; do sleep 0.01; done; echo drafting"}}
  - agent: writer
    regex: 'type="shutdown_request" request_id="([^"]+)"'
    reply:
      - tool_use: {name: SendMessage, input: {type: shutdown_response, request_id: "${1}", approve: false, reason: "I need to finish task #1 first"}}
      - tool_use: {name: write_file, input: {path: report.md, content: "# Report"}}
      - tool_use: {name: TaskUpdate, input: {taskId: "1", status: completed}}
      - tool_use: {name: SendMessage, input: {recipient: team-lead, content: "The report is written."}}
  - agent: writer
    reply: [{text: "Done."}]
`)
		res := f.run("Shut down early.")
		if res.Text != "Writer stopped." {
			t.Errorf("lead's last text = %q", res.Text)
		}
		var protocol []string
		for _, e := range f.journal() {
			if e.Type == "protocol" && e.Fields["kind"] == "shutdown" {
				protocol = append(protocol, jsonBool(e.Fields["approve"]))
			}
		}
		if strings.Join(protocol, ",") != "false,true" {
			t.Errorf("shutdown answers in the journal = %v, want false then true", protocol)
		}
		m, _ := rosterMember(f.roster(), "writer")
		if m.Status != store.StatusShutdown {
			t.Errorf("writer is %s", m.Status)
		}
		if n := len(f.requests("writer")); n != 4 {
			t.Errorf("writer made %d model calls, want 4 (the approval costs none)", n)
		}
		if _, err := os.Stat(filepath.Join(f.ws, "report.md")); err != nil {
			t.Error(err)
		}
	})
}

func jsonBool(v any) string {
	if b, ok := v.(bool); ok && b {
		return "true"
	}
	return "false"
}

func rosterMember(r store.Roster, name string) (store.Member, bool) {
	m, ok := r.Member(name)
	if !ok {
		return store.Member{}, false
	}
	return *m, true
}
