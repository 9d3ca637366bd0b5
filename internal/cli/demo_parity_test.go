package cli

import (
	"bytes"
	"context"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/teamkey"
	"github.com/troupe-dev/troupe/internal/teamview"
	"github.com/troupe-dev/troupe/internal/usage"
)

// demoRun is what one demo showed: how many timeline lines of each kind
// each member had, and the tokens and calls of each member as the
// terminal UI's view counted them and as troupe usage reads them from the
// journal.
type demoRun struct {
	timeline      map[lineKind]int
	viewTokens    map[string]int64
	journalTokens map[string]int64
	calls         map[string]int
	apiTokens     map[string]int64 // what the fake API reported
	apiCalls      map[string]int
	log           string
}

// lineKind is who a timeline line is about and what it says they did.
type lineKind struct{ Agent, Kind string }

// kindOf names what a timeline line (without its time) says: its verb.
func kindOf(line string) lineKind {
	who, what, _ := strings.Cut(line, " ")
	what = strings.TrimLeft(what, " ")
	switch {
	case strings.HasPrefix(what, "→ "):
		return lineKind{who, "→"}
	case strings.HasPrefix(what, "task #"):
		return lineKind{who, "waits"}
	case strings.HasPrefix(what, "is idle"), strings.HasPrefix(what, "has shut down"),
		strings.HasPrefix(what, "merge queue"), strings.HasPrefix(what, "model call failed"):
		verb, _, _ := strings.Cut(what, ":")
		verb, _, _ = strings.Cut(verb, " (")
		return lineKind{who, verb}
	}
	first, rest, _ := strings.Cut(what, " ")
	if strings.HasPrefix(rest, "failed: ") {
		return lineKind{who, first + " failed"}
	}
	return lineKind{who, first}
}

// playDemo plays the demo with teammates in mode, feeding the text
// timeline and a teamview exactly as troupe demo --headless and the
// terminal UI do.
func playDemo(t *testing.T, mode string) demoRun {
	t.Helper()
	// Workspaces named alike: the path is in every prompt.
	ws := filepath.Join(t.TempDir(), "ws")
	var out bytes.Buffer
	a := &app{ctx: context.Background(), stdout: &out, stderr: &out, rawStdout: &out, workspace: ws}
	d, err := a.startDemo(0, mode)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	// Team keys go to the test's state home, never the developer's;
	// teammate processes are this test binary run as troupe.
	keys, err := teamkey.New(teamkey.Options{StateDir: d.env.StateDir, Dir: filepath.Join(stateHome(t), "troupe", "keys")})
	if err != nil {
		t.Fatal(err)
	}
	d.cfg.Keys = keys
	d.cfg.AgentEnv = append(d.cfg.AgentEnv, asCLI+"=1", "XDG_STATE_HOME="+stateHome(t))
	var mu sync.Mutex
	var tlOut bytes.Buffer
	tl := &timeline{w: &tlOut, start: time.Now()}
	v := teamview.New(teamview.Options{Driverless: true})
	d.cfg.Observe = func(ev agent.Event) {
		tl.agentEvent(ev)
		mu.Lock()
		v.Apply(time.Now(), ev)
		mu.Unlock()
	}
	d.cfg.OnEvent = func(e store.Event) {
		tl.teamEvent(e)
		env, err := teamevent.Decode(e)
		if err != nil {
			return
		}
		mu.Lock()
		v.Apply(time.Now(), env)
		mu.Unlock()
	}
	sess, err := team.NewSession(d.cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sess.RunHeadless(a.ctx, demoGoal)
	if cerr := sess.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("%s demo: %v\n%s", mode, err, tlOut.String())
	}
	run := demoRun{timeline: map[lineKind]int{}, viewTokens: map[string]int64{}, journalTokens: map[string]int64{}, calls: map[string]int{}, apiTokens: map[string]int64{}, apiCalls: map[string]int{}, log: tlOut.String()}
	stamp := regexp.MustCompile(`^ *[0-9.]+s  `)
	for _, l := range strings.Split(strings.TrimSpace(tlOut.String()), "\n") {
		run.timeline[kindOf(stamp.ReplaceAllString(l, ""))]++
	}
	mu.Lock()
	for _, m := range v.Roster() {
		run.viewTokens[m.Name] = m.Tokens
	}
	mu.Unlock()
	evs, err := a.teamEvents(d.env.StateDir, "graphql-migration")
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range usage.Tally("graphql-migration", evs, nil).ByAgent {
		run.journalTokens[name] = tok.Input + tok.Output + tok.CacheRead + tok.CacheWrite
		run.calls[name] = tok.Calls
	}
	// What the API answered, per member: the usage must account for each
	// call, wherever the member ran.
	for _, r := range d.fake.Requests() {
		if r.Status != 200 {
			continue
		}
		u := r.Usage
		run.apiCalls[r.Agent]++
		run.apiTokens[r.Agent] += int64(u.InputTokens + u.OutputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens)
	}
	return run
}

// TestDemoProcessParity: with teammates in their own processes the demo
// shows the same timeline as with teammates in process (as many lines of
// each kind for each member: the files they write, the commands they run,
// the messages they send), troupe usage counts every model call and token
// the API answered in both, and the terminal UI's view counts every
// member's tokens as troupe usage does.
func TestDemoProcessParity(t *testing.T) {
	if testing.Short() {
		t.Skip("plays the demo twice, once with teammate processes; skipped with -short")
	}
	t.Parallel()
	in := playDemo(t, team.ModeInProcess)
	proc := playDemo(t, team.ModeProcess)
	for _, r := range []demoRun{in, proc} {
		writes := 0
		for k, n := range r.timeline {
			if k.Kind == "writes" {
				writes += n
			}
		}
		if writes != len(demoFiles) {
			t.Errorf("%d writes lines, want %d:\n%s", writes, len(demoFiles), r.log)
		}
	}
	// How often a teammate goes idle varies in either mode: two messages
	// reach it in one wake or in two. Every member goes idle in both.
	idle := func(r demoRun) map[lineKind]int {
		m := map[lineKind]int{}
		for k, n := range r.timeline {
			if k.Kind == "is idle" {
				n = min(n, 1)
			}
			m[k] = n
		}
		return m
	}
	if diff := cmp.Diff(idle(in), idle(proc)); diff != "" {
		t.Errorf("timeline lines per member and kind (-in-process +process):\n%s\nin-process:\n%s\nprocess:\n%s", diff, in.log, proc.log)
	}
	// A teammate may get two messages in one wake or in two, in either
	// mode, so its number of calls (and the tokens they read) may differ
	// between two runs; every call must be counted, and the same members
	// make them.
	if diff := cmp.Diff(names(in.calls), names(proc.calls)); diff != "" {
		t.Errorf("members with model calls in troupe usage (-in-process +process):\n%s", diff)
	}
	for mode, r := range map[string]demoRun{"in-process": in, "process": proc} {
		if diff := cmp.Diff(r.apiCalls, r.calls); diff != "" {
			t.Errorf("%s: model calls per member (-the API answered +troupe usage):\n%s", mode, diff)
		}
		if diff := cmp.Diff(r.apiTokens, r.journalTokens); diff != "" {
			t.Errorf("%s: tokens per member (-the API reported +troupe usage):\n%s", mode, diff)
		}
		if diff := cmp.Diff(r.journalTokens, r.viewTokens); diff != "" {
			t.Errorf("%s: tokens per member (-troupe usage +the UI's view):\n%s", mode, diff)
		}
	}
}

func names[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
