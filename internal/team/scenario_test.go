package team_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
)

// The scenario fuzzer generates random team scripts for the fake API —
// spawns, tasks with dependencies and roles, messages, shutdown requests and
// answers, plan approvals, permission requests, model faults and kill -9 of
// teammate processes — runs each through a real session, and checks the
// invariants every run must keep:
//   - it ends within a bound, in one of the End states, and never hangs;
//   - no task is in progress with a member who has shut down;
//   - no message is delivered twice to the same member;
//   - every file of the final state parses.
//
// A failing scenario prints its seed and its script; rerun it with
// -scenario.seed=N.
var (
	scenarioSeed  = flag.Int64("scenario.seed", -1, "run only the scenario with this seed")
	scenarioSweep = flag.Int("scenario.sweep", 8, "random scenarios to run beyond the fixed seeds")
)

// scenarioTimeout bounds one scenario: a passing one takes well under a
// second, so a run still going after this long has hung.
const scenarioTimeout = 20 * time.Second

type mateBehaviour int

const (
	mateCompletes mateBehaviour = iota // completes each task it takes
	mateAbandons                       // ends its turn with the task unfinished
	mateGivesBack                      // gives the task back with TaskUpdate
	mateAsks                           // runs a command (asking the lead), then completes
	mateTalks                          // messages the lead, then completes
	nBehaviours
)

type scenarioMate struct {
	Name           string
	Role           string
	Behaviour      mateBehaviour
	Plan           bool // spawned with plan_mode_required
	RefuseShutdown bool // refuses the first shutdown request
}

type scenarioTask struct {
	Subject   string
	Role      string
	BlockedBy []string
}

type scenario struct {
	Seed     int64
	Mates    []scenarioMate
	Tasks    []scenarioTask
	Shutdown []string // asked to shut down right after the spawns
	LeadFix  bool     // on a stall, the lead deletes every task
	Answer   string   // the lead's answer to permission requests: approve, deny, ignore
	Faults   []int    // model calls that fail (no retries)
	Kill     bool     // process mode: kill -9 a teammate process mid-run
}

func genScenario(seed int64) scenario {
	r := rand.New(rand.NewPCG(uint64(seed), 0x5ce7a210))
	sc := scenario{Seed: seed, LeadFix: r.IntN(2) == 0, Answer: []string{"approve", "deny", "ignore"}[r.IntN(3)]}
	roles := []string{"dev", "qa"}
	for i := range r.IntN(4) {
		sc.Mates = append(sc.Mates, scenarioMate{
			Name: fmt.Sprintf("m%d", i+1), Role: roles[r.IntN(len(roles))],
			Behaviour: mateBehaviour(r.IntN(int(nBehaviours))), Plan: r.IntN(5) == 0, RefuseShutdown: r.IntN(3) == 0,
		})
	}
	for i := range r.IntN(6) {
		t := scenarioTask{Subject: fmt.Sprintf("task %d", i+1)}
		if r.IntN(4) == 0 {
			t.Role = []string{"dev", "qa", "designer"}[r.IntN(3)]
		}
		for j := range i {
			if r.IntN(4) == 0 {
				t.BlockedBy = append(t.BlockedBy, fmt.Sprint(j+1))
			}
		}
		sc.Tasks = append(sc.Tasks, t)
	}
	for _, m := range sc.Mates {
		if r.IntN(4) == 0 {
			sc.Shutdown = append(sc.Shutdown, m.Name)
		}
	}
	for range r.IntN(3) {
		if c := 2 + r.IntN(30); !slices.Contains(sc.Faults, c) {
			sc.Faults = append(sc.Faults, c)
		}
	}
	return sc
}

type (
	yrule  = map[string]any
	yblock = map[string]any
)

func toolUse(name string, input map[string]any) yblock {
	return yblock{"tool_use": map[string]any{"name": name, "input": input}}
}

func text(s string) []yblock { return []yblock{{"text": s}} }

