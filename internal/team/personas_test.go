package team_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/guard"
	"github.com/troupe-dev/troupe/internal/pattern"
	"github.com/troupe-dev/troupe/internal/persona"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
)

// withThemes configures the patterns, the bundled themes and a theme
// history in the test's own directory.
func withThemes(t *testing.T, history string) option {
	return func(c *team.Config) {
		g, err := guard.New(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.Rules = &team.Rules{Guard: g, Patterns: pattern.Load(""), Themes: persona.Load(""), History: persona.NewHistory(history)}
	}
}

// TestPersonaTeam: a team formed on a theme records it and its cast in
// config.json and in the history (outside the workspace); each teammate is
// told the character it plays and the working rules; the lead's prompt
// names the patterns and themes; messages keep internal names.
func TestPersonaTeam(t *testing.T) {
	t.Parallel()
	history := filepath.Join(t.TempDir(), "home", ".claude", persona.HistoryFile)
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Form the crew"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: crew, theme: example, characters: [Bexley]}}
      - tool_use: {name: Task, input: {team_name: crew, name: checker, role: tester, description: c, prompt: "Say hello."}}
      - tool_use: {name: Task, input: {team_name: crew, name: builder, role: implementer, description: b, prompt: "Say hello."}}
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
  - agent: checker
    times: 0
    reply: [{text: "hello"}]
  - agent: builder
    times: 0
    reply: [{text: "hello"}]
`, withThemes(t, history))
	f.run("Form the crew.")
	r := f.roster()
	if r.Pattern != pattern.FixedTheme || r.Theme != "example" {
		t.Errorf("roster pattern %q theme %q", r.Pattern, r.Theme)
	}
	want := map[string]string{store.LeadName: "Bexley", "checker": "Oswin", "builder": "Wren"}
	for member, name := range want {
		if p, ok := r.PersonaOf(member); !ok || p.Name != name {
			t.Errorf("%s plays %q, want %q", member, p.Name, name)
		}
	}
	sys := f.requests("checker")[0]
	for _, s := range []string{"You play the character Oswin", "The lead plays Bexley", `The lead is \"team-lead\"`, "tell the lead with SendMessage that you take it", "standing by"} {
		if !strings.Contains(sys, s) {
			t.Errorf("the teammate's request lacks %q", s)
		}
	}
	lead := f.requests(store.LeadName)
	for _, s := range []string{"fixed-theme (default): 4-6 members; you only manage.", "Persona themes", "Quote what teammates report to the user verbatim", "never poll TaskList"} {
		if !strings.Contains(lead[0], s) {
			t.Errorf("the lead's prompt lacks %q", s)
		}
	}
	created := lastUserTurn(t, lead[1])
	for _, s := range []string{"Pattern fixed-theme:", "Team size: 4-6 members", "You only manage", "You play Bexley", "Oswin (tester)"} {
		if !strings.Contains(created, s) {
			t.Errorf("TeamCreate's result lacks %q: %s", s, created)
		}
	}
	h, err := persona.NewHistory(history).Read()
	if err != nil || len(h) != 1 || h[0].Theme != "example" || h[0].Pattern != pattern.FixedTheme || h[0].Lead != "Bexley" {
		t.Errorf("history = %+v, %v", h, err)
	}
}

// TestDelegateBySwitch: delegate mode needs a team; switched to, it refuses
// the lead's writes from the next call on; switched back, they run again;
// TeamDelete takes it off.
func TestDelegateBySwitch(t *testing.T) {
	t.Parallel()
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Make a team"
    reply: [{tool_use: {name: TeamCreate, input: {team_name: sw, pattern: mixed-genius}}}]
  - agent: team-lead
    contains: "Write one"
    reply: [{tool_use: {name: write_file, input: {path: one.txt, content: "1"}}}]
  - agent: team-lead
    contains: "Write two"
    reply: [{tool_use: {name: write_file, input: {path: two.txt, content: "2"}}}]
  - agent: team-lead
    contains: "Drop it"
    reply: [{tool_use: {name: TeamDelete, input: {}}}]
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
`, withThemes(t, filepath.Join(t.TempDir(), "h.json")), withPermission(team.PermBypass))
	if err := f.sess.SetPermissionMode(team.PermDelegate); err == nil || !strings.Contains(err.Error(), "no team yet") {
		t.Fatalf("delegate without a team: %v", err)
	}
	f.run("Make a team.")
	if err := f.sess.SetPermissionMode(team.PermDelegate); err != nil {
		t.Fatal(err)
	}
	f.run("Write one.")
	if fileExists(f.ws, "one.txt") {
		t.Error("the lead wrote in delegate mode")
	}
	if err := f.sess.SetPermissionMode(team.PermBypass); err != nil {
		t.Fatal(err)
	}
	f.run("Write two.")
	if !fileExists(f.ws, "two.txt") {
		t.Error("the lead could not write after leaving delegate mode")
	}
	if err := f.sess.SetPermissionMode(team.PermDelegate); err != nil {
		t.Fatal(err)
	}
	f.run("Drop it.")
	if got := f.sess.PermissionMode(); got != team.PermBypass {
		t.Errorf("after TeamDelete the lead's mode is %q, want the one before delegate", got)
	}
}

func withPermission(mode string) option { return func(c *team.Config) { c.PermissionMode = mode } }

func fileExists(dir, name string) bool {
	_, err := os.Stat(filepath.Join(dir, name))
	return err == nil
}
