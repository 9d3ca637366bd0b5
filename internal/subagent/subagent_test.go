package subagent_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/anthropic"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi/fakeapitest"
	"github.com/troupe-dev/troupe/internal/secret"
	"github.com/troupe-dev/troupe/internal/subagent"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fixture struct {
	srv    *fakeapi.Server
	ws     *tool.Workspace
	runner *subagent.Runner
	env    *tool.Env
}

func setup(t *testing.T, script string) *fixture {
	t.Helper()
	srv := fakeapitest.StartTest(t, script)
	p, err := anthropic.New(anthropic.Config{APIKey: "test", BaseURL: srv.URL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, err := tool.OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	jobs := tool.NewJobs()
	t.Cleanup(jobs.StopAll)
	return &fixture{
		srv:    srv,
		ws:     ws,
		runner: &subagent.Runner{Provider: p, Workspace: ws, Parent: "team-lead"},
		env:    &tool.Env{Workspace: ws, Jobs: jobs},
	}
}

// parent returns the lead with the Task tool (and the job tools) over f.
func (f *fixture) parent(t *testing.T) *agent.Agent {
	t.Helper()
	tools := append([]tool.Tool{tool.TaskTool(tool.TaskHandlers{Subagent: subagent.Handler(f.runner)})}, tool.JobTools()...)
	a, err := agent.New(agent.Config{
		Name:     "team-lead",
		Provider: f.runner.Provider,
		System:   agent.Prompt{Identity: agent.Identity{Name: "team-lead"}, Workspace: f.ws.Dir()}.String(),
		Tools:    tool.NewRegistry(tools...),
		Env:      f.env,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

type wire struct {
	Model  string `json:"model"`
	System []struct {
		Text string `json:"text"`
	} `json:"system"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Messages []struct {
		Role    string `json:"role"`
		Content []struct {
			Type    string `json:"type"`
			Text    string `json:"text"`
			IsError bool   `json:"is_error"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"content"`
	} `json:"messages"`
}

// calls returns the requests agent made, decoded, failing the test on any
// refused or unmatched request.
func calls(t *testing.T, srv *fakeapi.Server, agent string) []wire {
	t.Helper()
	var out []wire
	for _, r := range srv.Requests() {
		if r.Status != 200 {
			t.Errorf("request %d (%s) got %d: %s", r.N, r.Agent, r.Status, r.Body)
		}
		if r.Agent != agent {
			continue
		}
		var w wire
		if err := json.Unmarshal(r.Body, &w); err != nil {
			t.Fatal(err)
		}
		out = append(out, w)
	}
	if n := srv.Unmatched(); n != 0 {
		t.Errorf("%d requests matched no rule", n)
	}
	return out
}

// toolResults returns the tool_result texts of the last turn of w.
func (w wire) toolResults() []string {
	var out []string
	for _, b := range w.Messages[len(w.Messages)-1].Content {
		if b.Type == "tool_result" {
			s := ""
			for _, c := range b.Content {
				s += c.Text
			}
			if b.IsError {
				s = "ERROR: " + s
			}
			out = append(out, s)
		}
	}
	return out
}

func (w wire) toolNames() []string {
	var out []string
	for _, t := range w.Tools {
		out = append(out, t.Name)
	}
	return out
}

// TestExploreCannotWrite: the lead starts an explore subagent; the script
// makes it try write_file, which it does not have; the lead gets only its
// final report.
func TestExploreCannotWrite(t *testing.T) {
	f := setup(t, `
rules:
  - agent: team-lead
    contains: "investigate"
    reply: [{tool_use: {name: Task, input: {description: "look around", prompt: "Survey the repo", subagent_type: explore}}}]
  - agent: "team-lead:explore"
    contains: "Survey the repo"
    reply: [{text: "Let me note it down."}, {tool_use: {name: write_file, input: {path: notes.txt, content: "secret notes"}}}]
  - agent: "team-lead:explore"
    contains: "unknown tool"
    reply: [{text: "REPORT: the repo is empty; I could not write notes."}]
  - agent: team-lead
    contains: "REPORT:"
    reply: [{text: "done"}]
`)
	res, err := f.parent(t).Run(context.Background(), llm.TextBlock("investigate the repo"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "done" {
		t.Errorf("lead's text = %q", res.Text)
	}
	if _, err := os.Stat(filepath.Join(f.ws.Dir(), "notes.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("notes.txt: %v; the explore subagent wrote a file", err)
	}
	sub := calls(t, f.srv, "team-lead:explore")
	if len(sub) != 2 {
		t.Fatalf("subagent made %d calls", len(sub))
	}
	if got := sub[1].toolResults(); len(got) != 1 || !strings.HasPrefix(got[0], `ERROR: unknown tool "write_file"`) {
		t.Errorf("write_file result = %q", got)
	}
	if diff := cmp.Diff([]string{"read_file", "glob", "grep"}, sub[0].toolNames()); diff != "" {
		t.Errorf("explore tools (-want +got):\n%s", diff)
	}
	// The identity comes last, after the cached prefix agents share.
	if sys := sub[0].System[len(sub[0].System)-1].Text; !strings.HasPrefix(sys, "You are 'team-lead:explore'") {
		t.Errorf("system prompt starts %q", sys[:min(60, len(sys))])
	}
	if n := len(sub[0].Messages); n != 1 {
		t.Errorf("subagent's first call has %d messages; want a fresh conversation", n)
	}
	lead := calls(t, f.srv, "team-lead")
	if diff := cmp.Diff([]string{"REPORT: the repo is empty; I could not write notes."}, lead[1].toolResults()); diff != "" {
		t.Errorf("what the lead received (-want +got):\n%s", diff)
	}
}

// TestBackgroundSubagent: run_in_background returns a job id at once; the
// lead reads the report back with TaskOutput.
func TestBackgroundSubagent(t *testing.T) {
	f := setup(t, `
rules:
  - agent: team-lead
    contains: "count"
    reply: [{tool_use: {name: Task, input: {description: "count files", prompt: "Count the files", subagent_type: explore, run_in_background: true}}}]
  - agent: "team-lead:explore"
    contains: "Count the files"
    reply: [{text: "BG-REPORT: 0 files"}]
  - agent: team-lead
    contains: "Started background subagent bg_1"
    reply: [{tool_use: {name: TaskOutput, input: {task_id: bg_1, timeout: 60}}}]
  - agent: team-lead
    contains: "BG-REPORT"
    reply: [{text: "done"}]
`)
	if _, err := f.parent(t).Run(context.Background(), llm.TextBlock("count the files")); err != nil {
		t.Fatal(err)
	}
	lead := calls(t, f.srv, "team-lead")
	if len(lead) != 3 {
		t.Fatalf("lead made %d calls", len(lead))
	}
	got := lead[2].toolResults()
	if len(got) != 1 || !strings.HasPrefix(got[0], "bg_1 [subagent] count files: completed") || !strings.Contains(got[0], "BG-REPORT: 0 files") {
		t.Errorf("TaskOutput result = %q", got)
	}
}

// TestIterationCap: a subagent that never stops is stopped after
// MaxIterations calls and says so.
func TestIterationCap(t *testing.T) {
	f := setup(t, `
rules:
  - agent: "team-lead:general-purpose"
    times: 0
    reply: [{text: "still looking"}, {tool_use: {name: glob, input: {pattern: "*"}}}]
`)
	f.runner.MaxIterations = 3
	report, err := f.runner.Run(context.Background(), tool.TaskArgs{Description: "loop", Prompt: "Find everything"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "still looking\n\n[team-lead:general-purpose stopped after 3 iterations without finishing; its work may be incomplete.]"; report != want {
		t.Errorf("report = %q, want %q", report, want)
	}
	sub := calls(t, f.srv, "team-lead:general-purpose")
	if len(sub) != 3 {
		t.Errorf("%d calls, want 3", len(sub))
	}
	// The general type has no Task tool: no recursion.
	if diff := cmp.Diff([]string{"bash", "read_file", "write_file", "edit_file", "glob", "grep", "TodoWrite"}, sub[0].toolNames()); diff != "" {
		t.Errorf("general tools (-want +got):\n%s", diff)
	}
}

func TestUnknownType(t *testing.T) {
	f := setup(t, "rules: []\n")
	_, err := f.runner.Run(context.Background(), tool.TaskArgs{Prompt: "x", SubagentType: "wizard"})
	if !errors.Is(err, subagent.ErrUnknownType) || !strings.Contains(err.Error(), "explore, general-purpose") {
		t.Errorf("err = %v", err)
	}
	res := subagent.Handler(f.runner)(context.Background(), f.env, tool.TaskArgs{Prompt: "x", SubagentType: "wizard"})
	if !res.IsError || !strings.Contains(res.Content, "explore, general-purpose") {
		t.Errorf("result = %+v", res)
	}
	if n := len(f.srv.Requests()); n != 0 {
		t.Errorf("%d model calls for an unknown type", n)
	}
}

func TestBackgroundNeedsJobs(t *testing.T) {
	f := setup(t, "rules: []\n")
	res := subagent.Handler(f.runner)(context.Background(), &tool.Env{Workspace: f.ws}, tool.TaskArgs{Prompt: "x", RunInBackground: true})
	if !res.IsError || !strings.Contains(res.Content, "run_in_background is not available") {
		t.Errorf("result = %+v", res)
	}
}

// TestStopBackgroundSubagent: TaskStop ends a subagent waiting on its
// model call.
func TestStopBackgroundSubagent(t *testing.T) {
	f := setup(t, `
rules:
  - agent: "team-lead:explore"
    latency: 1h
    reply: [{text: "never"}]
`)
	res := subagent.Handler(f.runner)(context.Background(), f.env, tool.TaskArgs{Description: "slow", Prompt: "wait", SubagentType: "explore", RunInBackground: true})
	if res.IsError {
		t.Fatal(res.Content)
	}
	if err := f.env.Jobs.Stop("bg_1"); err != nil {
		t.Fatal(err)
	}
	st, err := f.env.Jobs.Output(context.Background(), "bg_1", false, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != tool.JobStopped || st.Kind != subagent.JobKind {
		t.Errorf("status = %+v", st)
	}
}

// TestTypesByKind: a type's tools are chosen by the kind they declare:
// explore gets every read tool and nothing else, general-purpose every
// subagent tool, each of a declared kind.
func TestTypesByKind(t *testing.T) {
	explore, err := subagent.Tools(subagent.Explore, nil)
	if err != nil {
		t.Fatal(err)
	}
	general, err := subagent.Tools(subagent.General, nil)
	if err != nil {
		t.Fatal(err)
	}
	var reads, got []string
	for _, tl := range general {
		if tl.Kind() == kind.Unknown {
			t.Errorf("general-purpose subagents get %s, of unknown kind", tl.Spec().Name)
		}
		if tl.Kind() == kind.Read {
			reads = append(reads, tl.Spec().Name)
		}
	}
	for _, tl := range explore {
		got = append(got, tl.Spec().Name)
	}
	if diff := cmp.Diff(reads, got); diff != "" || len(got) == 0 {
		t.Errorf("explore's tools are not the read tools (-reads +explore):\n%s", diff)
	}
}

// TestTranscript: each run writes its messages to <parent>-sub-<id>.jsonl
// in the directory TranscriptDir gives, secrets redacted, and its context
// names the run (what SubagentStop's agent_transcript_path is made of).
func TestTranscript(t *testing.T) {
	const key = "sk-ant-api03-transcript-test-key-0123456789"
	secret.Register(key)
	t.Cleanup(secret.Reset)
	f := setup(t, `
rules:
  - agent: team-lead
    contains: "go"
    reply: [{tool_use: {name: Task, input: {description: "look", prompt: "Find the key `+key+`", subagent_type: explore}}}]
  - agent: "team-lead:explore"
    contains: "Find the key"
    reply: [{text: "REPORT: found it"}]
  - agent: team-lead
    reply: [{text: "done"}]
`)
	dir := filepath.Join(t.TempDir(), "transcripts")
	f.runner.TranscriptDir = func(context.Context) string { return dir }
	var runs []subagent.Run
	f.runner.Stop = func(ctx context.Context, name, last string, active bool) (string, bool) {
		run, _ := subagent.RunOf(ctx)
		runs = append(runs, run)
		return "", false
	}
	if _, err := f.parent(t).Run(context.Background(), llm.TextBlock("go")); err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Fatalf("Stop saw %d runs, want 1", len(runs))
	}
	run := runs[0]
	want := subagent.Run{ID: run.ID, Name: "team-lead:explore", Type: "Explore",
		TranscriptPath: filepath.Join(dir, "team-lead-sub-"+run.ID+".jsonl")}
	if diff := cmp.Diff(want, run); diff != "" || len(run.ID) != 16 {
		t.Errorf("the run's context (-want +got):\n%s", diff)
	}
	data, err := os.ReadFile(run.TranscriptPath)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var l struct {
			TS      string `json:"ts"`
			Role    string `json:"role"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.TS == "" {
			t.Fatalf("transcript line %q: %v", line, err)
		}
		got = append(got, l.Role+": "+l.Content[0].Text)
	}
	if diff := cmp.Diff([]string{"user: Find the key [redacted]", "assistant: REPORT: found it"}, got); diff != "" {
		t.Errorf("transcript (-want +got):\n%s", diff)
	}
}
