package team_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/usage"
)

// TestBudgetStopsTeammate: a teammate spawned with a token budget stops
// making model calls when it reaches it, goes idle with the reason and the
// lead is told; raising the limit and messaging it lets it go on.
func TestBudgetStopsTeammate(t *testing.T) {
	t.Parallel()
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Spend"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: thrift}}
      - tool_use: {name: Task, input: {team_name: thrift, name: spender, description: s, budget_tokens: 150, prompt: "Count to four."}}
  - agent: team-lead
    times: 0
    reply: [{text: "noted"}]
  - agent: spender
    times: 0
    usage: {input_tokens: 70, output_tokens: 10}
    reply: [{tool_use: {name: bash, input: {command: "echo step"}}}]
`)
	f.run("Spend.")
	calls := func() int { return len(f.requests("spender")) }
	if n := calls(); n != 2 {
		t.Fatalf("spender made %d model calls, want 2 (80 tokens each, limit 150)", n)
	}
	lead := strings.Join(f.requests("team-lead"), "\n")
	if !strings.Contains(lead, "I stopped making model calls: budget reached: spender (160 of 150 tokens used)") {
		t.Errorf("the lead was not told the budget stopped the teammate")
	}
	m, _ := rosterMember(f.roster(), "spender")
	if m.Status != store.StatusIdle {
		t.Errorf("spender is %s, want idle", m.Status)
	}

	// Raise the limit and wake it: it goes on until the new limit.
	tm, err := f.st.Team(context.Background(), "thrift")
	if err != nil {
		t.Fatal(err)
	}
	if err := team.RaiseBudget(context.Background(), tm, "spender", usage.Limit{Tokens: 300}); err != nil {
		t.Fatal(err)
	}
	if err := f.sess.SendAsHuman(context.Background(), "spender", "Your budget was raised; go on."); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for calls() < 4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
	if n := calls(); n != 4 {
		t.Errorf("after raising the limit to 300 spender made %d calls in all, want 4", n)
	}
}
