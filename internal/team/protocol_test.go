package team_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
)

// TestPlanModeEnforced: a plan-mode teammate's write is refused by the
// runtime until the lead approves its plan; a rejection carries feedback and
// the teammate revises.
func TestPlanModeEnforced(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, mode option) {
		f := startMode(t, mode, `
rules:
  - agent: team-lead
    contains: "Plan first"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: careful}}
      - tool_use: {name: Task, input: {team_name: careful, name: planner, description: p, plan_mode_required: true, prompt: "Write notes.md."}}
  - agent: team-lead
    contains: "Revised: write notes.md with a title"
    regex: 'request_id="(plan-[^"]+)"'
    reply:
      - tool_use: {name: SendMessage, input: {type: plan_approval_response, recipient: planner, request_id: "${1}", approve: true}}
  - agent: team-lead
    contains: "Plan: write notes.md"
    regex: 'request_id="(plan-[^"]+)"'
    reply:
      - tool_use: {name: SendMessage, input: {type: plan_approval_response, recipient: planner, request_id: "${1}", approve: false, feedback: "Give it a title."}}
  - agent: team-lead
    contains: "notes.md is written"
    reply: [{text: "Done."}]
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
  - agent: planner
    contains: "Write notes.md."
    reply:
      - tool_use: {name: write_file, input: {path: notes.md, content: "too early"}}
      - tool_use: {name: bash, input: {command: "touch early"}}
  - agent: planner
    contains: "plan mode"
    reply:
      - tool_use: {name: SendMessage, input: {type: plan_approval_request, content: "Plan: write notes.md"}}
  - agent: planner
    contains: "Give it a title."
    reply:
      - tool_use: {name: SendMessage, input: {type: plan_approval_request, content: "Revised: write notes.md with a title"}}
  - agent: planner
    contains: 'approve="true"'
    reply:
      - tool_use: {name: write_file, input: {path: notes.md, content: "# Notes"}}
      - tool_use: {name: SendMessage, input: {recipient: team-lead, content: "notes.md is written"}}
  - agent: planner
    times: 0
    reply: [{text: "Waiting."}]
`)
		f.run("Plan first.")
		p := f.requests("planner")
		refused := lastUserTurn(t, p[1])
		if strings.Count(refused, "plan mode: this tool is refused") != 2 {
			t.Errorf("the early write and bash were not both refused: %s", refused)
		}
		if _, err := os.Stat(filepath.Join(f.ws, "early")); err == nil {
			t.Error("bash ran before the plan was approved")
		}
		data, err := os.ReadFile(filepath.Join(f.ws, "notes.md"))
		if err != nil || string(data) != "# Notes" {
			t.Errorf("notes.md = %q, %v", data, err)
		}
		all := strings.Join(p, "\n")
		if !strings.Contains(all, "Give it a title.") {
			t.Error("the rejection's feedback never reached the planner")
		}
		var answers []string
		for _, e := range f.journal() {
			if e.Type == "protocol" && e.Fields["kind"] == store.TypePlanApprovalResponse {
				answers = append(answers, jsonBool(e.Fields["approve"]))
			}
		}
		if strings.Join(answers, ",") != "false,true" {
			t.Errorf("plan answers in the journal = %v", answers)
		}
	})
}