// script is the fake API's script of the scenario, as JSON (which is YAML).
func (sc scenario) script() string {
	var rules []yrule
	first := []yblock{toolUse("TeamCreate", map[string]any{"team_name": "sc"})}
	for _, t := range sc.Tasks {
		in := map[string]any{"subject": t.Subject}
		if t.Role != "" {
			in["role"] = t.Role
		}
		if len(t.BlockedBy) > 0 {
			in["blockedBy"] = t.BlockedBy
		}
		first = append(first, toolUse("TaskCreate", in))
	}
	for _, m := range sc.Mates {
		first = append(first, toolUse("Task", map[string]any{"team_name": "sc", "name": m.Name, "role": m.Role,
			"description": m.Role, "prompt": "Begin.", "plan_mode_required": m.Plan}))
	}
	for _, n := range sc.Shutdown {
		first = append(first, toolUse("SendMessage", map[string]any{"type": "shutdown_request", "recipient": n}))
	}
	lead := func(r yrule) { r["agent"] = "team-lead"; rules = append(rules, r) }
	lead(yrule{"contains": "Run the scenario", "reply": first})
	switch sc.Answer {
	case "ignore":
		lead(yrule{"contains": `type="permission_request"`, "times": 0, "reply": text("Not answering.")})
	default:
		lead(yrule{"regex": `type="permission_request"[^>]*request_id="([^"]+)"`, "times": 0, "reply": []yblock{
			toolUse("SendMessage", map[string]any{"type": "permission_response", "request_id": "${1}", "approve": sc.Answer == "approve"})}})
	}
	lead(yrule{"regex": `type="plan_approval_request"[^>]*request_id="([^"]+)"`, "times": 0, "reply": []yblock{
		toolUse("SendMessage", map[string]any{"type": "plan_approval_response", "request_id": "${1}", "approve": true, "feedback": "go"})}})
	if sc.LeadFix && len(sc.Tasks) > 0 {
		var fix []yblock
		for i := range sc.Tasks {
			fix = append(fix, toolUse("TaskUpdate", map[string]any{"taskId": fmt.Sprint(i + 1), "status": "deleted"}))
		}
		lead(yrule{"contains": "The team is stalled", "times": 0, "reply": fix})
	}
	lead(yrule{"times": 0, "reply": text("ok")})

	for _, m := range sc.Mates {
		mate := func(r yrule) { r["agent"] = m.Name; rules = append(rules, r) }
		if m.RefuseShutdown {
			mate(yrule{"regex": `type="shutdown_request" request_id="([^"]+)"`, "reply": []yblock{
				toolUse("SendMessage", map[string]any{"type": "shutdown_response", "request_id": "${1}", "approve": false, "reason": "busy"})}})
		}
		mate(yrule{"regex": `type="shutdown_request" request_id="([^"]+)"`, "times": 0, "reply": []yblock{
			toolUse("SendMessage", map[string]any{"type": "shutdown_response", "request_id": "${1}", "approve": true})}})
		if m.Plan {
			mate(yrule{"contains": "Begin.", "reply": []yblock{
				toolUse("SendMessage", map[string]any{"type": "plan_approval_request", "content": "My plan: do the tasks."})}})
		}
		var work []yblock
		switch m.Behaviour {
		case mateCompletes:
			work = []yblock{toolUse("TaskUpdate", map[string]any{"taskId": "${1}", "status": "completed"})}
		case mateAbandons:
			work = text("Later.")
		case mateGivesBack:
			work = []yblock{toolUse("TaskUpdate", map[string]any{"taskId": "${1}", "status": "pending", "owner": ""})}
		case mateAsks:
			work = []yblock{toolUse("bash", map[string]any{"command": "echo working on ${1}"}),
				toolUse("TaskUpdate", map[string]any{"taskId": "${1}", "status": "completed"})}
		case mateTalks:
			work = []yblock{toolUse("SendMessage", map[string]any{"recipient": "team-lead", "content": "starting ${1}"}),
				toolUse("TaskUpdate", map[string]any{"taskId": "${1}", "status": "completed"})}
		}
		mate(yrule{"regex": `(?:claimed|unfinished) task #(\d+)`, "times": 0, "reply": work})
		mate(yrule{"times": 0, "reply": text("idle")})
	}
	var faults []map[string]any
	for _, c := range sc.Faults {
		faults = append(faults, map[string]any{"call": c, "kind": "server_error"})
	}
	out, err := json.MarshalIndent(map[string]any{"rules": rules, "faults": faults,
		"fallback": map[string]any{"reply": text("fallback")}}, "", "  ")
	if err != nil {
		panic(err)
	}
	return string(out)
}

