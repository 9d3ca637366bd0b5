package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
)

// relayScript is a team of two teammate processes working four tasks off
// the board, each reporting to the lead, slowly enough to be killed in the
// middle.
const relayScript = `
rules:
  - agent: team-lead
    contains: "Team up"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: relay}}
      - tool_use: {name: TaskCreate, input: {subject: "Part one"}}
      - tool_use: {name: TaskCreate, input: {subject: "Part two"}}
      - tool_use: {name: TaskCreate, input: {subject: "Part three"}}
      - tool_use: {name: TaskCreate, input: {subject: "Part four"}}
      - tool_use: {name: Task, input: {team_name: relay, name: alice, description: writer, prompt: "Take tasks from the board."}}
      - tool_use: {name: Task, input: {team_name: relay, name: bob, description: writer, prompt: "Take tasks from the board."}}
  - agent: team-lead
    times: 0
    reply: [{text: "Done."}]
%s
  - times: 0
    reply: [{text: "Waiting for work."}]
`

const relayTask = `  - contains: "You claimed task #%[1]d"
    times: 0
    reply:
      - tool_use: {name: write_file, input: {path: part%[1]d.md, content: "# Part %[1]d"}}
      - tool_use: {name: TaskUpdate, input: {taskId: "%[1]d", status: completed}}
      - tool_use: {name: SendMessage, input: {recipient: team-lead, content: "part %[1]d is written"}}
`

// hubProc is a `troupe hub` process on a fixed loopback port and data
// directory, so that it can be killed and started again in its place.
type hubProc struct {
	t              *testing.T
	port, dir, tok string
	cmd            *exec.Cmd
	out            bytes.Buffer
}

func (h *hubProc) start() {
	h.t.Helper()
	h.out.Reset()
	h.cmd = troupeCmd(h.t, "hub", "--addr", "127.0.0.1:"+h.port, "--dir", h.dir, "--token", h.tok)
	h.cmd.Stdout, h.cmd.Stderr = &h.out, &h.out
	if err := h.cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+h.port, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("hub not listening on %s after 60s: %v\n%s", h.port, err, h.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *hubProc) kill9() {
	_ = h.cmd.Process.Signal(syscall.SIGKILL)
	_ = h.cmd.Wait()
}

func (h *hubProc) stop() {
	_ = h.cmd.Process.Signal(syscall.SIGINT)
	_ = h.cmd.Wait()
}

// watchRelay waits for the lead to create team relay in st and starts
// reading its journal; out is the lead's output, shown when it never does.
func watchRelay(ctx context.Context, t *testing.T, st store.Store, out *bytes.Buffer) (store.Team, *journalWaiter) {
	t.Helper()
	var tm store.Team
	var err error
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) { // the store has no team-created event
		if tm, err = st.Team(ctx, "relay"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("team relay never created: %v\n%s", err, out.String())
		}
	}
	ch, err := tm.Journal().Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return tm, &journalWaiter{j: tm.Journal(), ch: ch}
}

// journalWaiter reads a team's journal through the store as it grows.
type journalWaiter struct {
	j      store.Journal
	ch     <-chan struct{}
	cursor store.Cursor
	seen   []store.Event
	queued []store.Event // read but not yet looked at by until
}

// until waits for an event after the ones already seen that ok accepts.
func (w *journalWaiter) until(ctx context.Context, ok func(store.Event) bool) (store.Event, error) {
	for {
		for len(w.queued) > 0 {
			e := w.queued[0]
			w.queued = w.queued[1:]
			w.seen = append(w.seen, e)
			if ok(e) {
				return e, nil
			}
		}
		evs, c, err := w.j.ReadAfter(ctx, w.cursor)
		if err == nil {
			w.cursor = c
			w.queued = evs
			if len(evs) > 0 {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return store.Event{}, fmt.Errorf("%w (journal read: %v)", ctx.Err(), err)
		case <-w.ch:
		case <-time.After(2 * time.Second):
			// A watch set up against a hub that was killed and started
			// again may have missed a wake; reading again is cheap.
		}
	}
}

// TestNatsKillAndResume kills with SIGKILL, in one run of a team on a
// `troupe hub` process: a teammate process at its first claim (the lead
// restarts it), then the hub itself after a task is completed (started
// again on the same data directory), and resumes the team when the lead
// did not finish by itself. Every task ends completed exactly once, none is
// claimed twice, and every message sent was delivered once or waits in its
// inbox: 0 lost, 0 duplicated, 0 double claims.
func TestNatsKillAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and resumes real processes; not run with -short")
	}
	for _, tc := range []struct {
		name     string
		killLead bool // the lead dies with the hub: a resume finishes the run
		atEnd    bool // the hub dies at the team's last completion
	}{
		{"hub", false, false},
		{"hub-and-lead", true, false},
		{"hub-at-end", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) { natsKillAndResume(t, tc.killLead, tc.atEnd) })
	}
}