// TestPermissionRequestAnsweredByLead: a teammate in default mode asks
// before bash; the request reaches the lead, whose answer lets the command
// run (and a denial stops the next one).
func TestPermissionRequestAnsweredByLead(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, mode option) {
		f := startMode(t, mode, `
rules:
  - agent: team-lead
    contains: "Careful work"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: asks}}
      - tool_use: {name: Task, input: {team_name: asks, name: cautious, description: c, permission_mode: default, prompt: "Create the marker files."}}
  - agent: team-lead
    contains: "touch denied"
    regex: 'request_id="(perm-[^"]+)"'
    reply:
      - tool_use: {name: SendMessage, input: {type: permission_response, recipient: cautious, request_id: "${1}", approve: false}}
  - agent: team-lead
    contains: "touch allowed"
    regex: 'request_id="(perm-[^"]+)"'
    reply:
      - tool_use: {name: SendMessage, input: {type: permission_response, recipient: cautious, request_id: "${1}", approve: true}}
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
  - agent: cautious
    contains: "Create the marker files."
    reply:
      - tool_use: {name: bash, input: {command: "touch allowed"}}
      - tool_use: {name: bash, input: {command: "touch denied"}}
  - agent: cautious
    times: 0
    reply: [{text: "Done."}]
`)
		f.run("Careful work.")
		if _, err := os.Stat(filepath.Join(f.ws, "allowed")); err != nil {
			t.Errorf("the approved command did not run: %v", err)
		}
		if _, err := os.Stat(filepath.Join(f.ws, "denied")); err == nil {
			t.Error("the denied command ran")
		}
		res := lastUserTurn(t, f.requests("cautious")[1])
		if !strings.Contains(res, "the lead denied permission") {
			t.Errorf("the denial did not reach the teammate: %s", res)
		}
		var decisions []string
		for _, e := range f.journal() {
			if e.Type == "permission" {
				decisions = append(decisions, e.Fields["tool"].(string)+"="+jsonBool(e.Fields["approve"]))
			}
		}
		if strings.Join(decisions, ",") != "bash=true,bash=false" {
			t.Errorf("permission decisions in the journal = %v", decisions)
		}
	})
}

// TestIdleTimeout: with idle_timeout a teammate with nothing to do exits on
// its own and tells the lead.
func TestIdleTimeout(t *testing.T) {
	t.Parallel()
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Short stint"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: brief}}
      - tool_use: {name: Task, input: {team_name: brief, name: temp, description: t, prompt: "Say hi."}}
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
  - agent: temp
    times: 0
    reply: [{text: "hi"}]
`, func(c *team.Config) { c.IdleTimeout = 50 * time.Millisecond })
	f.run("Short stint.")
	m, _ := rosterMember(f.roster(), "temp")
	if m.Status == store.StatusWorking {
		t.Fatalf("temp is still working")
	}
	// The run ends once temp is idle with nothing to do; its timeout may
	// fire after. Wait for it on the roster, bounded.
	deadline := time.Now().Add(10 * time.Second)
	for m.Status != store.StatusShutdown && time.Now().Before(deadline) {
		tm, _ := f.st.Team(t.Context(), "brief")
		ch, _ := tm.Mailbox().Watch(t.Context(), store.LeadName)
		select {
		case <-ch:
		case <-time.After(time.Until(deadline)):
		}
		m, _ = rosterMember(f.roster(), "temp")
	}
	if m.Status != store.StatusShutdown {
		t.Errorf("temp is %s, want shutdown after its idle timeout", m.Status)
	}
	found := false
	for _, e := range f.journal() {
		if e.Type == "idle_timeout" && e.Fields["member"] == "temp" {
			found = true
		}
	}
	if !found {
		t.Error("no idle_timeout in the journal")
	}
}

// TestAssignmentReachesOwner: TaskUpdate with an owner puts a
// task_assignment in that member's inbox, and the member works the task.
func TestAssignmentReachesOwner(t *testing.T) {
	t.Parallel()
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Assign it"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: assign}}
      - tool_use: {name: Task, input: {team_name: assign, name: ann, description: a, prompt: "Wait for work."}}
      - tool_use: {name: TaskCreate, input: {subject: "Write notes", role: nobody}}
      - tool_use: {name: TaskUpdate, input: {taskId: "1", owner: ann, status: in_progress}}
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
  - agent: ann
    contains: 'type="task_assignment"'
    reply:
      - tool_use: {name: write_file, input: {path: notes.md, content: "# Notes"}}
      - tool_use: {name: TaskUpdate, input: {taskId: "1", status: completed}}
  - agent: ann
    times: 0
    reply: [{text: "done"}]
`)
	f.run("Assign it.")
	all := strings.Join(f.requests("ann"), "\n")
	if !strings.Contains(all, `type=\"task_assignment\"`) || !strings.Contains(all, "You were assigned task #1: Write notes") {
		t.Fatalf("ann never got the assignment")
	}
	if _, err := os.Stat(filepath.Join(f.ws, "notes.md")); err != nil {
		t.Error(err)
	}
	var done bool
	for _, e := range f.journal() {
		if e.Type == "complete" && e.Fields["task"] == "1" {
			done = true
		}
	}
	if !done {
		t.Error("the assigned task was never completed")
	}
}
