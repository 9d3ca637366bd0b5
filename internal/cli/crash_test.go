package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// asCLI makes the test binary run as troupe itself (see TestMain), so tests
// can start, kill and resume real troupe processes.
const asCLI = "TROUPE_TEST_AS_CLI"

// milestones are points of the demo's story, as they appear in its journal,
// at which a process is killed.
var milestones = []string{
	`"task":"1"[^\n]*"type":"claim"`,
	`"kind":"plan_approval_request"`,
	`"msg_type":"plan_approval_response"`,
	`"task":"2"[^\n]*"type":"claim"`,
	`"task":"2"[^\n]*"type":"complete"`,
	`"task":"3"[^\n]*"type":"claim"`,
	`"task":"3"[^\n]*"type":"complete"`,
	`"task":"4"[^\n]*"type":"claim"`,
}

// TestKillAndResume kills, with SIGKILL at a random point of the demo, (a) a
// teammate process in process mode, (b) the lead process in process mode,
// (c) everything (in-process teammates die with the lead); then resumes when
// needed. Every task must end completed exactly once, no message lost or
// delivered twice, every state file parseable, no process left.
func TestKillAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and resumes real processes; not run with -short")
	}
	t.Parallel()
	seed := time.Now().UnixNano()
	t.Logf("seed %d (milestones chosen at random)", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	for _, tc := range []struct {
		name   string
		mode   string
		victim string // "lead" or "teammate"
	}{
		{"a-teammate-process", "process", "teammate"},
		{"b-lead-process", "process", "lead"},
		{"c-everything", "in-process", "lead"},
	} {
		// The random picks are made here, in order, so that the seed
		// says what each subtest did.
		milestone := milestones[rng.IntN(len(milestones))]
		mate := []string{"analyst", "backend", "frontend"}[rng.IntN(3)]
		// One at a time: each plays a demo of four race-detecting
		// processes, and a resume must finish within troupeCmd's bound.
		t.Run(tc.name, func(t *testing.T) {
			t.Logf("kill at %s", milestone)
			ws := t.TempDir()
			demo := troupeCmd(t, "demo", "--headless", "--workspace", ws, "--model-latency", "30ms", "--teammate-mode", tc.mode)
			var out bytes.Buffer
			demo.Stdout, demo.Stderr = &out, &out
			if err := demo.Start(); err != nil {
				t.Fatal(err)
			}
			journalPath := filepath.Join(ws, ".troupe", "teams", "graphql-migration", "events.jsonl")
			if !waitMatch(journalPath, milestone, 60*time.Second) {
				_ = demo.Process.Kill()
				_ = demo.Wait()
				t.Fatalf("milestone %s never reached:\n%s", milestone, out.String())
			}
			switch tc.victim {
			case "teammate":
				victim := mate
				// A teammate spawned a moment ago may not have written its
				// pid yet.
				pid := 0
				for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
					if pid = rosterPID(t, ws, victim); pid > 0 {
						break
					}
				}
				t.Logf("killing %s (pid %d)", victim, pid)
				if pid > 0 && pid != demo.Process.Pid {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
				// The lead restarts the teammate; the demo finishes by itself.
				if err := demo.Wait(); err != nil {
					t.Fatalf("demo after a teammate was killed: %v\n%s", err, out.String())
				}
				restarted := false
				archives, _ := filepath.Glob(filepath.Join(ws, ".troupe", "archive", "graphql-migration-*", "events.jsonl"))
				for _, a := range archives {
					for _, e := range readLines(t, a) {
						if e["type"] == "restart" && e["member"] == victim {
							restarted = true
						}
					}
				}
				if !restarted {
					t.Errorf("%s was killed but never restarted", victim)
				}
			default:
				_ = demo.Process.Kill()
				_ = demo.Wait()
				resume := troupeCmd(t, "resume", "graphql-migration", "--workspace", ws, "--headless", "--teammate-mode", tc.mode)
				if b, err := resume.CombinedOutput(); err != nil {
					t.Fatalf("resume: %v\n%s\ndemo was:\n%s", err, b, out.String())
				}
			}
			audit(t, ws)
			if b, err := exec.Command("pgrep", "-f", ws).Output(); err == nil {
				t.Errorf("processes left running for %s:\n%s", ws, b)
			}
		})
	}
}

// troupeCmd is the test binary run as troupe, killed if it runs past two
// minutes (a hang fails the test instead of the whole run).
func troupeCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), asCLI+"=1", "ANTHROPIC_API_KEY=", "TROUPE_HOME=", "XDG_STATE_HOME="+stateHome(t))
	// A run still going after two minutes hangs: SIGQUIT has it print its
	// goroutines to its output (which the failing test shows), and it is
	// killed if it is still there 10 s later.
	cmd.Cancel = func() error {
		time.AfterFunc(10*time.Second, func() { _ = cmd.Process.Kill() })
		return cmd.Process.Signal(syscall.SIGQUIT)
	}
	return cmd
}

