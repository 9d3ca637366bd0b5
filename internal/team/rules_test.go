package team_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/guard"
	"github.com/troupe-dev/troupe/internal/hook"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
	"github.com/troupe-dev/troupe/internal/pattern"
	"github.com/troupe-dev/troupe/internal/settings"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
)

// withRules configures hooks, guard words and the patterns of a workspace.
func withRules(t *testing.T, hooks []settings.Hook, words []string) option {
	return func(c *team.Config) {
		runner, err := hook.New(hook.Config{Hooks: hooks, Dir: c.Workspace.Dir()})
		if err != nil {
			t.Fatal(err)
		}
		g, err := guard.New(words, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.Rules = &team.Rules{Hooks: runner, Guard: g, Patterns: pattern.Load(filepath.Join(c.Workspace.Dir(), ".troupe", "patterns"))}
	}
}

// TestTaskCompletedHookKeepsTaskOpen: a TaskCompleted hook that exits 2
// keeps the task in progress and its stderr reaches the model; once the
// hook is satisfied the task completes.
func TestTaskCompletedHookKeepsTaskOpen(t *testing.T) {
	t.Parallel()
	hooks := []settings.Hook{{Event: "TaskCompleted", Type: "command",
		Command: `test -f tests-pass || { echo "run the tests first (touch tests-pass)" >&2; exit 2; }`}}
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Gate completion"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: gated}}
      - tool_use: {name: TaskCreate, input: {subject: "Ship it"}}
      - tool_use: {name: Task, input: {team_name: gated, name: shipper, description: s, prompt: "Work the board."}}
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
  - agent: shipper
    contains: "You claimed task #1"
    reply: [{tool_use: {name: TaskUpdate, input: {taskId: "1", status: completed}}}]
  - agent: shipper
    contains: "run the tests first"
    reply:
      - tool_use: {name: bash, input: {command: "touch tests-pass"}}
      - tool_use: {name: TaskUpdate, input: {taskId: "1", status: completed}}
  - agent: shipper
    times: 0
    reply: [{text: "done"}]
`, withRules(t, hooks, nil))
	f.run("Gate completion.")
	turn := lastUserTurn(t, f.requests("shipper")[2])
	if !strings.Contains(turn, "task #1 not completed") || !strings.Contains(turn, "run the tests first") {
		t.Errorf("the hook's refusal did not reach the model: %s", turn)
	}
	var completes int
	for _, e := range f.journal() {
		if e.Type == "complete" {
			completes++
		}
	}
	if completes != 1 {
		t.Errorf("task completed %d times in the journal, want 1 (after the hook allowed it)", completes)
	}
}

// TestTeammateIdleHookSendsBackToWork: a TeammateIdle hook that blocks
// gives the teammate its reason as new work instead of letting it idle.
func TestTeammateIdleHookSendsBackToWork(t *testing.T) {
	t.Parallel()
	hooks := []settings.Hook{{Event: "TeammateIdle", Type: "command",
		Command: `test -f CHANGELOG.md || { echo "update CHANGELOG.md before you stop" >&2; exit 2; }`}}
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Idle check"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: tidy}}
      - tool_use: {name: Task, input: {team_name: tidy, name: tidier, description: t, prompt: "Say hello."}}
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
  - agent: tidier
    contains: "update CHANGELOG.md"
    reply: [{tool_use: {name: write_file, input: {path: CHANGELOG.md, content: "- hello"}}}]
  - agent: tidier
    times: 0
    reply: [{text: "hello"}]
`, withRules(t, hooks, nil))
	f.run("Idle check.")
	if _, err := os.Stat(filepath.Join(f.ws, "CHANGELOG.md")); err != nil {
		t.Errorf("the hook did not send the teammate back to work: %v", err)
	}
	m, _ := rosterMember(f.roster(), "tidier")
	if m.Status != store.StatusIdle {
		t.Errorf("tidier is %s, want idle once the hook is satisfied", m.Status)
	}
}

