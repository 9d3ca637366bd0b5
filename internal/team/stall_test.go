package team_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
)

// runEnd runs the goal headless and returns the result and error without
// failing on the error: these tests are about how runs end.
func (f *fixture) runEnd(goal string) (*team.Result, error) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := f.sess.RunHeadless(ctx, goal)
	if ctx.Err() != nil {
		f.t.Fatalf("the run did not end within 60s (it hung): %v", err)
	}
	return res, err
}

func (f *fixture) task(id string) store.Task {
	f.t.Helper()
	tm, err := f.st.Team(context.Background(), f.sess.TeamName())
	if err != nil {
		f.t.Fatal(err)
	}
	task, err := tm.Tasks().Get(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return task
}

// leadSaw reports whether any of the lead's requests contains s.
func (f *fixture) leadSaw(s string) bool {
	for _, b := range f.requests("team-lead") {
		if strings.Contains(b, s) {
			return true
		}
	}
	return false
}

// TestStallWithNoTeammate is the first hang of issue 15: the lead creates a
// task and spawns nobody. The team is stalled from the start; the lead gets
// one turn to fix it, then the run ends as stalled, saying why.
func TestStallWithNoTeammate(t *testing.T) {
	t.Parallel()
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Write the docs"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: solo}}
      - tool_use: {name: TaskCreate, input: {subject: "write the docs"}}
  - agent: team-lead
    contains: "The team is stalled"
    reply: [{text: "I will not fix it."}]
  - agent: team-lead
    reply: [{text: "Task created."}]
`)
	res, err := f.runEnd("Write the docs.")
	if !errors.Is(err, team.ErrStalled) {
		t.Fatalf("err = %v, want ErrStalled", err)
	}
	if res.End != team.EndStalled {
		t.Errorf("End = %q, want %q", res.End, team.EndStalled)
	}
	if !strings.Contains(res.Why, "task #1 can be claimed by nobody: no teammate is on the team") {
		t.Errorf("Why = %q, want it to name task #1 and say nobody can claim it", res.Why)
	}
	if !f.leadSaw("The team is stalled") {
		t.Error("the lead was never given its turn to fix the stall")
	}
	if res.Stats.LeadModelTurns != 3 {
		t.Errorf("lead model turns = %d, want 3 (the work, its tool results, the one stall turn)", res.Stats.LeadModelTurns)
	}
}

// TestStallWithRoleNobodyHas is the second hang: a task is reserved for a
// role nobody has. Whether the teammate's idle notice lands during the
// lead's turn or after it, the run ends as stalled.
func TestStallWithRoleNobodyHas(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, mode option) {
		f := startMode(t, mode, `
rules:
  - agent: team-lead
    contains: "Design it"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: crew}}
      - tool_use: {name: TaskCreate, input: {subject: "draw the mockups", role: designer}}
      - tool_use: {name: Task, input: {team_name: crew, name: alice, role: backend, description: backend, prompt: "Stand by."}}
  - agent: team-lead
    contains: "The team is stalled"
    reply: [{text: "Nobody can draw."}]
  - agent: team-lead
    times: 0
    reply: [{text: "Started."}]
  - agent: alice
    times: 0
    reply: [{text: "Standing by."}]
`)
		res, err := f.runEnd("Design it.")
		if !errors.Is(err, team.ErrStalled) {
			t.Fatalf("err = %v, want ErrStalled", err)
		}
		if !strings.Contains(res.Why, `task #1 is reserved for role "designer", which no teammate has`) {
			t.Errorf("Why = %q", res.Why)
		}
		if f.task("1").Owner != "" {
			t.Errorf("task #1 owner = %q, want nobody", f.task("1").Owner)
		}
	})
}

