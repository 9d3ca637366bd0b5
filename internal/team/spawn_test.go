package team_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/store"
)

// TestSpawnsOfOneMessage: the Task calls of one message spawn their
// teammates together, in the calls' order: they join the roster in that
// order, their spawn events are journaled in that order and each before
// anything its teammate does, and each gets its prompt. A call that cannot
// spawn (a name taken by an earlier call of the same message, a bad
// permission mode) fails alone.
func TestSpawnsOfOneMessage(t *testing.T) {
	forModes(t, func(t *testing.T, mode option) {
		f := startMode(t, mode, `
rules:
  - agent: team-lead
    contains: "Staff it"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: many}}
      - tool_use: {name: Task, input: {team_name: many, name: cleo, description: c, prompt: "Prompt of cleo."}}
      - tool_use: {name: Task, input: {team_name: many, name: abel, description: a, prompt: "Prompt of abel."}}
      - tool_use: {name: Task, input: {team_name: many, name: cleo, description: again, prompt: "Prompt of the second cleo."}}
      - tool_use: {name: Task, input: {team_name: many, name: dora, permission_mode: nonsense, description: d, prompt: "Prompt of dora."}}
      - tool_use: {name: Task, input: {team_name: many, name: bert, description: b, prompt: "Prompt of bert."}}
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
  - times: 0
    reply: [{text: "hello"}]
`)
		f.run("Staff it.")
		var members []string
		for _, m := range f.roster().Members {
			members = append(members, m.Name)
		}
		if diff := cmp.Diff([]string{"cleo", "abel", "bert"}, members); diff != "" {
			t.Errorf("roster (-want +got):\n%s", diff)
		}
		var spawned []string
		first := map[string]string{} // member -> the first event it is named in
		for _, e := range f.journal() {
			if e.Type == "spawn" {
				m, _ := e.Fields["member"].(string)
				spawned = append(spawned, m)
				if _, ok := first[m]; !ok {
					first[m] = "spawn"
				}
				continue
			}
			if _, ok := first[e.Agent]; !ok && e.Agent != store.LeadName {
				first[e.Agent] = e.Type
			}
		}
		if diff := cmp.Diff([]string{"cleo", "abel", "bert"}, spawned); diff != "" {
			t.Errorf("spawn events (-want +got):\n%s", diff)
		}
		for _, m := range spawned {
			if first[m] != "spawn" {
				t.Errorf("%s's first event is %q, not its spawn", m, first[m])
			}
			reqs := f.requests(m)
			if len(reqs) == 0 || !strings.Contains(reqs[0], "Prompt of "+m+".") {
				t.Errorf("%s's first request lacks its prompt", m)
			}
		}
		results := lastUserTurn(t, f.requests(store.LeadName)[1])
		for _, want := range []string{"Spawned teammate cleo", "Spawned teammate abel", `already on the team`, `permission_mode \"nonsense\"`, "Spawned teammate bert"} {
			if !strings.Contains(results, want) {
				t.Errorf("the lead's results lack %q: %s", want, results)
			}
		}
		if strings.Contains(results, "second cleo") || len(f.requests("dora")) > 0 {
			t.Error("a refused spawn ran")
		}
	})
}

// TestTaskCreatesOfOneMessage: the TaskCreate calls of one message make
// their tasks in one change of the board, with ids in the calls' order (a
// task may be blocked by one made before it); when one call cannot be
// made, the others are still made, one by one, and it fails alone. The
// journal has each task made, in order.
func TestTaskCreatesOfOneMessage(t *testing.T) {
	t.Parallel()
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Plan it"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: plan}}
      - tool_use: {name: TaskCreate, input: {subject: "design"}}
      - tool_use: {name: TaskCreate, input: {subject: "build", blockedBy: ["1"]}}
      - tool_use: {name: TaskCreate, input: {subject: "ship", blockedBy: ["2"]}}
  - agent: team-lead
    contains: "Add more"
    reply:
      - tool_use: {name: TaskCreate, input: {subject: "docs"}}
      - tool_use: {name: TaskCreate, input: {subject: "later", blockedBy: ["99"]}}
      - tool_use: {name: TaskCreate, input: {subject: "tests", blockedBy: ["4"]}}
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
`)
	// No teammate takes the tasks: each run ends stalled, which is not
	// what this test is about.
	stalled := func(goal string) {
		t.Helper()
		if _, err := f.runEnd(goal); err != nil && !strings.Contains(err.Error(), "stalled") {
			t.Fatal(err)
		}
	}
	stalled("Plan it.")
	version := filepath.Join(f.state, "teams", "plan", "tasks", ".version")
	data, err := os.ReadFile(version)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(data)), "\n"); len(lines) != 1 {
		t.Errorf("three tasks of one message took %d changes of the board: %q", len(lines), lines)
	}
	stalled("Add more.")
	tm, err := f.st.Team(context.Background(), "plan")
	if err != nil {
		t.Fatal(err)
	}
	list, err := tm.Tasks().List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tk := range list {
		got = append(got, tk.ID+":"+tk.Subject+":"+strings.Join(tk.BlockedBy, ","))
	}
	if diff := cmp.Diff([]string{"1:design:", "2:build:1", "3:ship:2", "4:docs:", "5:tests:4"}, got); diff != "" {
		t.Errorf("board (-want +got):\n%s", diff)
	}
	var created []string
	for _, e := range f.journal() {
		if e.Type == "task_create" {
			created = append(created, fmt.Sprint(e.Fields["task"]))
		}
	}
	if diff := cmp.Diff([]string{"1", "2", "3", "4", "5"}, created); diff != "" {
		t.Errorf("task_create events (-want +got):\n%s", diff)
	}
	var results string
	for _, r := range f.requests(store.LeadName) {
		if turn := lastUserTurn(t, r); strings.Contains(turn, "tool_result") {
			results = turn // the last one: the answers to "Add more"
		}
	}
	for _, want := range []string{"Created task #4: docs", "not found", "Created task #5: tests"} {
		if !strings.Contains(results, want) {
			t.Errorf("the lead's results lack %q: %s", want, results)
		}
	}
}
