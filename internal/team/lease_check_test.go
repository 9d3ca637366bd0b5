package team

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/shell"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/store/file"
	"github.com/troupe-dev/troupe/internal/tool"
)

// leaseFixture is a team whose task #1 ("API", src/api/**) is in progress
// with alice, over a workspace holding src/api/a.go and b.go.
type leaseFixture struct {
	t  *testing.T
	ws *tool.Workspace
	tm store.Team
}

func newLeaseFixture(t *testing.T) *leaseFixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	for f, c := range map[string]string{"src/api/a.go": "package api\n", "b.go": "package b\n"} {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st, err := file.Open(filepath.Join(t.TempDir(), "state"), file.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	tm, err := st.CreateTeam(ctx, store.Roster{Name: "lz", Members: []store.Member{{Name: "alice"}, {Name: "bob"}, {Name: "carol"}}})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := tool.OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	f := &leaseFixture{t: t, ws: ws, tm: tm}
	f.task("API", "alice", []any{"src/api/**"})
	return f
}

// task adds a task in progress with owner, declaring files (nil: none).
func (f *leaseFixture) task(subject, owner string, files []any) store.Task {
	f.t.Helper()
	ctx := context.Background()
	md := map[string]any{}
	if files != nil {
		md[filesKey] = files
	}
	got, err := f.tm.Tasks().Create(ctx, store.Task{Subject: subject, Metadata: md})
	if err != nil {
		f.t.Fatal(err)
	}
	got, err = f.tm.Tasks().Update(ctx, got.ID, func(t *store.Task) error {
		t.Status, t.Owner = store.TaskInProgress, owner
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return got
}

// env is who's tool environment under mode, with sb its sandbox.
func (f *leaseFixture) env(who string, mode LeaseMode, sb *shell.Sandbox) *tool.Env {
	r := &Rules{TeamRules: TeamRules{Leases: mode}}
	return r.leaseEnv(&tool.Env{Workspace: f.ws, Agent: who, Sandbox: sb}, fixedTeam(f.tm), who, emitter{agent: who})
}

// call runs a builtin tool.
func (f *leaseFixture) call(env *tool.Env, name string, input map[string]any) tool.Result {
	f.t.Helper()
	tl, ok := tool.NewRegistry(tool.Builtins()...).Get(name)
	if !ok {
		f.t.Fatalf("no tool %s", name)
	}
	b, err := json.Marshal(input)
	if err != nil {
		f.t.Fatal(err)
	}
	return tl.Run(context.Background(), env, b)
}

func (f *leaseFixture) read(rel string) string {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.ws.Dir(), filepath.FromSlash(rel)))
	if os.IsNotExist(err) {
		return "(absent)"
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return string(b)
}

// inbox is what member was sent.
func (f *leaseFixture) inbox(member string) []string {
	f.t.Helper()
	msgs, err := f.tm.Mailbox().Receive(context.Background(), member)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		out = append(out, m.From+": "+m.Summary)
	}
	return out
}

const aliceRefusal = "it is leased to alice for task #1 (API) by the glob \"src/api/**\""

// TestLeaseBashRefusal: bob's bash commands whose words write a path
// alice's task leases are refused before they run, naming alice and the
// task; other commands run.
func TestLeaseBashRefusal(t *testing.T) {
	for _, tc := range []struct {
		name, command string
		refused       string // the leased path named, "" when the command runs
	}{
		{"redirect", "echo bob > src/api/a.go", "src/api/a.go"},
		{"append", "echo bob >> ./src/api/a.go", "src/api/a.go"},
		{"sed -i", "sed -i s/api/bob/ src/api/a.go", "src/api/a.go"},
		{"cp into the folder", "cp b.go src/api/", "src/api"},
		{"cp to a file", "cp b.go src/api/b.go", "src/api/b.go"},
		{"tee", "echo bob | tee src/api/new.go", "src/api/new.go"},
		{"rm of a parent", "rm -rf src", "src"},
		{"glob", "touch src/api/*.go", "src/api/*.go"},
		{"through sh -c", "sh -c 'echo bob > src/api/a.go'", "src/api/a.go"},
		{"from a subfolder by path", "echo bob > " + "src/../src/api/a.go", "src/api/a.go"},
		{"elsewhere", "echo bob > b.go", ""},
		{"reading only", "cat src/api/a.go", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newLeaseFixture(t)
			res := f.call(f.env("bob", LeaseRefuse, nil), "bash", map[string]any{"command": tc.command})
			if tc.refused == "" {
				if res.IsError || strings.Contains(res.Content, "refused") {
					t.Fatalf("command refused: %s", res.Content)
				}
				return
			}
			want := "bash: refused before writing " + tc.refused + ": " + aliceRefusal
			if !res.IsError || !strings.HasPrefix(res.Content, want) {
				t.Errorf("result = %q\nwant it to start with %q", res.Content, want)
			}
			if got := f.read("src/api/a.go"); got != "package api\n" {
				t.Errorf("src/api/a.go = %q: the refused command ran", got)
			}
			if got := f.read("src/api/new.go"); got != "(absent)" {
				t.Errorf("src/api/new.go = %q: the refused command ran", got)
			}
		})
	}
}

