package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTaskRouting(t *testing.T) {
	var got []string
	handlers := TaskHandlers{
		Subagent: func(_ context.Context, _ *Env, a TaskArgs) Result {
			got = append(got, "subagent:"+a.SubagentType)
			return OK("report")
		},
		Teammate: func(_ context.Context, _ *Env, a TaskArgs) Result {
			got = append(got, "teammate:"+a.TeamName+"/"+a.Name+"/"+a.Role)
			return OK("spawned")
		},
	}
	tests := []struct {
		name      string
		handlers  TaskHandlers
		input     string
		wantCall  string
		wantError string // "" for success
	}{
		{"subagent", handlers, `{"description":"d","prompt":"p","subagent_type":"explore"}`, "subagent:explore", ""},
		{"teammate", handlers, `{"description":"d","prompt":"p","team_name":"T","name":"alice","role":"dev"}`, "teammate:T/alice/dev", ""},
		{"teams not available", TaskHandlers{Subagent: handlers.Subagent}, `{"description":"d","prompt":"p","team_name":"T","name":"alice"}`, "", "teams are not available"},
		{"subagents not available", TaskHandlers{}, `{"description":"d","prompt":"p"}`, "", "subagents are not available"},
		{"team_name without name", handlers, `{"description":"d","prompt":"p","team_name":"T"}`, "", `"team_name" needs "name"`},
		{"name without team_name", handlers, `{"description":"d","prompt":"p","name":"alice"}`, "", `needs "team_name"`},
		{"prompt required", handlers, `{"description":"d"}`, "", `"prompt" is required`},
		{"prompt blank", handlers, `{"description":"d","prompt":"  "}`, "", `must not be empty`},
		{"wrong type", handlers, `{"description":"d","prompt":"p","run_in_background":"yes"}`, "", `"run_in_background" must be a boolean`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got = nil
			res := TaskTool(tt.handlers).Run(context.Background(), &Env{}, json.RawMessage(tt.input))
			if tt.wantError == "" {
				if res.IsError {
					t.Fatalf("error: %s", res.Content)
				}
				if diff := cmp.Diff([]string{tt.wantCall}, got); diff != "" {
					t.Errorf("calls (-want +got):\n%s", diff)
				}
				return
			}
			if !res.IsError || !strings.Contains(res.Content, tt.wantError) {
				t.Errorf("result = %+v, want an error with %q", res, tt.wantError)
			}
			if len(got) != 0 {
				t.Errorf("a handler ran: %v", got)
			}
		})
	}
}

// TestTaskBatch: consecutive teammate calls go to Teammates together; a
// subagent call between them runs alone in its turn, and a bad call gets
// its own error without taking the others with it.
func TestTaskBatch(t *testing.T) {
	var got []string
	h := TaskHandlers{
		Subagent: func(_ context.Context, _ *Env, a TaskArgs) Result {
			got = append(got, "subagent:"+a.Description)
			return OK("report " + a.Description)
		},
		Teammate: func(_ context.Context, _ *Env, a TaskArgs) Result {
			got = append(got, "teammate:"+a.Name)
			return OK("alone " + a.Name)
		},
		Teammates: func(_ context.Context, envs []*Env, as []TaskArgs) []Result {
			var names []string
			var out []Result
			for i, a := range as {
				names = append(names, a.Name+"@"+envs[i].ToolUseID)
				out = append(out, OK("spawned "+a.Name))
			}
			got = append(got, "teammates:"+strings.Join(names, ","))
			return out
		},
	}
	inputs := []string{
		`{"description":"d","prompt":"p","team_name":"T","name":"a"}`,
		`{"description":"d","prompt":"p","team_name":"T","name":"b"}`,
		`{"description":"d","prompt":" ","team_name":"T","name":"c"}`,
		`{"description":"x","prompt":"p"}`,
		`{"description":"d","prompt":"p","team_name":"T","name":"e"}`,
	}
	var envs []*Env
	var raw []json.RawMessage
	for i, in := range inputs {
		envs = append(envs, &Env{ToolUseID: fmt.Sprint("u", i)})
		raw = append(raw, json.RawMessage(in))
	}
	res := TaskTool(h).(Batcher).RunBatch(context.Background(), envs, raw)
	if diff := cmp.Diff([]string{"teammates:a@u0,b@u1", "subagent:x", "teammates:e@u4"}, got); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	var answers []string
	for _, r := range res {
		answers = append(answers, fmt.Sprint(r.IsError, " ", r.Content))
	}
	want := []string{"false spawned a", "false spawned b", `true invalid arguments for Task: "prompt" must not be empty`, "false report x", "false spawned e"}
	if diff := cmp.Diff(want, answers); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	// Without Teammates, each goes to Teammate.
	got = nil
	h.Teammates = nil
	TaskTool(h).(Batcher).RunBatch(context.Background(), envs[:2], raw[:2])
	if diff := cmp.Diff([]string{"teammate:a", "teammate:b"}, got); diff != "" {
		t.Errorf("calls without Teammates (-want +got):\n%s", diff)
	}
}

func TestTaskSpec(t *testing.T) {
	spec := TaskTool(TaskHandlers{}).Spec()
	var schema struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(spec.InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"description": "string", "prompt": "string", "subagent_type": "string", "run_in_background": "boolean",
		"team_name": "string", "name": "string", "role": "string", "model": "string",
		"plan_mode_required": "boolean", "permission_mode": "string",
		"budget_tokens": "integer", "budget_usd": "number", "mcp_servers": "array", "isolation": "string", "pool": "string",
	}
	got := map[string]string{}
	for k, v := range schema.Properties {
		got[k] = v.Type
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("properties (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"description", "prompt"}, schema.Required); diff != "" {
		t.Errorf("required (-want +got):\n%s", diff)
	}
	if spec.Name != "Task" || !strings.Contains(spec.Description, "subagent") {
		t.Errorf("spec = %s: %.40q", spec.Name, spec.Description)
	}
}

// TestCompactToolAsks checks the compact tool only passes the request on
// (the agent tests cover what the agent does with it).
func TestCompactToolAsks(t *testing.T) {
	var asked []string
	env := &Env{RequestCompact: func(focus string) { asked = append(asked, focus) }}
	res := CompactTool().Run(context.Background(), env, json.RawMessage(`{"focus":"the plan"}`))
	if res.IsError || len(asked) != 1 || asked[0] != "the plan" {
		t.Errorf("result = %+v, asked = %q", res, asked)
	}
	if res := CompactTool().Run(context.Background(), &Env{}, nil); !res.IsError {
		t.Errorf("without RequestCompact: %+v", res)
	}
}
