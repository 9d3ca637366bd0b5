package team_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/pattern"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
)

// gitInit makes the workspace a git repository on branch main with one
// commit of files.
func gitInit(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed (.ci/run installs it)")
	}
	gitIn(t, dir, "init", "--quiet", "-b", "main")
	for f, c := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitIn(t, dir, "add", "--", ".")
	gitIn(t, dir, "reset", "--quiet", "--", ".troupe")
	gitIn(t, dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "start")
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func withIsolation(iso string) option { return func(c *team.Config) { c.Isolation = iso } }

// TestWorktreeCleanMerge: two teammates in their own worktrees change
// different files; each completion commits on its branch and merges into
// main (the first fast-forwards, the second makes a merge commit); the
// roster records path and branch; TeamDelete removes worktrees and
// branches and leaves no stale .git/worktrees entry.
func TestWorktreeCleanMerge(t *testing.T) {
	t.Parallel()
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Build it"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: wt}}
      - tool_use: {name: TaskCreate, input: {subject: "Edit a", files: ["a.txt"]}}
      - tool_use: {name: TaskCreate, input: {subject: "Edit b", files: ["b.txt"], blockedBy: ["1"]}}
      - tool_use: {name: Task, input: {team_name: wt, name: alice, description: a, prompt: "Wait for the lead.", isolation: worktree}}
      - tool_use: {name: Task, input: {team_name: wt, name: bob, description: b, prompt: "Wait for task 2."}}
      - tool_use: {name: SendMessage, input: {type: message, recipient: alice, content: "Take task 1 now."}}
  - agent: team-lead
    contains: "Clean up"
    reply:
      - tool_use: {name: MergeStatus, input: {}}
      - tool_use: {name: TeamDelete, input: {}}
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
  - agent: alice
    contains: "Take task 1 now."
    reply:
      - tool_use: {name: TaskUpdate, input: {taskId: "1", status: in_progress, owner: alice}}
      - tool_use: {name: write_file, input: {path: a.txt, content: "alice\n"}}
      - tool_use: {name: TaskUpdate, input: {taskId: "1", status: completed}}
  - agent: bob
    contains: "Edit b"
    reply:
      - tool_use: {name: write_file, input: {path: b.txt, content: "bob\n"}}
      - tool_use: {name: TaskUpdate, input: {taskId: "2", status: completed}}
  - agent: alice
    times: 0
    reply: [{text: "done"}]
  - agent: bob
    times: 0
    reply: [{text: "done"}]
`, withIsolation(team.IsolationWorktree))
	gitInit(t, f.ws, map[string]string{"a.txt": "one\n", "b.txt": "two\n"})
	f.run("Build it.")

	r := f.roster()
	for _, name := range []string{"alice", "bob"} {
		m, ok := r.Member(name)
		if !ok {
			t.Fatalf("%s not on the roster", name)
		}
		want := filepath.Join(f.ws, ".troupe", "worktrees", "wt", name)
		if w, err := filepath.EvalSymlinks(f.ws); err == nil {
			want = filepath.Join(w, ".troupe", "worktrees", "wt", name)
		}
		if m.Worktree != want || m.Branch != "troupe/wt/"+name || m.CWD != want {
			t.Errorf("%s: worktree %q branch %q cwd %q; want %q, troupe/wt/%s", name, m.Worktree, m.Branch, m.CWD, want, name)
		}
	}
	if got := readFile(t, filepath.Join(f.ws, "a.txt")) + readFile(t, filepath.Join(f.ws, "b.txt")); got != "alice\nbob\n" {
		t.Errorf("main's files = %q, want both changes merged", got)
	}
	if log := gitIn(t, f.ws, "log", "--format=%s", "main"); !strings.Contains(log, "Edit a") || !strings.Contains(log, "Edit b") {
		t.Errorf("main's log lacks the tasks' commits:\n%s", log)
	}
	tm, err := f.st.Team(context.Background(), "wt")
	if err != nil {
		t.Fatal(err)
	}
	board, err := tm.Tasks().Board(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range team.MergeQueue(board) {
		got = append(got, m.Task+" "+m.Owner+" "+m.Status+" "+m.How)
	}
	if d := cmp.Diff([]string{"1 alice merged fast-forward", "2 bob merged merge commit"}, got); d != "" {
		t.Errorf("merge queue (-want +got):\n%s", d)
	}

	f.run("Clean up.")
	if ps := gitIn(t, f.ws, "worktree", "list", "--porcelain"); strings.Count(ps, "worktree ") != 1 {
		t.Errorf("worktrees left after TeamDelete:\n%s", ps)
	}
	if bs := gitIn(t, f.ws, "branch", "--list", "troupe/*"); bs != "" {
		t.Errorf("branches left after TeamDelete: %q", bs)
	}
	if ents, _ := os.ReadDir(filepath.Join(f.ws, ".git", "worktrees")); len(ents) != 0 {
		t.Errorf(".git/worktrees has %d stale entries", len(ents))
	}
	if st := gitIn(t, f.ws, "status", "--porcelain"); st != "" {
		t.Errorf("main is not clean after the team: %q", st)
	}
}

// TestWorktreeConflict: two teammates change the same line; the second
// completion conflicts, nothing is merged, the task stays with its owner
// with the file and the hunk, and after the owner merges main into its
// branch and resolves, completing again merges.
func TestWorktreeConflict(t *testing.T) {
	t.Parallel()
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Build it"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: wt}}
      - tool_use: {name: TaskCreate, input: {subject: "Alice edits a"}}
      - tool_use: {name: TaskCreate, input: {subject: "Bob edits a", blockedBy: ["1"]}}
      - tool_use: {name: Task, input: {team_name: wt, name: alice, description: a, prompt: "Wait for the lead."}}
      - tool_use: {name: Task, input: {team_name: wt, name: bob, description: b, prompt: "Wait for task 2."}}
      - tool_use: {name: SendMessage, input: {type: message, recipient: alice, content: "Take task 1 now."}}
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
  - agent: alice
    contains: "Take task 1 now."
    reply:
      - tool_use: {name: TaskUpdate, input: {taskId: "1", status: in_progress, owner: alice}}
      - tool_use: {name: write_file, input: {path: a.txt, content: "alice\n"}}
      - tool_use: {name: TaskUpdate, input: {taskId: "1", status: completed}}
  - agent: bob
    contains: "queued for merging"
    reply: [{text: "resolved"}]
  - agent: bob
    contains: "is not completed: merging your branch"
    reply:
      - tool_use: {name: bash, input: {command: "git merge main || true"}}
      - tool_use: {name: write_file, input: {path: a.txt, content: "alice and bob\n"}}
      - tool_use: {name: TaskUpdate, input: {taskId: "2", status: completed}}
  - agent: bob
    contains: "Bob edits a"
    reply:
      - tool_use: {name: write_file, input: {path: a.txt, content: "bob\n"}}
      - tool_use: {name: TaskUpdate, input: {taskId: "2", status: completed}}
  - agent: alice
    times: 0
    reply: [{text: "done"}]
  - agent: bob
    times: 0
    reply: [{text: "done"}]
`, withIsolation(team.IsolationWorktree))
	gitInit(t, f.ws, map[string]string{"a.txt": "one\n"})
	f.run("Build it.")

	var conflict string
	for _, body := range f.requests("bob") {
		if i := strings.Index(body, "is not completed: merging your branch"); i >= 0 && conflict == "" {
			conflict = body[i:min(len(body), i+400)]
		}
	}
	for _, want := range []string{"troupe/wt/bob into main conflicts in a.txt", `main has:\nalice\n`, `your branch has:\nbob\n`} {
		if !strings.Contains(conflict, want) {
			t.Errorf("bob's conflict message lacks %q:\n%s", want, conflict)
		}
	}
	lead := strings.Join(f.requests("team-lead"), "\n")
	if !strings.Contains(lead, "did not merge: branch troupe/wt/bob conflicts with main in a.txt") {
		t.Error("the lead was not told of the conflict")
	}
	if got := readFile(t, filepath.Join(f.ws, "a.txt")); got != "alice and bob\n" {
		t.Errorf("main's a.txt = %q, want the resolution", got)
	}
	tm, err := f.st.Team(context.Background(), "wt")
	if err != nil {
		t.Fatal(err)
	}
	task, err := tm.Tasks().Get(context.Background(), "2")
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != store.TaskCompleted || task.Owner != "bob" {
		t.Errorf("task 2 = %s owned by %q; want completed by bob", task.Status, task.Owner)
	}
}