var (
	stateHomesMu sync.Mutex
	stateHomes   = map[*testing.T]string{}
)

// stateHome is the XDG_STATE_HOME of test t's troupe runs (where team keys
// go): the same for all of them, so that a resume finds the key its demo
// made, and never the developer's own.
func stateHome(t *testing.T) string {
	stateHomesMu.Lock()
	defer stateHomesMu.Unlock()
	d, ok := stateHomes[t]
	if !ok {
		d = t.TempDir()
		stateHomes[t] = d
		t.Cleanup(func() {
			stateHomesMu.Lock()
			delete(stateHomes, t)
			stateHomesMu.Unlock()
		})
	}
	return d
}

// waitMatch polls path until it matches re (a condition with a deadline).
func waitMatch(path, re string, within time.Duration) bool {
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if data, err := os.ReadFile(path); err == nil && rx.Match(data) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

func rosterPID(t *testing.T, ws, member string) int {
	data, err := os.ReadFile(filepath.Join(ws, ".troupe", "teams", "graphql-migration", "config.json"))
	if err != nil {
		t.Logf("roster: %v", err)
		return 0
	}
	var r struct {
		Members []struct {
			Name string `json:"name"`
			PID  int    `json:"pid"`
		} `json:"members"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("roster does not parse: %v", err)
	}
	for _, m := range r.Members {
		if m.Name == member {
			return m.PID
		}
	}
	return 0
}

// audit checks the team's whole state once it is over (archived).
func audit(t *testing.T, ws string) {
	t.Helper()
	archives, _ := filepath.Glob(filepath.Join(ws, ".troupe", "archive", "graphql-migration-*"))
	if len(archives) != 1 {
		t.Fatalf("want the team archived once, found %v", archives)
	}
	dir := archives[0]

	// Every state file parses; every complete line of every JSONL file too.
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		switch {
		case strings.HasSuffix(path, ".json"):
			if !json.Valid(data) {
				t.Errorf("%s does not parse", path)
			}
		case strings.HasSuffix(path, ".jsonl"):
			lines := strings.Split(string(data), "\n")
			for i, l := range lines[:len(lines)-1] {
				if !json.Valid([]byte(l)) {
					t.Errorf("%s line %d does not parse: %q", path, i+1, l)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	events := readLines(t, filepath.Join(dir, "events.jsonl"))
	completed := map[string]int{}
	sent := map[string]string{} // id -> recipient
	for _, e := range events {
		switch e["type"] {
		case "complete":
			completed[fmt.Sprint(e["task"])]++
		case "send":
			sent[fmt.Sprint(e["id"])] = fmt.Sprint(e["to"])
		}
	}
	for _, id := range []string{"1", "2", "3", "4"} {
		if completed[id] != 1 {
			t.Errorf("task %s completed %d times, want exactly once", id, completed[id])
		}
	}

	// Each message reached its recipient's conversation at most once, and
	// every message is accounted for: delivered, set aside at shutdown, or
	// still waiting in the inbox.
	seen := map[string]int{}
	transcripts, _ := filepath.Glob(filepath.Join(dir, "transcripts", "*.jsonl"))
	for _, tr := range transcripts {
		for _, l := range readLines(t, tr) {
			tallyDelivered(seen, l)
		}
	}
	checkDeliveredOnce(t, len(sent), seen)
	for id, to := range sent {
		if seen[id] > 0 {
			continue
		}
		inbox, _ := os.ReadFile(filepath.Join(dir, "inbox", to+".jsonl"))
		if !bytes.Contains(inbox, []byte(`"id":"`+id+`"`)) {
			t.Errorf("message %s to %s was lost: never delivered and not in its inbox", id, to)
		}
	}
}

func readLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// tallyDelivered counts the message ids a transcript line says were
// handed to its agent.
func tallyDelivered(seen map[string]int, line map[string]any) {
	for _, key := range []string{"delivered", "ids"} {
		if ids, ok := line[key].([]any); ok {
			for _, id := range ids {
				seen[fmt.Sprint(id)]++
			}
		}
	}
}

// checkDeliveredOnce fails when a message reached its recipient twice, or
// when there was nothing to audit.
func checkDeliveredOnce(t *testing.T, sent int, seen map[string]int) {
	t.Helper()
	if sent == 0 || len(seen) == 0 {
		t.Fatalf("nothing to audit: %d messages sent, %d delivered", sent, len(seen))
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("message %s reached its recipient %d times", id, n)
		}
	}
}
