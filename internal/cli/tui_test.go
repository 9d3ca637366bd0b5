package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/llm/fakeapi/fakeapitest"
)

// tmux drives a terminal program inside its own tmux server.
type tmux struct {
	t      *testing.T
	socket string
	pids   []int // the programs run in its panes
}

func (x *tmux) run(args ...string) string {
	x.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", x.socket}, args...)...).CombinedOutput()
	if err != nil {
		x.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (x *tmux) screen() string { return x.run("capture-pane", "-p", "-t", "e2e") }

// waitFor polls the screen until it contains want, or fails after a
// deadline.
func (x *tmux) waitFor(want string) {
	x.t.Helper()
	x.until("the screen to show "+strconv.Quote(want), func() bool { return strings.Contains(x.screen(), want) })
}

func (x *tmux) until(what string, ok func() bool) {
	x.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			x.t.Fatalf("timed out waiting for %s; the screen:\n%s", what, x.screen())
		}
		time.Sleep(50 * time.Millisecond) // polling a condition, with a deadline
	}
}

func (x *tmux) keys(keys ...string) { x.run(append([]string{"send-keys", "-t", "e2e"}, keys...)...) }

// typeLine types text literally and presses Enter.
func (x *tmux) typeLine(text string) {
	x.run("send-keys", "-t", "e2e", "-l", text)
	x.keys("Enter")
}