// TestLeaseOwnerAndLead: alice, who holds the lease, writes freely; the
// lead (who holds no task) is refused like any teammate, by write_file and
// by bash.
func TestLeaseOwnerAndLead(t *testing.T) {
	f := newLeaseFixture(t)
	if res := f.call(f.env("alice", LeaseRefuse, nil), "bash", map[string]any{"command": "echo alice > src/api/a.go"}); res.IsError {
		t.Fatalf("the holder was refused: %s", res.Content)
	}
	lead := f.env(store.LeadName, LeaseRefuse, nil)
	res := f.call(lead, "write_file", map[string]any{"path": "src/api/a.go", "content": "lead\n"})
	if want := "write_file: refused before writing src/api/a.go: " + aliceRefusal; !res.IsError || !strings.HasPrefix(res.Content, want) {
		t.Errorf("lead's write_file = %q\nwant %q…", res.Content, want)
	}
	res = f.call(lead, "edit_file", map[string]any{"path": "src/api/a.go", "old_string": "alice", "new_string": "lead"})
	if !res.IsError || !strings.Contains(res.Content, aliceRefusal) {
		t.Errorf("lead's edit_file = %q; want refused", res.Content)
	}
	if got := f.read("src/api/a.go"); got != "alice\n" {
		t.Errorf("src/api/a.go = %q, want alice's", got)
	}
}

// TestLeaseWarnMode: with team.leases warn, bob's writes go through; his
// result says whose lease it was, and alice is messaged once per path.
func TestLeaseWarnMode(t *testing.T) {
	f := newLeaseFixture(t)
	bob := f.env("bob", LeaseWarn, nil)
	res := f.call(bob, "write_file", map[string]any{"path": "src/api/a.go", "content": "bob\n"})
	if want := "troupe: warning: src/api/a.go is leased to alice for task #1 (API)"; res.IsError || !strings.Contains(res.Content, want) {
		t.Errorf("write_file = %q; want it done with %q", res.Content, want)
	}
	res = f.call(bob, "edit_file", map[string]any{"path": "src/api/a.go", "old_string": "bob", "new_string": "bob2"})
	if res.IsError || !strings.Contains(res.Content, "leased to alice") {
		t.Errorf("edit_file = %q; want it done with a warning", res.Content)
	}
	res = f.call(bob, "bash", map[string]any{"command": "echo bob > src/api/c.go"})
	if res.IsError || !strings.Contains(res.Content, "troupe: warning: src/api/c.go is leased to alice") {
		t.Errorf("bash = %q; want it run with a warning", res.Content)
	}
	if got := f.read("src/api/a.go") + f.read("src/api/c.go"); got != "bob2\nbob\n" {
		t.Errorf("files = %q: the writes did not go through", got)
	}
	want := []string{"bob: lease warning: src/api/a.go", "bob: lease warning: src/api/c.go"}
	if diff := cmp.Diff(want, f.inbox("alice")); diff != "" {
		t.Errorf("alice's inbox (-want +got):\n%s", diff)
	}
}

// TestLeaseOff: team.leases off checks nothing.
func TestLeaseOff(t *testing.T) {
	f := newLeaseFixture(t)
	if res := f.call(f.env("bob", LeaseOff, nil), "bash", map[string]any{"command": "echo bob > src/api/a.go"}); res.IsError {
		t.Errorf("bash refused with leases off: %s", res.Content)
	}
}