func natsKillAndResume(t *testing.T, killLead, atEnd bool) {
	var tasks string
	for i := 1; i <= 4; i++ {
		tasks += fmt.Sprintf(relayTask, i)
	}
	script, err := fakeapi.ParseScript([]byte(fmt.Sprintf(relayScript, tasks)))
	if err != nil {
		t.Fatal(err)
	}
	api := fakeapi.New(script, fakeapi.Options{Latency: 150 * time.Millisecond})
	apiURL, err := api.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	hub := &hubProc{t: t, port: port, dir: filepath.Join(t.TempDir(), "hub"), tok: "kill-test-token-0123456789"}
	hub.start()
	defer hub.stop()
	storeURL := "nats://127.0.0.1:" + port

	ws := t.TempDir()
	env := []string{"ANTHROPIC_BASE_URL=" + apiURL, "ANTHROPIC_API_KEY=sk-fake", "NATS_TOKEN=" + hub.tok}
	lead := troupeCmd(t, "-p", "Team up", "--workspace", ws, "--dangerously-skip-permissions", "--teammate-mode", "process", "--store", storeURL)
	lead.Env = append(lead.Env, env...)
	var leadOut bytes.Buffer
	lead.Stdout, lead.Stderr = &leadOut, &leadOut
	if err := lead.Start(); err != nil {
		t.Fatal(err)
	}
	leadDone := make(chan error, 1)
	go func() { leadDone <- lead.Wait() }()
	defer func() {
		_ = lead.Process.Kill()
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, err := store.Open(ctx, storeURL+"?token="+hub.tok)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tm, jw := watchRelay(ctx, t, st, &leadOut)

	// 1. A teammate process dies at its first claim.
	claim, err := jw.until(ctx, func(e store.Event) bool { return e.Type == "claim" })
	if err != nil {
		t.Fatalf("no claim: %v\n%s", err, leadOut.String())
	}
	victim := fmt.Sprint(claim.Fields["owner"])
	r, err := tm.ReadRoster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := r.Member(victim)
	if !ok || m.PID <= 0 || m.PID == lead.Process.Pid {
		t.Fatalf("no process of %s on the roster: %+v", victim, m)
	}
	t.Logf("kill -9 %s (pid %d) at its claim of task %v", victim, m.PID, claim.Fields["task"])
	if err := syscall.Kill(m.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	restarted := func(e store.Event) bool { return e.Type == "restart" && e.Fields["member"] == victim }

	// 2. The hub dies at the first completion after that kill, while tasks
	// are still open (mid-run: waiting for the restart first could let
	// the whole board finish), and starts again on its data directory.
	completions := 0
	wantCompletions := 1
	if atEnd {
		// The team's last completion: the lead has only to see it, end
		// its teammates and stop, all through a hub that is gone.
		wantCompletions = 4
		for _, e := range jw.seen {
			if e.Type == "complete" {
				completions++
			}
		}
	}
	done, err := jw.until(ctx, func(e store.Event) bool {
		if e.Type == "complete" {
			completions++
		}
		return completions >= wantCompletions
	})
	if err != nil {
		t.Fatalf("no task completed: %v\n%s", err, leadOut.String())
	}
	t.Logf("kill -9 the hub after task %v was completed", done.Fields["task"])
	hub.kill9()
	if killLead {
		t.Logf("kill -9 the lead (pid %d) while the hub is down", lead.Process.Pid)
		_ = lead.Process.Signal(syscall.SIGKILL)
	}
	hub.start()
	if !killLead && !slices.ContainsFunc(jw.seen, restarted) {
		if _, err := jw.until(ctx, restarted); err != nil {
			t.Fatalf("%s never restarted: %v\n%s", victim, err, leadOut.String())
		}
	}

	var leadErr error
	select {
	case leadErr = <-leadDone:
	case <-ctx.Done():
		t.Fatalf("the lead did not end after the hub restarted\n%s", leadOut.String())
	}
	t.Logf("lead ended: %v", leadErr)
	if killLead != (leadErr != nil) {
		t.Errorf("lead ended with %v (killed: %v)\n%s", leadErr, killLead, leadOut.String())
		dumpTeam(t, tm)
		t.FailNow()
	}
	if killLead {
		// Its teammates end with it (SIGTERM from the kernel when their
		// parent dies); the resume starts them again.
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if exec.Command("pgrep", "-f", ws).Run() != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("teammates of the killed lead still run after 60s")
			}
		}
		res := troupeCmd(t, "resume", "relay", "--workspace", ws, "--headless", "--teammate-mode", "process", "--store", storeURL)
		res.Env = append(res.Env, env...)
		if b, err := res.CombinedOutput(); err != nil {
			t.Fatalf("resume: %v\n%s\nthe run was:\n%s", err, b, leadOut.String())
		}
	}
	if b, err := exec.Command("pgrep", "-f", ws).Output(); err == nil {
		t.Errorf("processes left running for %s:\n%s", ws, b)
	}
	auditStore(ctx, t, tm, []string{"1", "2", "3", "4"})
}

