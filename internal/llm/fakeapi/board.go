package fakeapi

import (
	"fmt"
	"strings"
)

// BoardScript is the script of a team that works through a board: the
// lead, told goal, creates team and its tasks and spawns teammates
// w1…wN; each teammate completes every task it claims with one TaskUpdate
// and then ends its turn. troupe bench team runs it, and tests of claiming
// under contention.
func BoardScript(goal, team string, teammates, tasks int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rules:\n  - agent: team-lead\n    contains: %q\n    reply:\n", goal)
	fmt.Fprintf(&b, "      - tool_use: {name: TeamCreate, input: {team_name: %s}}\n", team)
	for i := 1; i <= tasks; i++ {
		fmt.Fprintf(&b, "      - tool_use: {name: TaskCreate, input: {subject: \"Task %d\"}}\n", i)
	}
	for i := 1; i <= teammates; i++ {
		fmt.Fprintf(&b, "      - tool_use: {name: Task, input: {team_name: %s, name: w%d, description: worker, prompt: \"Work the board.\"}}\n", team, i)
	}
	b.WriteString(`  - agent: team-lead
    times: 0
    reply: [{text: "The team is working."}]
  - regex: 'You claimed task #(\d+)'
    times: 0
    reply:
      - tool_use: {name: TaskUpdate, input: {taskId: "${1}", status: completed}}
  - times: 0
    reply: [{text: "ok"}]
`)
	return b.String()
}