// TestLeaseRefusal: while a task holding src/** is in progress, bob's
// write to src/a.txt is refused before it happens, naming the holder and
// the task; the lead hears that two tasks' files overlap when it creates
// them. (The lead holds the lease here: a teammate that holds a task
// while idle is reminded and hands it back, so it could not hold still.)
func TestLeaseRefusal(t *testing.T) {
	t.Parallel()
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Build it"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: lease}}
      - tool_use: {name: TaskCreate, input: {subject: "Own src", files: ["src/**"]}}
      - tool_use: {name: TaskCreate, input: {subject: "Touch a", files: ["src/a.txt"], blockedBy: ["1"]}}
      - tool_use: {name: TaskUpdate, input: {taskId: "1", status: in_progress, owner: team-lead}}
      - tool_use: {name: Task, input: {team_name: lease, name: bob, description: b, prompt: "Write src/a.txt."}}
  - agent: team-lead
    contains: "done trying"
    reply:
      - tool_use: {name: TaskUpdate, input: {taskId: "1", status: completed}}
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
  - agent: bob
    contains: "Write src/a.txt."
    reply:
      - tool_use: {name: write_file, input: {path: src/a.txt, content: "bob\n"}}
      - tool_use: {name: SendMessage, input: {type: message, recipient: team-lead, content: "done trying"}}
  - agent: bob
    contains: "Touch a"
    reply:
      - tool_use: {name: TaskUpdate, input: {taskId: "2", status: completed}}
  - agent: bob
    times: 0
    reply: [{text: "done"}]
`)
	f.run("Build it.")
	bob := strings.Join(f.requests("bob"), "\n")
	if !strings.Contains(bob, "refused before writing src/a.txt: it is leased to team-lead for task #1 (Own src)") {
		t.Error("bob's write was not refused naming the holder and task #1")
	}
	if _, err := os.Stat(filepath.Join(f.ws, "src", "a.txt")); !os.IsNotExist(err) {
		t.Errorf("src/a.txt was written despite the lease: %v", err)
	}
	lead := strings.Join(f.requests("team-lead"), "\n")
	if !strings.Contains(lead, "Warning: task #2's files overlap #1 (Own src: src/a.txt overlaps src/**)") {
		t.Error("the lead was not warned of the overlapping files")
	}
}

// TestWorktreeSpawnErrors: worktree isolation outside a git repository or
// on a dirty checkout refuses the spawn with the reason, never a silent
// shared checkout.
func TestWorktreeSpawnErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, ws string)
		want  string
	}{
		{"not a repository", func(*testing.T, string) {}, "not a git repository"},
		{"dirty", func(t *testing.T, ws string) {
			gitInit(t, ws, map[string]string{"a.txt": "one\n"})
			if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("changed\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "uncommitted changes to a.txt; commit or stash them first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t, `
rules:
  - agent: team-lead
    contains: "Build it"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: wt}}
      - tool_use: {name: Task, input: {team_name: wt, name: alice, description: a, prompt: "Hi.", isolation: worktree}}
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
`)
			if _, err := exec.LookPath("git"); err != nil {
				t.Skip("git is not installed")
			}
			tc.setup(t, f.ws)
			f.run("Build it.")
			lead := strings.Join(f.requests("team-lead"), "\n")
			if !strings.Contains(lead, "Task: isolation worktree: ") || !strings.Contains(lead, tc.want) {
				t.Errorf("the spawn error does not say %q", tc.want)
			}
			r := f.roster()
			if _, ok := r.Member("alice"); ok {
				t.Error("alice joined the roster despite the error")
			}
		})
	}
}

// TestPatternIsolation: a pattern's isolation places its teammates in
// worktrees although the team's default is the shared checkout, and a
// spawn's own isolation wins over the pattern's.
func TestPatternIsolation(t *testing.T) {
	f := start(t, `