// TestTUIEndToEnd drives the real binary in tmux against the fake API: a
// goal starts a team, the teammate shows up in the side panel, its
// permission request is answered in place, an @message reaches it, the
// lead's own permission question is answered the same way, and /quit leaves
// no process behind.
func TestTUIEndToEnd(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (CI installs it: apt-get install -y tmux)")
	}
	if testing.Short() {
		t.Skip("drives a terminal in tmux; skipped with -short")
	}
	t.Parallel()
	srv := fakeapitest.StartTest(t, `
rules:
  - agent: team-lead
    contains: "Start the team"
    reply:
      - text: "Setting up **a team** for the check."
      - tool_use: {name: TeamCreate, input: {team_name: e2e, pattern: mixed-genius}}
      - tool_use: {name: Task, input: {team_name: e2e, name: alice, role: tester, description: tester, permission_mode: default, prompt: "Run the check."}}
  - agent: team-lead
    contains: "Check the tree yourself"
    reply:
      - tool_use: {name: bash, input: {command: "truncate -s 0 lead-checked"}}
  - agent: team-lead
    contains: "Dissolve the team"
    reply:
      - tool_use: {name: TeamDelete, input: {force: true}}
  - agent: team-lead
    times: 0
    reply: [{text: "Noted."}]
  - agent: alice
    contains: "ping from the human"
    reply: [{text: "pong"}]
  - agent: alice
    contains: "Run the check."
    reply:
      - tool_use: {name: bash, input: {command: "touch checked"}}
  - agent: alice
    times: 0
    reply: [{text: "Checked."}]
`)
	dir := t.TempDir()
	bin := troupeBinary(t)
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}

	x := &tmux{t: t, socket: fmt.Sprintf("troupe-e2e-%d", os.Getpid())}
	pid := 0
	t.Cleanup(func() {
		// On failure troupe may still run: stop it before its workspace
		// is removed.
		_ = exec.Command("tmux", "-L", x.socket, "kill-server").Run()
		for deadline := time.Now().Add(10 * time.Second); pid > 0 && syscall.Kill(pid, 0) == nil && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
	})
	// acceptEdits: the lead's own bash commands are put to the human.
	// XDG_STATE_HOME: the team's key goes beside the workspace, not into
	// the developer's state.
	command := fmt.Sprintf("exec env "+asCLI+"=1 ANTHROPIC_API_KEY=x ANTHROPIC_BASE_URL=%s XDG_STATE_HOME=%s %s --workspace %s --permission-mode acceptEdits", srv.URL(), filepath.Join(dir, "state"), bin, ws)
	x.run("new-session", "-d", "-s", "e2e", "-x", "120", "-y", "40", command)
	x.run("set-option", "-t", "e2e", "remain-on-exit", "on")
	var err error
	pid, err = strconv.Atoi(strings.TrimSpace(x.run("display-message", "-p", "-t", "e2e", "#{pane_pid}")))
	if err != nil {
		t.Fatal(err)
	}

	x.waitFor("Tell the lead what to do")
	x.typeLine("Start the team.")
	x.waitFor("Setting up a team")
	x.waitFor("mixed-genius") // the team's pattern, in the status line
	x.until("alice in the side panel", func() bool {
		screen := x.screen()
		for _, glyph := range []string{"●", "⚑", "○"} {
			if strings.Contains(screen, "│ "+glyph+" alice ") {
				return true
			}
		}
		return false
	})
	x.waitFor("⚑ alice asks to run bash: touch checked")
	if _, err := os.Stat(filepath.Join(ws, "checked")); err == nil {
		t.Fatal("bash ran before the human answered")
	}
	x.keys("y")
	x.waitFor("You allowed alice: bash.")
	x.until("the approved command to run", func() bool {
		_, err := os.Stat(filepath.Join(ws, "checked"))
		return err == nil
	})

	x.typeLine("@alice ping from the human")
	x.until("alice's model to get the message", func() bool {
		for _, r := range srv.Requests() {
			if r.Agent == "alice" && strings.Contains(string(r.Body), "ping from the human") {
				return true
			}
		}
		return false
	})
	x.waitFor("idle") // alice answered and went idle

	// The lead's own question, answered the same way.
	x.typeLine("Check the tree yourself.")
	x.waitFor("⚑ team-lead asks to run bash: truncate -s 0 lead-checked")
	if _, err := os.Stat(filepath.Join(ws, "lead-checked")); err == nil {
		t.Fatal("the lead's bash ran before the human answered")
	}
	x.keys("y")
	x.waitFor("You allowed team-lead: bash.")
	x.until("the lead's approved command to run", func() bool {
		_, err := os.Stat(filepath.Join(ws, "lead-checked"))
		return err == nil
	})

	// Seed 004: the team is dissolved only on the human's explicit
	// approval; the lead's TeamDelete waits for it.
	teamDir := filepath.Join(ws, ".troupe", "teams", "e2e")
	x.typeLine("Dissolve the team.")
	x.waitFor("⚑ team-lead asks to run TeamDelete")
	if _, err := os.Stat(filepath.Join(teamDir, "config.json")); err != nil {
		t.Fatalf("the team was dissolved before the human answered: %v", err)
	}
	x.keys("y")
	x.waitFor("You allowed team-lead: TeamDelete.")
	x.until("the team to be dissolved", func() bool {
		_, err := os.Stat(teamDir)
		return os.IsNotExist(err)
	})

	// Quitting while nobody works does not ask first.
	x.until("the lead's turn to end", func() bool { return strings.Contains(x.screen(), " ready ") })
	x.typeLine("/quit")
	// tmux marks the pane dead when its terminal closes, and knows the exit
	// status only once it has reaped the process. tmux built with
	// libutempter can miss the SIGCHLD that says so (tmux/tmux#311) and leave
	// troupe a zombie: a dead pane with no status gets tmux a SIGCHLD again.
	serverPID, _ := strconv.Atoi(strings.TrimSpace(x.run("display-message", "-p", "#{pid}")))
	x.until("troupe to exit", func() bool {
		if strings.TrimSpace(x.run("display-message", "-p", "-t", "e2e", "#{pane_dead}")) != "1" {
			return false
		}
		if strings.TrimSpace(x.run("display-message", "-p", "-t", "e2e", "#{pane_dead_status}")) != "" ||
			strings.TrimSpace(x.run("display-message", "-p", "-t", "e2e", "#{pane_dead_signal}")) != "" {
			return true
		}
		if serverPID > 0 {
			_ = syscall.Kill(serverPID, syscall.SIGCHLD)
		}
		return false
	})
	if st := strings.TrimSpace(x.run("display-message", "-p", "-t", "e2e", "#{pane_dead_status}")); st != "0" {
		sig := strings.TrimSpace(x.run("display-message", "-p", "-t", "e2e", "#{pane_dead_signal}"))
		// If troupe still runs, ask it where it is stuck (SIGUSR1 dumps its
		// goroutines to a file).
		dumpPath := filepath.Join(os.TempDir(), fmt.Sprintf("troupe-%d-goroutines.txt", pid))
		if syscall.Kill(pid, syscall.SIGUSR1) == nil {
			for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if st, err := os.Stat(dumpPath); err == nil && st.Size() > 0 {
					break
				}
			}
			dumpOut, _ := os.ReadFile(dumpPath)
			t.Logf("goroutines of troupe:\n%s", dumpOut)
		}
		ps, _ := exec.Command("ps", "-eo", "pid,pgid,stat,cmd").Output()
		t.Errorf("troupe exited with status %q (signal %q); processes:\n%s\nthe screen:\n%s", st, sig, ps, x.screen())
	}
	// Nothing of the session may outlive it: not troupe, not its process
	// group, not anything started from the binary.
	// (tmux reaps the pane's process a moment after marking it dead.)
	x.until("the process group to be gone", func() bool { return syscall.Kill(-pid, 0) == syscall.ESRCH })
	if left := processesOf(bin); len(left) > 0 {
		t.Errorf("processes still running %s: %v", bin, left)
	}
	if log, err := os.ReadFile(filepath.Join(ws, ".troupe", "troupe.log")); err == nil && strings.Contains(string(log), "level=ERROR") {
		t.Logf("troupe.log:\n%s", log)
	}
}

// troupeBinary is this test binary as troupe, for a terminal to run:
// a link of the test's own to it (so that a test tells its processes from
// another's by their command line), run with asCLI=1 in its environment.
// No build: the binary is there already, with the race detector when the
// tests have it.
func troupeBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "troupe")
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	return link
}

// processesOf lists the pids whose command line starts with bin.
func processesOf(bin string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.HasPrefix(string(cmdline), bin+"\x00") {
			out = append(out, pid)
		}
	}
	return out
}