// auditStore checks a team's state through the store once its processes
// are gone: every task completed once and claimed once, every message
// delivered at most once and, if never delivered, still in its inbox.
func auditStore(ctx context.Context, t *testing.T, tm store.Team, taskIDs []string) {
	t.Helper()
	events, err := tm.Journal().Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	completed, claimed := map[string]int{}, map[string]int{}
	owner := map[string]string{}
	sent := map[string]string{} // id -> recipient
	for _, e := range events {
		task := fmt.Sprint(e.Fields["task"])
		switch e.Type {
		case "complete":
			completed[task]++
			owner[task] = ""
		case "claim":
			claimed[task]++
			if owner[task] != "" {
				t.Errorf("task %s claimed by %v while %s held it (double claim)", task, e.Fields["owner"], owner[task])
			}
			owner[task] = fmt.Sprint(e.Fields["owner"])
		case "hand_back":
			t.Logf("journal: %s %v", e.Type, e.Fields)
			owner[task] = "" // back on the board: it may be claimed again
		case "dead":
			t.Logf("journal: %s %v", e.Type, e.Fields)
			if freed, ok := e.Fields["freed_tasks"].([]any); ok {
				for _, id := range freed {
					owner[fmt.Sprint(id)] = ""
				}
			}
		case "send":
			sent[fmt.Sprint(e.Fields["id"])] = fmt.Sprint(e.Fields["to"])
		}
	}
	for _, id := range taskIDs {
		if completed[id] != 1 {
			t.Errorf("task %s completed %d times, want exactly once", id, completed[id])
		}
	}
	tasks, err := tm.Tasks().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		if task.Status != store.TaskCompleted {
			t.Errorf("task %s is %s, want completed", task.ID, task.Status)
		}
	}
	r, err := tm.ReadRoster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, name := range r.Names() {
		lines, err := tm.Transcripts().Read(ctx, name)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("transcript of %s: %v", name, err)
		}
		for _, l := range lines {
			var rec map[string]any
			if json.Unmarshal(l, &rec) != nil {
				continue
			}
			tallyDelivered(seen, rec)
		}
	}
	checkDeliveredOnce(t, len(sent), seen)
	waiting := map[string]bool{}
	for _, name := range r.Names() {
		msgs, err := tm.Mailbox().Peek(ctx, name)
		if err != nil {
			t.Fatalf("inbox of %s: %v", name, err)
		}
		for _, m := range msgs {
			waiting[m.ID] = true
		}
	}
	for id, to := range sent {
		if seen[id] == 0 && !waiting[id] {
			t.Errorf("message %s to %s was lost: never delivered and not in its inbox", id, to)
		}
	}
	t.Logf("audit: %d events, %d messages sent, %d delivered, %d waiting; claims %v", len(events), len(sent), len(seen), len(waiting), claimed)
}