// TestShutdownWithTaskInProgress is the third hang: a teammate approves a
// shutdown while it owns a task in progress, with another tool call after
// the approval in the same reply. The call is not run, the task goes back
// to the board (unowned, pending), the lead hears of it, and the run ends as
// stalled on that task instead of hanging.
func TestShutdownWithTaskInProgress(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, mode option) {
		f := startMode(t, mode, `
rules:
  - agent: team-lead
    contains: "Build it"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: crew}}
      - tool_use: {name: TaskCreate, input: {subject: "build the thing"}}
      - tool_use: {name: Task, input: {team_name: crew, name: bob, role: builder, description: builder, prompt: "Take task 1."}}
  - agent: team-lead
    contains: "took task 1"
    reply:
      - tool_use: {name: SendMessage, input: {type: shutdown_request, recipient: bob, content: "Stop now."}}
  - agent: team-lead
    contains: "The team is stalled"
    reply: [{text: "Leaving it."}]
  - agent: team-lead
    times: 0
    reply: [{text: "Ok."}]
  - agent: bob
    contains: "Take task 1."
    reply:
      - tool_use: {name: TaskUpdate, input: {taskId: "1", status: in_progress, owner: bob}}
      - tool_use: {name: SendMessage, input: {recipient: team-lead, content: "took task 1"}}
  - agent: bob
    regex: 'type="shutdown_request" request_id="([^"]+)"'
    times: 0
    reply:
      - tool_use: {name: SendMessage, input: {type: shutdown_response, request_id: "${1}", approve: true}}
      - tool_use: {name: write_file, input: {path: after-shutdown.txt, content: "must not be written"}}
  - agent: bob
    times: 0
    reply: [{text: "Working on it."}]
`, func(c *team.Config) { c.PermissionMode = team.PermBypass })
		res, err := f.runEnd("Build it.")
		if !errors.Is(err, team.ErrStalled) {
			t.Fatalf("err = %v, want ErrStalled", err)
		}
		if !strings.Contains(res.Why, "task #1") {
			t.Errorf("Why = %q, want it to name task #1", res.Why)
		}
		task := f.task("1")
		if task.Status != store.TaskPending || task.Owner != "" {
			t.Errorf("task #1 is %s owned by %q, want pending and unowned", task.Status, task.Owner)
		}
		if _, err := os.Stat(filepath.Join(f.ws, "after-shutdown.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the call after the approved shutdown ran (stat: %v)", err)
		}
		if !f.leadSaw("went back to the board") {
			t.Error("the lead was never told that task #1 went back to the board")
		}
		r := f.roster()
		if m, _ := r.Member("bob"); m == nil || m.Status != store.StatusShutdown {
			t.Errorf("bob = %+v, want shut down", m)
		}
	})
}

// TestUnfinishedTaskIsHandedBack: a teammate that keeps ending its turn with
// its task in progress claims nothing new; after MaxReminders reminders the
// task goes back to the board and the lead is told.
func TestUnfinishedTaskIsHandedBack(t *testing.T) {
	t.Parallel()
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Two tasks"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: crew}}
      - tool_use: {name: TaskCreate, input: {subject: "first"}}
      - tool_use: {name: TaskCreate, input: {subject: "second"}}
      - tool_use: {name: Task, input: {team_name: crew, name: idler, description: idler, prompt: "Work."}}
  - agent: team-lead
    contains: "The team is stalled"
    reply: [{text: "Giving up."}]
  - agent: team-lead
    times: 0
    reply: [{text: "Ok."}]
  - agent: idler
    times: 0
    reply: [{text: "I will get to it."}]
`)
	res, err := f.runEnd("Two tasks.")
	if !errors.Is(err, team.ErrStalled) {
		t.Fatalf("err = %v, want ErrStalled", err)
	}
	// The idler claimed #1, was reminded, gave it back, then claimed #2
	// (never #1 again) and gave that back too: never two at once.
	var claims, handBacks []string
	for _, e := range f.journal() {
		switch e.Type {
		case "claim":
			claims = append(claims, e.Fields["task"].(string))
		case "hand_back":
			handBacks = append(handBacks, e.Fields["task"].(string))
		}
	}
	if strings.Join(claims, ",") != "1,2" || strings.Join(handBacks, ",") != "1,2" {
		t.Errorf("claims %v, hand-backs %v; want 1,2 and 1,2", claims, handBacks)
	}
	reminders := 0
	for _, b := range f.requests("idler") {
		if strings.Contains(lastUserTurn(t, b), "Reminder ") {
			reminders++
		}
	}
	if reminders != 2*(team.MaxReminders-1) {
		t.Errorf("reminders = %d, want %d", reminders, 2*(team.MaxReminders-1))
	}
	if !f.leadSaw("went back to the board unowned") {
		t.Error("the lead was not told of the hand-back")
	}
	if !strings.Contains(res.Why, "task #1") || !strings.Contains(res.Why, "task #2") {
		t.Errorf("Why = %q", res.Why)
	}
}

// TestMessageToShutDownMember: a message to a member that has shut down is
// refused like one to an unknown name.
func TestMessageToShutDownMember(t *testing.T) {
	t.Parallel()
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Say bye"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: crew}}
      - tool_use: {name: Task, input: {team_name: crew, name: ann, description: a, prompt: "Stand by."}}
      - tool_use: {name: SendMessage, input: {type: shutdown_request, recipient: ann}}
  - agent: team-lead
    contains: "approves the shutdown"
    reply:
      - tool_use: {name: SendMessage, input: {recipient: ann, content: "are you there?"}}
  - agent: team-lead
    contains: "has shut down and reads no more messages"
    reply: [{text: "Ann is gone."}]
  - agent: team-lead
    times: 0
    reply: [{text: "Waiting."}]
  - agent: ann
    times: 0
    reply: [{text: "Standing by."}]
`)
	res, err := f.runEnd("Say bye.")
	if err != nil {
		t.Fatalf("err = %v", err)
	}
	if res.End != team.EndDone {
		t.Errorf("End = %q", res.End)
	}
	if !f.leadSaw("has shut down and reads no more messages") {
		t.Error("the message to ann, who had shut down, was not refused")
	}
}