// runScenario runs one scenario and checks the invariants.
func runScenario(t *testing.T, sc scenario, mode string) {
	t.Helper()
	script := sc.script()
	defer func() {
		if t.Failed() {
			t.Logf("scenario seed %d (%s), rerun with -run 'TestScenarios' -scenario.seed=%d; its script:\n%s", sc.Seed, mode, sc.Seed, script)
		}
	}()
	f := start(t, script, withMode(mode), func(c *team.Config) { c.PermissionMode = team.PermDefault })
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	defer cancel()
	if sc.Kill && mode == team.ModeProcess && len(sc.Mates) > 0 {
		go killOneMate(ctx, f, sc)
	}
	res, err := f.sess.RunHeadless(ctx, "Run the scenario.")
	if ctx.Err() != nil {
		f.dumpState()
		t.Fatalf("the run did not end within %s (it hung): %v", scenarioTimeout, err)
	}
	switch res.End {
	case team.EndDone, team.EndStalled, team.EndFailed, team.EndBudget, team.EndWaitingHuman:
	default:
		t.Errorf("the run ended in %q (err %v), not one of the end states", res.End, err)
	}
	if res.End == team.EndStalled && res.Why == "" {
		t.Error("a stalled run does not say why")
	}
	if f.sess.TeamName() == "" {
		return // the lead's first call failed: no team
	}
	// The teammates outlive RunHeadless until the session closes, as they
	// do under `troupe -p` until it exits: the state is checked once they
	// have stopped and written their last line.
	if err := f.sess.Close(); err != nil {
		t.Errorf("close the session: %v", err)
	}
	checkScenarioState(t, f)
}

