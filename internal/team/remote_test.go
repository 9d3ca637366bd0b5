package team_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/llm/anthropic"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/tool"
)

func withRemote(url string) option { return func(c *team.Config) { c.Remote.URL = url } }

// bareRemoteOf makes a bare clone of the workspace's repository, the
// team's remote.
func bareRemoteOf(t *testing.T, ws string) string {
	t.Helper()
	remote := filepath.Join(t.TempDir(), "remote.git")
	if out, err := exec.Command("git", "clone", "--quiet", "--bare", ws, remote).CombinedOutput(); err != nil {
		t.Fatalf("git clone --bare: %v\n%s", err, out)
	}
	return remote
}

// TestRemoteSpawnWithoutWaitingAgent: spawning a remote teammate into a
// pool nobody waits in fails with an error naming the pool, and puts
// nobody on the roster; the team records the remote it was given.
func TestRemoteSpawnWithoutWaitingAgent(t *testing.T) {
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Go"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: rt}}
      - tool_use: {name: Task, input: {team_name: rt, name: alice, description: a, prompt: "Work.", isolation: remote, pool: nowhere}}
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
`, withRemote("/srv/git/blog.git"))
	f.run("Go")
	if !f.leadSaw(`no agent is waiting in pool \"nowhere\"`) {
		t.Errorf("the lead was not told that pool nowhere is empty; it saw:\n%s", strings.Join(f.requests(store.LeadName), "\n"))
	}
	r := f.roster()
	if _, ok := r.Member("alice"); ok {
		t.Error("alice is on the roster after a failed spawn")
	}
	if r.Remote != "/srv/git/blog.git" || r.Base != "main" {
		t.Errorf("roster remote, base = %q, %q; want /srv/git/blog.git, main", r.Remote, r.Base)
	}
}