// TestInteractiveReapsDeadTeammate: the terminal UI's wait reaps dead
// members as a headless run does: their tasks go back to the board and the
// lead is woken with the news.
func TestInteractiveReapsDeadTeammate(t *testing.T) {
	t.Parallel()
	f, d := drive(t, `
rules:
  - agent: team-lead
    contains: "Set up"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: crew}}
  - agent: team-lead
    contains: "ghost is dead"
    reply: [{text: "Noted."}]
  - agent: team-lead
    times: 0
    reply: [{text: "Ready."}]
`)
	d.it.Submit("Set up.")
	d.await(team.UpdateTurnEnd, nil)
	tm, err := f.st.Team(context.Background(), "crew")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The ghost joins alive and takes its task, and only then stops
	// beating: a lead that looked in between would reap it with nothing to
	// free.
	if _, err := tm.UpdateRoster(ctx, func(r *store.Roster) error {
		r.Members = append(r.Members, store.Member{Name: "ghost", Status: store.StatusWorking, HeartbeatAt: time.Now().UTC(), PID: 1 << 30})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	task, err := tm.Tasks().Create(ctx, store.Task{Subject: "haunt"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Tasks().Update(ctx, task.ID, func(x *store.Task) error {
		x.Owner, x.Status = "ghost", store.TaskInProgress
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	stale := time.Now().UTC().Add(-2 * team.Lease)
	if _, err := tm.UpdateRoster(ctx, func(r *store.Roster) error {
		m, _ := r.Member("ghost")
		m.HeartbeatAt = stale
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The roster has no watch: a board change makes the lead look now
	// rather than at its next liveness tick.
	if _, err := tm.Tasks().Update(ctx, task.ID, func(x *store.Task) error { x.Description = "boo"; return nil }); err != nil {
		t.Fatal(err)
	}
	d.await(team.UpdateTurnStart, func(u team.Update) bool { return u.Why == "a teammate died" })
	got, err := tm.Tasks().Get(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.TaskPending || got.Owner != "" {
		t.Errorf("the dead member's task is %s owned by %q, want pending and unowned", got.Status, got.Owner)
	}
}

// TestLeadGrantsOnlyWhatItMay: a lead may grant a teammate's asked call only
// when its own rules would let it run it; a lead in plan mode cannot grant
// a command.
func TestLeadGrantsOnlyWhatItMay(t *testing.T) {
	t.Parallel()
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Plan only"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: crew}}
      - tool_use: {name: Task, input: {team_name: crew, name: doer, description: d, permission_mode: default, prompt: "Make the marker."}}
  - agent: team-lead
    regex: 'type="permission_request"[^>]*request_id="([^"]+)"'
    reply:
      - tool_use: {name: SendMessage, input: {type: permission_response, request_id: "${1}", approve: true}}
  - agent: team-lead
    regex: 'you may not grant doer.s bash call[^"]*'
    reply:
      - tool_use: {name: SendMessage, input: {type: permission_response, request_id: "perm-doer-1", approve: false}}
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
  - agent: doer
    contains: "Make the marker."
    reply:
      - tool_use: {name: bash, input: {command: "echo x > marker"}}
  - agent: doer
    times: 0
    reply: [{text: "done"}]
`, func(c *team.Config) { c.PermissionMode = team.PermPlan })
	f.run("Plan only.")
	if _, err := os.Stat(filepath.Join(f.ws, "marker")); err == nil {
		t.Error("a lead in plan mode granted a command")
	}
	if !f.leadSaw("you may not grant doer") {
		t.Error("the lead's grant was not refused")
	}
}

// TestPlanWaitingForHumanIsNotStalled (issue 16): a teammate idle with its
// plan sent to the human (a human is attached and takes plan requests) is
// waiting for the human, not stalled: the run ends saying so.
func TestPlanWaitingForHumanIsNotStalled(t *testing.T) {
	t.Parallel()
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Plan it"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: plans}}
      - tool_use: {name: Task, input: {team_name: plans, name: planner, description: p, prompt: "Write notes.md.", plan_mode_required: true}}
  - agent: team-lead
    times: 0
    reply: [{text: "Waiting for the plan."}]
  - agent: planner
    contains: "Write notes.md."
    reply:
      - tool_use: {name: SendMessage, input: {type: plan_approval_request, content: "Plan: write notes.md"}}
  - agent: planner
    times: 0
    reply: [{text: "Waiting for approval."}]
`, func(c *team.Config) {
		c.HumanRequests = func(m store.Message) bool { return m.Type == store.TypePlanApprovalRequest }
	})
	res, _ := f.runEnd("Plan it.")
	if res == nil || res.End != team.EndWaitingHuman || !strings.Contains(res.Why, "planner") {
		t.Fatalf("run ended %+v; want %s naming planner", res, team.EndWaitingHuman)
	}
}
