package team_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
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