// dumpTeam logs the board and the end of the journal of a run that failed.
func dumpTeam(t *testing.T, tm store.Team) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if tasks, err := tm.Tasks().List(ctx); err == nil {
		for _, task := range tasks {
			t.Logf("task %s %s %s", task.ID, task.Status, task.Owner)
		}
	}
	if evs, err := tm.Journal().Tail(ctx, 25); err == nil {
		for _, e := range evs {
			t.Logf("journal %s %s %s %v", e.TS.Format("15:04:05.000"), e.Agent, e.Type, e.Fields)
		}
	}
	if r, err := tm.ReadRoster(ctx); err == nil {
		for _, m := range r.Members {
			t.Logf("member %s %s pid %d heartbeat %s", m.Name, m.Status, m.PID, m.HeartbeatAt.Format("15:04:05.000"))
		}
		// What each inbox still holds unacked: a lead that does not end
		// with every task done sees mail it thinks is unread.
		for _, name := range r.Recipients() {
			waiting, err := tm.Mailbox().Peek(ctx, name)
			if err != nil {
				t.Logf("inbox %s: %v", name, err)
				continue
			}
			for _, m := range waiting {
				t.Logf("inbox %s waiting: %s %s from %s %q", name, m.ID, m.Type, m.From, m.Summary)
			}
		}
	}
}

// remoteRelayScript is relayScript's team spawned onto other machines:
// two `troupe agent --join --wait` processes in pool "p".
const remoteRelayScript = `
rules:
  - agent: team-lead
    contains: "Team up"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: relay}}
      - tool_use: {name: TaskCreate, input: {subject: "Part one"}}
      - tool_use: {name: TaskCreate, input: {subject: "Part two"}}
      - tool_use: {name: TaskCreate, input: {subject: "Part three"}}
      - tool_use: {name: TaskCreate, input: {subject: "Part four"}}
      - tool_use: {name: Task, input: {team_name: relay, name: alice, description: writer, prompt: "Take tasks from the board.", isolation: remote, pool: p}}
      - tool_use: {name: Task, input: {team_name: relay, name: bob, description: writer, prompt: "Take tasks from the board.", isolation: remote, pool: p}}
  - agent: team-lead
    times: 0
    reply: [{text: "Done."}]
%s
  - times: 0
    reply: [{text: "Waiting for work."}]
`

