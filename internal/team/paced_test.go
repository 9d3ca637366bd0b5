package team_test

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/replay/cassette"
	"github.com/troupe-dev/troupe/internal/replay/pace"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
)

// pacedScript: two teammates race for three tasks; ann must ask the lead's
// permission for each command, and both message each other and start a
// background command. Who claims what, what arrives together in whose inbox,
// and at which tool boundary a background command is announced as finished,
// depend on timing. (The background command is quick and the foreground
// one sleeps, so that the recording announces at least one: under a loaded
// test run a background command as slow as the foreground one was
// sometimes still running at every boundary.)
const pacedScript = `
rules:
  - agent: team-lead
    contains: "Share the work"
    reply:
      - tool_use: {name: TeamCreate, input: {team_name: paced}}
      - tool_use: {name: TaskCreate, input: {subject: "one"}}
      - tool_use: {name: TaskCreate, input: {subject: "two"}}
      - tool_use: {name: TaskCreate, input: {subject: "three"}}
      - tool_use: {name: Task, input: {team_name: paced, name: ann, description: a, permission_mode: default, prompt: "Take tasks."}}
      - tool_use: {name: Task, input: {team_name: paced, name: bob, description: b, permission_mode: bypassPermissions, prompt: "Take tasks."}}
  - agent: team-lead
    regex: 'type="permission_request"[^>]*request_id="(perm-[^"]+)"'
    times: 0
    reply:
      - tool_use: {name: SendMessage, input: {type: permission_response, recipient: ann, request_id: "${1}", approve: true}}
  - agent: team-lead
    times: 0
    reply: [{text: "ok"}]
  - regex: 'task #([0-9]): (one|two|three)'
    times: 0
    reply:
      - tool_use: {name: bash, input: {command: "echo ${agent} > ${2}.bg", run_in_background: true, description: "background ${2}"}}
      - tool_use: {name: bash, input: {command: "echo ${agent} > ${2}.txt; sleep 0.05"}}
      - tool_use: {name: SendMessage, input: {type: broadcast, content: "${agent} did task ${1}", summary: "did ${1}"}}
      - tool_use: {name: TaskUpdate, input: {taskId: "${1}", status: completed}}
  - times: 0
    reply: [{text: "Done."}]
`

// TestPacedRunReplaysExactly records a racing team with a pacer and a
// cassette, then replays it twice from the cassette alone: every request of
// every agent must match, and each replay ends with the same owner for each
// task and the same files.
func TestPacedRunReplaysExactly(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	rec := start(t, pacedScript, func(c *team.Config) {
		r := cassette.NewRecorder(c.Provider, &buf, cassette.Header{})
		c.Provider = r
		c.Pacer = pace.NewRecorder(pace.Options{Record: r.Step})
	})
	rec.run("Share the work.")
	// Teammates outlive RunHeadless until Close, and one going idle still
	// records a step into buf: the cassette is read once they are gone.
	if err := rec.sess.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(buf.Bytes(), []byte(`background-job id=\"bg_`)) {
		t.Fatal("no background command was announced in the recorded run")
	}
	want := outcome(t, rec)
	if len(want) != 6 {
		t.Fatalf("recorded run: %v; want 3 completed tasks and 3 files", want)
	}
	for i := range 2 {
		// The recorded prompts name the recorded workspace.
		var rp *cassette.Replayer
		var pacer *pace.Pacer
		f := start(t, "rules: []", func(c *team.Config) {
			data := bytes.ReplaceAll(buf.Bytes(), []byte(rec.ws), []byte(c.Workspace.Dir()))
			cas, err := cassette.Load(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			rp = cassette.NewReplayer(cas)
			pacer = pace.NewReplayer(cas.Steps, pace.Options{})
			c.Provider, c.Pacer = rp, pacer
		})
		f.run("Share the work.")
		pacer.Close()
		if d := rp.Divergence(); d != nil {
			t.Fatalf("replay %d: %v", i+1, d)
		}
		if err := pacer.Err(); err != nil {
			t.Fatalf("replay %d: %v", i+1, err)
		}
		if left := rp.Unused(); len(left) > 0 {
			t.Fatalf("replay %d: calls left unused: %v", i+1, left)
		}
		if got := outcome(t, f); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("replay %d ended differently:\n got %v\nwant %v", i+1, got, want)
		}
	}
}

// outcome is who completed which task and what each file says.
func outcome(t *testing.T, f *fixture) []string {
	t.Helper()
	tm, err := f.st.Team(t.Context(), "paced")
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := tm.Tasks().List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, task := range tasks {
		if task.Status == store.TaskCompleted {
			out = append(out, "task "+task.ID+" by "+task.Owner)
		}
	}
	for _, name := range []string{"one", "two", "three"} {
		if data, err := os.ReadFile(filepath.Join(f.ws, name+".txt")); err == nil {
			out = append(out, name+".txt: "+strings.TrimSpace(string(data)))
		}
	}
	sort.Strings(out)
	return out
}
