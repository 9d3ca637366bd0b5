package cli

import (
	"bytes"
	"context"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
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

// demoRun is what one demo showed: its timeline's lines (without their
// times), and the tokens and calls of each member as the terminal UI's
// view counted them and as troupe usage reads them from the journal.
type demoRun struct {
	timeline      []string
	viewTokens    map[string]int64
	journalTokens map[string]int64
	teammateCalls map[string]int
	writes        int
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
	run := demoRun{viewTokens: map[string]int64{}, journalTokens: map[string]int64{}, teammateCalls: map[string]int{}}
	stamp := regexp.MustCompile(`^ *[0-9.]+s  `)
	for _, l := range strings.Split(strings.TrimSpace(tlOut.String()), "\n") {
		l = stamp.ReplaceAllString(l, "")
		run.timeline = append(run.timeline, l)
		if strings.Contains(l, " writes ") {
			run.writes++
		}
	}
	// Teammates work side by side: the order varies, and so does how often
	// one goes idle between two messages (one wake or two), in either mode.
	sort.Strings(run.timeline)
	run.timeline = slices.Compact(run.timeline)
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
		if name != store.LeadName {
			run.teammateCalls[name] = tok.Calls
		}
	}
	return run
}

// TestDemoProcessParity: with teammates in their own processes the demo
// shows the same timeline (the files they write among it) as with
// teammates in process, and the terminal UI's view counts every member's
// tokens as troupe usage does.
func TestDemoProcessParity(t *testing.T) {
	if testing.Short() {
		t.Skip("plays the demo twice, once with teammate processes; skipped with -short")
	}
	t.Parallel()
	in := playDemo(t, team.ModeInProcess)
	proc := playDemo(t, team.ModeProcess)
	if in.writes != len(demoFiles) || proc.writes != len(demoFiles) {
		t.Errorf("writes lines: in-process %d, process %d, want %d each", in.writes, proc.writes, len(demoFiles))
	}
	if diff := cmp.Diff(in.timeline, proc.timeline); diff != "" {
		t.Errorf("timeline (-in-process +process):\n%s", diff)
	}
	if diff := cmp.Diff(names(in.teammateCalls), names(proc.teammateCalls)); diff != "" {
		t.Errorf("teammates with model calls in troupe usage (-in-process +process):\n%s", diff)
	}
	for mode, r := range map[string]demoRun{"in-process": in, "process": proc} {
		if diff := cmp.Diff(r.journalTokens, r.viewTokens); diff != "" {
			t.Errorf("%s: tokens per member (-troupe usage +the UI's view):\n%s", mode, diff)
		}
	}
}

func names[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
