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

// TestTUIQuitAndResume drives the real binary in tmux: quitting while a
// teammate works asks first, says how to resume and exits 130; troupe
// resume then reopens the team in the terminal UI, where quitting an idle
// team exits 0 and says it stays resumable.
func TestTUIQuitAndResume(t *testing.T) {
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
      - tool_use: {name: TeamCreate, input: {team_name: e2e}}
      - tool_use: {name: Task, input: {team_name: e2e, name: alice, role: tester, description: tester, permission_mode: bypassPermissions, prompt: "Run the long check."}}
  - agent: team-lead
    times: 0
    reply: [{text: "Noted."}]
  - agent: alice
    contains: "Run the long check."
    reply:
      - tool_use: {name: bash, input: {command: "sleep 120"}}
  - agent: alice
    times: 0
    reply: [{text: "Back and done."}]
`)
	dir := t.TempDir()
	bin := troupeBinary(t)
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	x := &tmux{t: t, socket: fmt.Sprintf("troupe-quit-%d", os.Getpid())}
	t.Cleanup(func() { x.stop() })
	env := fmt.Sprintf("exec env "+asCLI+"=1 ANTHROPIC_API_KEY=x ANTHROPIC_BASE_URL=%s XDG_STATE_HOME=%s %s", srv.URL(), filepath.Join(dir, "state"), bin)
	x.run("new-session", "-d", "-s", "e2e", "-x", "120", "-y", "40", env+" --workspace "+ws+" --dangerously-skip-permissions")
	x.run("set-option", "-t", "e2e", "remain-on-exit", "on")
	x.track()

	x.waitFor("Tell the lead what to do")
	x.typeLine("Start the team.")
	x.until("alice at work in the side panel", func() bool { return strings.Contains(x.screen(), "│ ● alice ") })
	x.keys("C-c")
	x.waitFor("alice work?")
	x.until("the note to say how to resume", func() bool {
		return strings.Contains(x.chat(), "The team stays resumable: troupe resume e2e --workspace "+ws+".")
	})
	x.keys("n")
	x.waitFor("Not quitting; the team carries on.")
	if st := x.paneStatus(); st != "" {
		t.Fatalf("troupe exited (%s) though the human said not to quit", st)
	}
	x.keys("C-c")
	x.waitFor("alice work?")
	x.keys("y")
	if st := x.exitStatus(); st != strconv.Itoa(ExitInterrupted) {
		t.Errorf("quitting while alice works exited %q, want %d; the screen:\n%s", st, ExitInterrupted, x.screen())
	}
	x.until("troupe to say how to resume", func() bool {
		return strings.Contains(x.output(), "troupe: interrupted; team e2e stays resumable; continue with: troupe resume e2e --workspace "+ws+"\n")
	})

	// troupe resume brings the team back in the UI, not headless.
	calls := len(srv.Requests())
	x.run("respawn-pane", "-k", "-t", "e2e", env+" resume e2e --workspace "+ws)
	x.track()
	x.waitFor("Team e2e resumed: alice back with their conversations.")
	x.waitFor("troupe · team e2e")
	// The lead carries on with its conversation restored.
	x.typeLine("Where were we?")
	x.until("the lead's model to be called with its old conversation", func() bool {
		for _, r := range srv.Requests()[calls:] {
			if r.Agent == "team-lead" && strings.Contains(string(r.Body), "Where were we?") && strings.Contains(string(r.Body), "Start the team.") {
				return true
			}
		}
		return false
	})
	x.waitFor("Noted.")
	x.until("the team to be idle", func() bool {
		s := x.screen()
		return strings.Contains(s, "○ alice") && strings.Contains(s, " ready ")
	})
	x.typeLine("/quit")
	if st := x.exitStatus(); st != "0" {
		t.Errorf("quitting an idle team exited %q, want 0; the screen:\n%s", st, x.screen())
	}
	x.until("troupe to say how to resume", func() bool {
		return strings.Contains(x.output(), "troupe: team e2e stays resumable; continue with: troupe resume e2e --workspace "+ws+"\n")
	})
}

// output is everything the pane printed, its history too, wrapped lines
// joined.
func (x *tmux) output() string { return x.run("capture-pane", "-p", "-J", "-S", "-", "-t", "e2e") }

// chat is the main pane's text, its lines joined by spaces, so that what
// it wraps reads whole.
func (x *tmux) chat() string {
	var out []string
	for _, l := range strings.Split(x.screen(), "\n") {
		l, _, _ = strings.Cut(l, "│")
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, " ")
}

// track records the pid of the pane's process, to wait for at the end.
func (x *tmux) track() {
	x.t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(x.run("display-message", "-p", "-t", "e2e", "#{pane_pid}")))
	if err != nil {
		x.t.Fatal(err)
	}
	x.pids = append(x.pids, pid)
}

// stop ends the tmux server and waits (bounded) for the programs it ran,
// so that none outlives the test's directories.
func (x *tmux) stop() {
	_ = exec.Command("tmux", "-L", x.socket, "kill-server").Run()
	for _, pid := range x.pids {
		for deadline := time.Now().Add(10 * time.Second); syscall.Kill(pid, 0) == nil && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond) // polling a condition, with a deadline
		}
	}
}

// paneStatus is the exit status of the pane's program, "" while it runs.
func (x *tmux) paneStatus() string {
	if strings.TrimSpace(x.run("display-message", "-p", "-t", "e2e", "#{pane_dead}")) != "1" {
		return ""
	}
	return strings.TrimSpace(x.run("display-message", "-p", "-t", "e2e", "#{pane_dead_status}"))
}

// exitStatus waits for the pane's program to exit and returns its status
// ("" with a signal). tmux built with libutempter can miss the SIGCHLD
// that says a program ended (tmux/tmux#311): a dead pane with no status
// gets tmux a SIGCHLD again.
func (x *tmux) exitStatus() string {
	x.t.Helper()
	serverPID, _ := strconv.Atoi(strings.TrimSpace(x.run("display-message", "-p", "#{pid}")))
	x.until("troupe to exit", func() bool {
		if strings.TrimSpace(x.run("display-message", "-p", "-t", "e2e", "#{pane_dead}")) != "1" {
			return false
		}
		if x.paneStatus() != "" || strings.TrimSpace(x.run("display-message", "-p", "-t", "e2e", "#{pane_dead_signal}")) != "" {
			return true
		}
		if serverPID > 0 {
			_ = syscall.Kill(serverPID, syscall.SIGCHLD)
		}
		return false
	})
	return x.paneStatus()
}
