package team_test

import (
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