rules:
  - agent: team-lead
    contains: "Build it"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: wt, pattern: isolated}}
      - tool_use: {name: Task, input: {team_name: wt, name: alice, description: a, prompt: "Hi."}}
      - tool_use: {name: Task, input: {team_name: wt, name: bob, description: b, prompt: "Hi.", isolation: shared}}
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
  - agent: alice
    times: 0
    reply: [{text: "Hi."}]
  - agent: bob
    times: 0
    reply: [{text: "Hi."}]
`, func(c *team.Config) {
		dir := filepath.Join(c.Workspace.Dir(), ".troupe", "patterns")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "isolated.yaml"), []byte("lead_works: true\nsize: 2\nisolation: worktree\nroles: [{name: dev}]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		c.Rules = &team.Rules{Patterns: pattern.Load(dir)}
	}, withIsolation(team.IsolationShared))
	gitInit(t, f.ws, map[string]string{"a.txt": "one\n"})
	f.run("Build it.")
	r := f.roster()
	var got []string
	for _, name := range []string{"alice", "bob"} {
		m, ok := r.Member(name)
		if !ok {
			t.Fatalf("%s not on the roster", name)
		}
		got = append(got, name+" "+m.Branch)
	}
	if d := cmp.Diff([]string{"alice troupe/wt/alice", "bob "}, got); d != "" {
		t.Errorf("branches (-want +got):\n%s", d)
	}
}