// TestPatternsGuardTheLead: under a manage-only pattern the lead's edit is
// refused; under a lead-works pattern and an unknown one it is allowed.
func TestPatternsGuardTheLead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern  string
		refused  bool
		recorded string
	}{
		{pattern.FixedTheme, true, pattern.FixedTheme},
		{pattern.FullTeam, true, pattern.FixedTheme}, // an alias: the spec's name is recorded
		{pattern.MixedGenius, false, pattern.MixedGenius},
		{pattern.SmallTeam, false, pattern.MixedGenius},
		{"no-such-pattern", false, "no-such-pattern"}, // unknown: fail open
	} {
		t.Run(tc.pattern, func(t *testing.T) {
			f := start(t, `
rules:
  - agent: team-lead
    contains: "Edit as lead"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: p, pattern: "`+tc.pattern+`"}}
      - tool_use: {name: write_file, input: {path: lead.txt, content: "the lead wrote this"}}
  - agent: team-lead
    reply: [{text: "ok"}]
`, withRules(t, nil, nil))
			f.run("Edit as lead.")
			_, err := os.Stat(filepath.Join(f.ws, "lead.txt"))
			if refused := err != nil; refused != tc.refused {
				t.Errorf("lead's write refused = %v, want %v; lead saw: %s", refused, tc.refused, lastUserTurn(t, f.requests("team-lead")[1]))
			}
			if got := f.roster().Pattern; got != tc.recorded {
				t.Errorf("config.json pattern = %q, want %q", got, tc.recorded)
			}
		})
	}
}

// TestArtifactGuardStopsCommit: a teammate's git commit whose message holds
// a listed word is refused before bash runs.
func TestArtifactGuardStopsCommit(t *testing.T) {
	t.Parallel()
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Commit"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: g}}
      - tool_use: {name: Task, input: {team_name: g, name: committer, description: c, prompt: "Commit the work."}}
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
  - agent: committer
    contains: "Commit the work."
    reply: [{tool_use: {name: bash, input: {command: "git commit -m 'Fix parser, reviewed by Moriarty' && touch committed"}}}]
  - agent: committer
    times: 0
    reply: [{text: "done"}]
`, withRules(t, nil, []string{"moriarty"}))
	f.run("Commit.")
	if _, err := os.Stat(filepath.Join(f.ws, "committed")); err == nil {
		t.Error("the commit command ran")
	}
	turn := lastUserTurn(t, f.requests("committer")[1])
	if !strings.Contains(strings.ToLower(turn), "moriarty") {
		t.Errorf("the refusal does not name the word: %s", turn)
	}
}

// TestRacingMembersAnnounceOnlyWhatTheyTake: seed 004's notice to the lead
// ("I am taking task #N") comes from the member that took the task, once
// per task, however many members raced for it. Members woken by the same
// board change go for the same tasks; a notice sent before the claim would
// tell the lead of tasks the sender then lost.
func TestRacingMembersAnnounceOnlyWhatTheyTake(t *testing.T) {
	t.Parallel()
	const tasks, members = 40, 8
	f := start(t, fakeapi.BoardScript("Race", "race", members, tasks))
	f.run("Race")
	owner := map[string]string{}
	notices := map[string][]string{}
	for _, e := range f.journal() {
		switch {
		case e.Type == "claim":
			owner[e.Fields["task"].(string)] = e.Fields["owner"].(string)
		case e.Type == "send":
			if s, _ := e.Fields["summary"].(string); strings.HasPrefix(s, "taking task #") {
				id := strings.TrimPrefix(s, "taking task #")
				notices[id] = append(notices[id], e.Fields["from"].(string))
			}
		}
	}
	if len(owner) != tasks {
		t.Fatalf("%d tasks claimed, want %d", len(owner), tasks)
	}
	for id, who := range owner {
		if got := notices[id]; len(got) != 1 || got[0] != who {
			t.Errorf("task #%s, taken by %s: the lead was told it is taken by %v", id, who, got)
		}
	}
	if len(notices) != tasks {
		t.Errorf("notices for %d tasks, want %d", len(notices), tasks)
	}
}