// TestNatsRemoteMemberKillAndRestart kills with SIGKILL a teammate on
// another machine (a `troupe agent --join` process in its own clone) at its
// first claim, and starts it again by hand under the same name with a copy
// of the team's key, as a person on that machine would: its task is
// completed, every branch is merged, and the store shows 0 lost, 0
// duplicated, 0 double claims.
func TestNatsRemoteMemberKillAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts real processes; not run with -short")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	var tasks string
	for i := 1; i <= 4; i++ {
		tasks += fmt.Sprintf(relayTask, i)
	}
	script, err := fakeapi.ParseScript([]byte(fmt.Sprintf(remoteRelayScript, tasks)))
	if err != nil {
		t.Fatal(err)
	}
	api := fakeapi.New(script, fakeapi.Options{Latency: 150 * time.Millisecond})
	apiURL, err := api.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()

	root := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	src, remote, ws := filepath.Join(root, "src"), filepath.Join(root, "remote.git"), filepath.Join(root, "ws")
	git("init", "-q", "-b", "main", src)
	if err := os.WriteFile(filepath.Join(src, "README.md"), []byte("# relay\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("-C", src, "add", "-A")
	git("-C", src, "commit", "-q", "-m", "start")
	git("clone", "-q", "--bare", src, remote)
	git("clone", "-q", remote, ws)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	hub := &hubProc{t: t, port: port, dir: filepath.Join(root, "hub"), tok: "remote-kill-token-0123456789"}
	hub.start()
	defer hub.stop()
	storeURL := "nats://127.0.0.1:" + port
	env := []string{"ANTHROPIC_BASE_URL=" + apiURL, "ANTHROPIC_API_KEY=sk-fake", "NATS_TOKEN=" + hub.tok,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"}

	// Two machines wait in pool p, each with its own workspace.
	type machine struct {
		dir  string
		cmd  *exec.Cmd
		out  bytes.Buffer
		done chan error
	}
	machines := map[string]*machine{}
	startAgent := func(name string, args ...string) {
		m := machines[name]
		if m == nil {
			m = &machine{dir: filepath.Join(root, "m-"+name)}
			machines[name] = m
		}
		m.out.Reset()
		m.cmd = troupeCmd(t, append([]string{"agent", "--join", storeURL, "--workspace", m.dir}, args...)...)
		m.cmd.Env = append(m.cmd.Env, env...)
		m.cmd.Stdout, m.cmd.Stderr = &m.out, &m.out
		if err := m.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		m.done = make(chan error, 1)
		go func(c *exec.Cmd, done chan error) { done <- c.Wait() }(m.cmd, m.done)
	}
	defer func() {
		for _, m := range machines {
			_ = m.cmd.Process.Kill()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, err := store.Open(ctx, storeURL+"?token="+hub.tok)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, name := range []string{"alice", "bob"} {
		startAgent(name, "--wait", "--pool", "p", "--name", name)
	}
	// Both wait before the lead spawns into the pool: the pool's roster
	// lists them.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if pt, err := st.Team(ctx, "pool-p"); err == nil {
			if r, err := pt.ReadRoster(ctx); err == nil && len(r.Members) >= 2 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agents never waited in pool p:\n%s\n%s", machines["alice"].out.String(), machines["bob"].out.String())
		}
	}

	lead := troupeCmd(t, "-p", "Team up", "--workspace", ws, "--dangerously-skip-permissions", "--store", storeURL)
	lead.Env = append(lead.Env, env...)
	var leadOut bytes.Buffer
	lead.Stdout, lead.Stderr = &leadOut, &leadOut
	if err := lead.Start(); err != nil {
		t.Fatal(err)
	}
	leadDone := make(chan error, 1)
	go func() { leadDone <- lead.Wait() }()
	defer func() { _ = lead.Process.Kill() }()

	tm, jw := watchRelay(ctx, t, st, &leadOut)
	claim, err := jw.until(ctx, func(e store.Event) bool { return e.Type == "claim" })
	if err != nil {
		t.Fatalf("no claim: %v\n%s", err, leadOut.String())
	}
	victim := fmt.Sprint(claim.Fields["owner"])
	m := machines[victim]
	if m == nil {
		t.Fatalf("task %v claimed by %q, not by a machine's agent", claim.Fields["task"], victim)
	}
	t.Logf("kill -9 %s (pid %d) at its claim of task %v", victim, m.cmd.Process.Pid, claim.Fields["task"])
	if err := m.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-m.done

	// The person on that machine starts it again, with a copy of the
	// team's key (the lead's, in the shared test state directory).
	keys, err := filepath.Glob(filepath.Join(stateHome(t), "troupe", "keys", "*.key"))
	if err != nil || len(keys) != 1 {
		t.Fatalf("want the lead's one team key, found %v (%v)", keys, err)
	}
	keyCopy := filepath.Join(root, "relay.key")
	b, err := os.ReadFile(keys[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyCopy, b, 0o600); err != nil {
		t.Fatal(err)
	}
	startAgent(victim, "--team", "relay", "--name", victim, "--key-file", keyCopy)

	var leadErr error
	select {
	case leadErr = <-leadDone:
	case <-ctx.Done():
		dumpTeam(t, tm)
		t.Fatalf("the lead did not end after %s restarted\n%s\n%s:\n%s", victim, leadOut.String(), victim, m.out.String())
	}
	if leadErr != nil {
		dumpTeam(t, tm)
		t.Fatalf("lead: %v\n%s", leadErr, leadOut.String())
	}
	t.Logf("lead ended")
	// The machines' agents are stopped as a person would (join_remote.txtar
	// does the same).
	for name, m := range machines {
		_ = m.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-m.done:
		case <-ctx.Done():
			t.Fatalf("agent %s still runs after SIGINT\n%s", name, m.out.String())
		}
	}
	if !strings.Contains(m.out.String(), victim+" of team relay works in "+m.dir) {
		t.Errorf("%s did not come back in its clone %s:\n%s", victim, m.dir, m.out.String())
	}
	auditStore(ctx, t, tm, []string{"1", "2", "3", "4"})
	board, err := tm.Tasks().Board(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var merges []string
	for _, r := range team.MergeQueue(board) {
		merges = append(merges, r.Task+" "+r.Status)
	}
	slices.Sort(merges)
	if diff := cmp.Diff([]string{"1 merged", "2 merged", "3 merged", "4 merged"}, merges); diff != "" {
		t.Errorf("merge queue (-want +got):\n%s", diff)
	}
	for i := 1; i <= 4; i++ {
		if _, err := os.Stat(filepath.Join(ws, fmt.Sprintf("part%d.md", i))); err != nil {
			t.Errorf("the lead's checkout lacks part%d.md: %v", i, err)
		}
	}
}