// TestLeaseInferred: carol's task declared no files; the files she writes
// while it is in progress become its lease (marked inferred, one store
// write per new file), and bob is refused on them.
func TestLeaseInferred(t *testing.T) {
	f := newLeaseFixture(t)
	f.task("Docs", "carol", nil)
	carol := f.env("carol", LeaseRefuse, nil)
	get := func() store.Task {
		t.Helper()
		got, err := f.tm.Tasks().Get(context.Background(), "2")
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, c := range []struct {
		tool  string
		input map[string]any
	}{
		{"write_file", map[string]any{"path": "docs/a.md", "content": "a\n"}},
		{"bash", map[string]any{"command": "echo b > docs/b.md"}},
	} {
		if res := f.call(carol, c.tool, c.input); res.IsError {
			t.Fatalf("%s: %s", c.tool, res.Content)
		}
	}
	task := get()
	if diff := cmp.Diff([]string{"docs/a.md", "docs/b.md"}, TaskFiles(task)); diff != "" || !FilesInferred(task) {
		t.Errorf("task 2's files (inferred %v) (-want +got):\n%s", FilesInferred(task), diff)
	}
	// Writing a file already in the lease writes nothing to the store.
	if res := f.call(carol, "edit_file", map[string]any{"path": "docs/a.md", "old_string": "a", "new_string": "aa"}); res.IsError {
		t.Fatal(res.Content)
	}
	if again := get(); !again.UpdatedAt.Equal(task.UpdatedAt) {
		t.Errorf("task 2 rewritten for a file already in its lease (updated %v, was %v)", again.UpdatedAt, task.UpdatedAt)
	}
	bob := f.env("bob", LeaseRefuse, nil)
	res := f.call(bob, "write_file", map[string]any{"path": "docs/a.md", "content": "bob\n"})
	if want := `refused before writing docs/a.md: it is leased to carol for task #2 (Docs) by the glob "docs/a.md"`; !res.IsError || !strings.Contains(res.Content, want) {
		t.Errorf("bob's write_file = %q; want %q", res.Content, want)
	}
	// Alice's declared lease is not widened by her writes.
	if res := f.call(f.env("alice", LeaseRefuse, nil), "write_file", map[string]any{"path": "other.go", "content": "x\n"}); res.IsError {
		t.Fatal(res.Content)
	}
	if got, _ := f.tm.Tasks().Get(context.Background(), "1"); FilesInferred(got) || len(TaskFiles(got)) != 1 {
		t.Errorf("alice's declared files changed: %v", TaskFiles(got))
	}
}

// TestLeaseAfterCommand: a write the command's words do not show is not
// refused, but once it ran the writer's result names the leased file and
// the holder is messaged.
func TestLeaseAfterCommand(t *testing.T) {
	f := newLeaseFixture(t)
	res := f.call(f.env("bob", LeaseRefuse, nil), "bash", map[string]any{"command": `f=src/api; echo bob > "$f/a.go"`})
	if want := "troupe: this command changed files another teammate holds a lease on: src/api/a.go (leased to alice for task #1)"; !strings.Contains(res.Content, want) {
		t.Errorf("result = %q; want %q", res.Content, want)
	}
	if diff := cmp.Diff([]string{"bob: lease broken: src/api/a.go"}, f.inbox("alice")); diff != "" {
		t.Errorf("alice's inbox (-want +got):\n%s", diff)
	}
}

// TestLeaseSandbox: in bubblewrap, what others lease is bound read-only,
// so even a write the check could not read fails.
func TestLeaseSandbox(t *testing.T) {
	f := newLeaseFixture(t)
	sb := &shell.Sandbox{Writable: []string{f.ws.Dir()}}
	if err := shell.CheckSandbox(context.Background(), sb); err != nil {
		t.Skipf("no usable bubblewrap here (.ci/run installs it): %v", err)
	}
	bob := f.env("bob", LeaseRefuse, sb)
	res := f.call(bob, "bash", map[string]any{"command": `f=src/api; echo bob > "$f/a.go"; echo bob > "$f/new.go"; echo ok > b.go`})
	if !strings.Contains(res.Content, "src/api/a.go: Read-only file system") || !strings.Contains(res.Content, "src/api/new.go: Read-only file system") {
		t.Errorf("the sandboxed writes were not refused: %s", res.Content)
	}
	if got := f.read("src/api/a.go") + f.read("src/api/new.go"); got != "package api\n(absent)" {
		t.Errorf("leased files = %q, want untouched", got)
	}
	if got := f.read("b.go"); got != "ok\n" {
		t.Errorf("b.go = %q: the sandbox kept bob from his own files", got)
	}
}

// TestLeaseRefusalTellsHolder: a refused write tells the holder once per
// path and task, whichever tool tried it; a write elsewhere tells nothing.
func TestLeaseRefusalTellsHolder(t *testing.T) {
	f := newLeaseFixture(t)
	bob := f.env("bob", LeaseRefuse, nil)
	for _, c := range []struct {
		tool  string
		input map[string]any
	}{
		{"write_file", map[string]any{"path": "src/api/a.go", "content": "bob\n"}},
		{"edit_file", map[string]any{"path": "src/api/a.go", "old_string": "api", "new_string": "bob"}},
		{"bash", map[string]any{"command": "echo bob > src/api/a.go"}},
		{"bash", map[string]any{"command": "rm src/api/a.go"}},
		{"bash", map[string]any{"command": "echo bob > src/api/c.go"}},
		{"write_file", map[string]any{"path": "b.go", "content": "bob\n"}},
	} {
		if res := f.call(bob, c.tool, c.input); c.input["path"] != "b.go" && !res.IsError {
			t.Errorf("%s %v ran: %s", c.tool, c.input, res.Content)
		}
	}
	msgs, err := f.tm.Mailbox().Peek(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, m.From+": "+m.Summary)
	}
	want := []string{"bob: lease refusal: src/api/a.go", "bob: lease refusal: src/api/c.go"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("alice's inbox (-want +got):\n%s", diff)
	}
	if len(msgs) == 0 || msgs[0].TaskID != "1" || !strings.Contains(msgs[0].Content, "bob tried to write src/api/a.go, which your task #1 (API) holds a lease on") {
		t.Errorf("alice's first notice = %+v; want it to name bob, the path and task #1", msgs)
	}
	if bobs, err := f.tm.Mailbox().Peek(context.Background(), "bob"); err != nil || len(bobs) != 0 {
		t.Errorf("bob was sent %v (%v)", bobs, err)
	}
}