// TestRemoteSpawnIntoPool: an agent waits in a pool; the lead spawns
// alice into it; the agent gets its assignment with the team's key
// (sealed to it on the way) and leaves the pool; Join clones the team's
// remote into its workspace on its branch and records it on the roster.
func TestRemoteSpawnIntoPool(t *testing.T) {
	src := t.TempDir()
	gitInit(t, src, map[string]string{"a.txt": "one\n"})
	remote := bareRemoteOf(t, src)
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Go"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: rt}}
      - tool_use: {name: Task, input: {team_name: rt, name: alice, role: writer, model: m-1, description: a, prompt: "Write the notes.", isolation: remote, pool: machines}}
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
`, withRemote(remote))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	type waited struct {
		a   team.Assignment
		err error
	}
	ready, got := make(chan string, 1), make(chan waited, 1)
	go func() {
		a, err := team.WaitInPool(ctx, f.st, "machines", "", func(name string) { ready <- name })
		got <- waited{a, err}
	}()
	agent := <-ready
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		_, _ = f.sess.RunHeadless(runCtx, "Go")
	}()
	w := <-got
	stopRun()
	<-ran
	if w.err != nil {
		t.Fatal(w.err)
	}
	key, err := f.keys.Load("rt")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w.a.TeamKey, key) {
		t.Error("the assignment's team key is not the team's")
	}
	w.a.TeamKey, w.a.SealedKey = nil, ""
	if d := cmp.Diff(team.Assignment{Team: "rt", Name: "alice", Role: "writer", Model: "m-1", Prompt: "Write the notes."}, w.a); d != "" {
		t.Errorf("assignment (-want +got):\n%s", d)
	}
	pool, err := f.st.Team(ctx, "pool-machines")
	if err != nil {
		t.Fatal(err)
	}
	pr, err := pool.ReadRoster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := pr.Member(agent); !ok || m.Status != store.StatusShutdown {
		t.Errorf("the agent taken from the pool is %+v; want it shut down there", m)
	}

	tm, err := f.st.Team(ctx, "rt")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := team.Join(ctx, tm, "alice", filepath.Join(t.TempDir(), "machine"))
	if err != nil {
		t.Fatal(err)
	}
	if b := gitIn(t, dir, "branch", "--show-current"); b != "troupe/rt/alice" {
		t.Errorf("the clone is on %q, want troupe/rt/alice", b)
	}
	if readFile(t, filepath.Join(dir, "a.txt")) != "one\n" {
		t.Error("the clone lacks the remote's files")
	}
	r, err := tm.ReadRoster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := r.Member("alice")
	if m == nil || m.Placement != team.PlacementRemote || m.Worktree != dir || m.Branch != "troupe/rt/alice" || m.Role != "writer" {
		t.Errorf("alice on the roster: %+v", m)
	}

}

// TestRemoteConflictGoesBackToOwner: two teammates on other machines
// (goroutines here, each in its own clone) change the same line, and
// complete at once, their branches pushed and queued. alice's merges; bob's
// conflicts in the lead's merge queue: his task goes back in progress with
// him, he is sent the file and the hunk, the lead hears of it, and once bob
// fetched and merged the base in his clone and completed again, the lead's
// checkout has his resolution.
func TestRemoteConflictGoesBackToOwner(t *testing.T) {
	remote := filepath.Join(t.TempDir(), "remote.git")
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Go"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: rt}}
      - tool_use: {name: TaskCreate, input: {subject: "Alice edits c", role: a}}
      - tool_use: {name: TaskCreate, input: {subject: "Bob edits c", role: b, blockedBy: ["1"]}}
      - tool_use: {name: Task, input: {team_name: rt, name: alice, role: a, description: a, prompt: "Wait.", isolation: remote, pool: p}}
      - tool_use: {name: Task, input: {team_name: rt, name: bob, role: b, description: b, prompt: "Wait.", isolation: remote, pool: p}}
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
  - agent: alice
    contains: "task #1: Alice edits c"
    reply:
      - tool_use: {name: write_file, input: {path: c.txt, content: "alice\n"}}
      - tool_use: {name: TaskUpdate, input: {taskId: "1", status: completed}}
  - agent: bob
    contains: "is not completed: merging your branch"
    reply:
      - tool_use: {name: bash, input: {command: "git fetch origin && git merge origin/main || true"}}
      - tool_use: {name: write_file, input: {path: c.txt, content: "bob and alice\n"}}
      - tool_use: {name: TaskUpdate, input: {taskId: "2", status: completed}}
  - agent: bob
    contains: "task #2: Bob edits c"
    reply:
      - tool_use: {name: write_file, input: {path: c.txt, content: "bob\n"}}
      - tool_use: {name: TaskUpdate, input: {taskId: "2", status: completed}}
  - agent: alice
    times: 0
    reply: [{text: "done"}]
  - agent: bob
    times: 0
    reply: [{text: "done"}]
`, withRemote(remote))
	gitInit(t, f.ws, map[string]string{"c.txt": "three\n"})
	if out, err := exec.Command("git", "clone", "--quiet", "--bare", f.ws, remote).CombinedOutput(); err != nil {
		t.Fatalf("git clone --bare: %v\n%s", err, out)
	}
	t.Setenv("GIT_AUTHOR_NAME", "t")
	t.Setenv("GIT_AUTHOR_EMAIL", "t@t")
	t.Setenv("GIT_COMMITTER_NAME", "t")
	t.Setenv("GIT_COMMITTER_EMAIL", "t@t")
	p, err := anthropic.New(anthropic.Config{APIKey: "test", BaseURL: f.srv.URL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 2)
	for _, name := range []string{"alice", "bob"} {
		ready := make(chan string, 1)
		go func() {
			ran <- func() error {
				a, err := team.WaitInPool(ctx, f.st, "p", name, func(string) { close(ready) })
				if err != nil {
					return err
				}
				tm, err := f.st.Team(ctx, a.Team)
				if err != nil {
					return err
				}
				dir, err := team.Join(ctx, tm, a.Name, filepath.Join(t.TempDir(), a.Name))
				if err != nil {
					return err
				}
				ws, err := tool.OpenWorkspace(dir)
				if err != nil {
					return err
				}
				defer ws.Close()
				if err := team.RunMember(ctx, team.MemberConfig{Team: tm, Name: a.Name, Provider: p, Workspace: ws, Key: a.TeamKey}); err != nil && ctx.Err() == nil {
					return err
				}
				return nil
			}()
		}()
		<-ready
	}
	f.run("Go")
	cancel()
	for range 2 {
		if err := <-ran; err != nil {
			t.Error(err)
		}
	}
	if got := readFile(t, filepath.Join(f.ws, "c.txt")); got != "bob and alice\n" {
		t.Errorf("the lead's c.txt = %q; want bob's resolution", got)
	}
	if !f.leadSaw("did not merge: branch troupe/rt/bob conflicts with main in c.txt. It is back in progress with bob") {
		t.Error("the lead was not told of bob's conflict")
	}
	var saw bool
	for _, b := range f.requests("bob") {
		if strings.Contains(b, "origin/main has:\\nalice\\n--- your branch has:\\nbob\\n") {
			saw = true
		}
	}
	if !saw {
		t.Errorf("bob was not shown the hunk; he saw:\n%s", strings.Join(f.requests("bob"), "\n"))
	}
	all := strings.Join(f.requests("bob"), "\n")
	for _, want := range []string{"pushed and queued for merging", "In your clone, run `git fetch origin` and `git merge origin/main`"} {
		if !strings.Contains(all, want) {
			t.Errorf("bob was not told %q; he saw:\n%s", want, all)
		}
	}
	board, err := f.st.Team(context.Background(), "rt")
	if err != nil {
		t.Fatal(err)
	}
	b, err := board.Tasks().Board(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range team.MergeQueue(b) {
		got = append(got, r.Task+" "+r.Owner+" "+r.Status)
	}
	if d := cmp.Diff([]string{"1 alice merged", "2 bob merged"}, got); d != "" {
		t.Errorf("merge queue (-want +got):\n%s", d)
	}
	if out := gitIn(t, remote, "log", "--format=%s", "main"); !strings.Contains(out, "Bob edits c") {
		t.Errorf("the remote's main lacks bob's merge:\n%s", out)
	}
}

// TestRemoteMemberEndsWithTeamDelete: a teammate on another machine
// (RunMember in its own clone, as troupe agent --join runs it) ends by
// itself when the lead deletes the team: TeamDelete's shutdown request
// reaches it through the store, it approves once its turn is over, and its
// runtime returns, without any cancel of its own.
func TestRemoteMemberEndsWithTeamDelete(t *testing.T) {
	src := t.TempDir()
	gitInit(t, src, map[string]string{"a.txt": "one\n"})
	remote := bareRemoteOf(t, src)
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Go"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: rt}}
      - tool_use: {name: TaskCreate, input: {subject: "Note it"}}
      - tool_use: {name: Task, input: {team_name: rt, name: alice, description: a, prompt: "Wait.", isolation: remote, pool: p}}
  - agent: team-lead
    contains: "alice has noted it"
    reply:
      - tool_use: {name: TeamDelete, input: {force: true}}
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
  - agent: alice
    contains: "task #1: Note it"
    reply:
      - tool_use: {name: write_file, input: {path: note.txt, content: "noted\n"}}
      - tool_use: {name: TaskUpdate, input: {taskId: "1", status: completed}}
      - tool_use: {name: SendMessage, input: {recipient: team-lead, content: "alice has noted it"}}
  - agent: alice
    times: 0
    reply: [{text: "done"}]
`, withRemote(remote))
	t.Setenv("GIT_AUTHOR_NAME", "t")
	t.Setenv("GIT_AUTHOR_EMAIL", "t@t")
	t.Setenv("GIT_COMMITTER_NAME", "t")
	t.Setenv("GIT_COMMITTER_EMAIL", "t@t")
	p, err := anthropic.New(anthropic.Config{APIKey: "test", BaseURL: f.srv.URL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ready, ran := make(chan struct{}), make(chan error, 1)
	go func() {
		ran <- func() error {
			a, err := team.WaitInPool(ctx, f.st, "p", "alice", func(string) { close(ready) })
			if err != nil {
				return err
			}
			tm, err := f.st.Team(ctx, a.Team)
			if err != nil {
				return err
			}
			dir, err := team.Join(ctx, tm, a.Name, filepath.Join(t.TempDir(), a.Name))
			if err != nil {
				return err
			}
			ws, err := tool.OpenWorkspace(dir)
			if err != nil {
				return err
			}
			defer ws.Close()
			return team.RunMember(ctx, team.MemberConfig{Team: tm, Name: a.Name, Provider: p, Workspace: ws, Key: a.TeamKey})
		}()
	}()
	<-ready
	f.run("Go")
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("the remote teammate's runtime ended with %v", err)
		}
	case <-ctx.Done():
		reqs := f.requests("team-lead")
		t.Fatalf("the remote teammate still runs after TeamDelete; the lead's last turn began:\n%s", lastUserTurn(t, reqs[len(reqs)-1]))
	}
	if !f.leadSaw("alice has noted it") {
		t.Error("the lead never heard from alice")
	}
	if _, err := f.st.Team(context.Background(), "rt"); !errors.Is(err, store.ErrTeamNotFound) {
		t.Errorf("team rt after TeamDelete: %v, want ErrTeamNotFound", err)
	}
}