// killOneMate kill -9s the first teammate's process once it has one. The
// moment is whatever it turns out to be: the invariants hold at any.
func killOneMate(ctx context.Context, f *fixture, sc scenario) {
	name := sc.Mates[0].Name
	for ctx.Err() == nil {
		if tm, err := f.st.Team(ctx, "sc"); err == nil {
			if r, err := tm.ReadRoster(ctx); err == nil {
				if m, ok := r.Member(name); ok && m.PID > 0 && m.PID != os.Getpid() {
					_ = syscall.Kill(m.PID, syscall.SIGKILL)
					return
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// dumpState logs the journal, roster and board of a run that went wrong.
func (f *fixture) dumpState() {
	ctx := context.Background()
	tm, err := f.st.Team(ctx, f.sess.TeamName())
	if err != nil {
		f.t.Logf("no team: %v", err)
		return
	}
	if ev, err := tm.Journal().Read(ctx); err == nil {
		for _, e := range ev {
			f.t.Logf("journal: %s %s %s %v", e.TS.Format("15:04:05.000"), e.Agent, e.Type, e.Fields)
		}
	}
	if r, err := tm.ReadRoster(ctx); err == nil {
		for _, m := range r.Members {
			f.t.Logf("member %s: %s", m.Name, m.Status)
		}
	}
	if tasks, err := tm.Tasks().List(ctx); err == nil {
		for _, x := range tasks {
			f.t.Logf("task #%s: %s owner %q blocked by %v", x.ID, x.Status, x.Owner, x.BlockedBy)
		}
	}
}

func checkScenarioState(t *testing.T, f *fixture) {
	t.Helper()
	ctx := context.Background()
	tm, err := f.st.Team(ctx, f.sess.TeamName())
	if err != nil {
		t.Fatalf("open the team: %v", err)
	}
	r, err := tm.ReadRoster(ctx)
	if err != nil {
		t.Fatalf("the roster does not parse: %v", err)
	}
	tasks, err := tm.Tasks().List(ctx)
	if err != nil {
		t.Fatalf("the board does not parse: %v", err)
	}
	for _, task := range tasks {
		if task.Status != store.TaskInProgress {
			continue
		}
		if m, ok := r.Member(task.Owner); !ok || m.Status == store.StatusShutdown {
			t.Errorf("task #%s is in progress with %q, who is gone", task.ID, task.Owner)
		}
	}
	dir := filepath.Join(f.state, "teams", f.sess.TeamName())
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch {
		case strings.HasSuffix(path, ".json"):
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if !json.Valid(data) {
				t.Errorf("%s does not parse", path)
			}
		case strings.HasSuffix(path, ".jsonl"):
			checkJSONL(t, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// No member was given the same message twice.
	for _, name := range r.Names() {
		seen := map[string]bool{}
		path := filepath.Join(dir, "transcripts", name+".jsonl")
		for _, line := range readLines(t, path) {
			var tl struct {
				Delivered []string `json:"delivered"`
			}
			if json.Unmarshal(line, &tl) != nil {
				continue
			}
			for _, id := range tl.Delivered {
				if seen[id] {
					t.Errorf("%s was given message %s twice", name, id)
				}
				seen[id] = true
			}
		}
	}
}

func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	fh, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var out [][]byte
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		out = append(out, append([]byte(nil), sc.Bytes()...))
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return out
}

func checkJSONL(t *testing.T, path string) {
	t.Helper()
	for i, line := range readLines(t, path) {
		if !json.Valid(line) {
			t.Errorf("%s line %d does not parse: %.200s", path, i+1, line)
		}
	}
}

// TestScenarios runs a fixed set of seeds in process, a few in process
// mode with a teammate killed, and a random sweep whose seeds are printed.
func TestScenarios(t *testing.T) {
	t.Parallel()
	if *scenarioSeed >= 0 {
		sc := genScenario(*scenarioSeed)
		t.Run("inprocess", func(t *testing.T) { t.Parallel(); runScenario(t, sc, team.ModeInProcess) })
		if sc.Kill = true; len(sc.Mates) > 0 {
			t.Run("process", func(t *testing.T) { t.Parallel(); runScenario(t, sc, team.ModeProcess) })
		}
		return
	}
	for seed := int64(0); seed < 40; seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) { t.Parallel(); runScenario(t, genScenario(seed), team.ModeInProcess) })
	}
	for _, seed := range []int64{3, 7, 11, 19} {
		sc := genScenario(seed)
		if len(sc.Mates) == 0 {
			sc.Mates = []scenarioMate{{Name: "m1", Role: "dev"}}
		}
		sc.Kill = true
		t.Run(fmt.Sprintf("process-kill-seed%d", seed), func(t *testing.T) { t.Parallel(); runScenario(t, sc, team.ModeProcess) })
	}
	base := time.Now().UnixNano() & 0x7fffffff
	for i := range *scenarioSweep {
		seed := base + int64(i)
		t.Run(fmt.Sprintf("random-seed%d", seed), func(t *testing.T) { t.Parallel(); runScenario(t, genScenario(seed), team.ModeInProcess) })
	}
}

// FuzzScenario lets the fuzzer choose seeds.
func FuzzScenario(f *testing.F) {
	for _, s := range []int64{0, 1, 2, 42} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		seed &= 1<<62 - 1
		runScenario(t, genScenario(seed), team.ModeInProcess)
	})
}
