package tool_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/todo"
	"github.com/troupe-dev/troupe/internal/tool"
)

func TestTodoWrite(t *testing.T) {
	twenty := `{"todos":[` + todoRepeatJSON(`{"content":"x","status":"pending"}`, 20) + `]}`
	tooMany := `{"todos":[` + todoRepeatJSON(`{"content":"x","status":"pending"}`, 21) + `]}`

	tests := []struct {
		name      string
		input     string
		want      tool.Result
		wantItems []todo.Item // nil: the list is unchanged from start
	}{
		{
			name: "mixed",
			input: `{"todos":[
				{"content":"Read the code","status":"completed","activeForm":"Reading the code"},
				{"content":"Write the fix","status":"in_progress","activeForm":"Writing the fix"},
				{"content":"Run the tests","status":"pending","activeForm":"Running the tests"}]}`,
			want: tool.OK("Todo list updated (1 of 3 completed):\n[x] Read the code\n[>] Writing the fix\n[ ] Run the tests"),
			wantItems: []todo.Item{
				{Content: "Read the code", Status: todo.Completed, ActiveForm: "Reading the code"},
				{Content: "Write the fix", Status: todo.InProgress, ActiveForm: "Writing the fix"},
				{Content: "Run the tests", Status: todo.Pending, ActiveForm: "Running the tests"},
			},
		},
		{
			name:      "clear",
			input:     `{"todos":[]}`,
			want:      tool.OK("Todo list cleared."),
			wantItems: []todo.Item{},
		},
		{
			name:  "two in progress",
			input: `{"todos":[{"content":"A","status":"in_progress"},{"content":"B","status":"in_progress"}]}`,
			want:  tool.Errorf(`the todo list was not changed: more than one item in progress: only one item may be in_progress at a time, but items 1 ("A") and 2 ("B") are; keep the one you are working on and set the others to pending or completed`),
		},
		{
			name:  "over the cap",
			input: tooMany,
			want:  tool.Errorf("the todo list was not changed: too many items: the list holds at most 20 items and got 21; merge small steps or drop finished ones"),
		},
		{
			name:      "at the cap",
			input:     twenty,
			want:      tool.OK("Todo list updated (0 of 20 completed):\n" + todoRepeatLines("[ ] x", 20)),
			wantItems: todoRepeatItem(todo.Item{Content: "x", Status: todo.Pending}, 20),
		},
		{
			name:  "empty content",
			input: `{"todos":[{"content":"","status":"pending"}]}`,
			want:  tool.Errorf("the todo list was not changed: empty content: item 1 has no content"),
		},
		{
			name:  "missing todos",
			input: `{}`,
			want:  tool.Errorf(`invalid arguments for TodoWrite: "todos" is required`),
		},
		{
			name:  "todos not an array",
			input: `{"todos":"buy milk"}`,
			want:  tool.Errorf(`invalid arguments for TodoWrite: "todos" has the wrong shape: json: cannot unmarshal string into Go value of type []todo.Item`),
		},
	}
	start := []todo.Item{{Content: "Old", Status: todo.Pending}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list := new(todo.List)
			if err := list.Replace(start); err != nil {
				t.Fatal(err)
			}
			tw := tool.TodoWriteTool(list)
			got := tw.Run(context.Background(), &tool.Env{}, json.RawMessage(tt.input))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Run (-want +got):\n%s", diff)
			}
			want := tt.wantItems
			if want == nil {
				want = start
			}
			if diff := cmp.Diff(want, list.Items(), todoEmptyEqual); diff != "" {
				t.Errorf("list after Run (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTodoWriteSpec(t *testing.T) {
	tw := tool.TodoWriteTool(nil)
	spec := tw.Spec()
	if spec.Name != todo.ToolName || spec.Description == "" || tw.ReadOnly() {
		t.Errorf("spec %q (description %d bytes), read-only %v; want TodoWrite, a description, false", spec.Name, len(spec.Description), tw.ReadOnly())
	}
	var schema struct {
		Properties struct {
			Todos struct {
				MaxItems int `json:"maxItems"`
				Items    struct {
					Properties struct {
						Status struct {
							Enum []string `json:"enum"`
						} `json:"status"`
					} `json:"properties"`
				} `json:"items"`
			} `json:"todos"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(spec.InputSchema, &schema); err != nil {
		t.Fatalf("input schema is not JSON: %v", err)
	}
	if diff := cmp.Diff([]string{"pending", "in_progress", "completed"}, schema.Properties.Todos.Items.Properties.Status.Enum); diff != "" {
		t.Errorf("status enum (-want +got):\n%s", diff)
	}
	if schema.Properties.Todos.MaxItems != todo.MaxItems || !cmp.Equal(schema.Required, []string{"todos"}) {
		t.Errorf("maxItems %d, required %v", schema.Properties.Todos.MaxItems, schema.Required)
	}
}

// The tool and the loop share one list: a TodoWrite call seen by AfterRound
// keeps the reminder away, three rounds without one bring it.
func TestTodoWriteWithReminder(t *testing.T) {
	list := new(todo.List)
	tw := tool.TodoWriteTool(list)
	res := tw.Run(context.Background(), &tool.Env{}, json.RawMessage(`{"todos":[{"content":"Fix","status":"in_progress","activeForm":"Fixing"}]}`))
	if res.IsError {
		t.Fatal(res.Content)
	}
	rounds := [][]string{{todo.ToolName}, {"bash"}, {"bash"}, {"bash"}}
	var got []string
	for _, r := range rounds {
		got = append(got, list.AfterRound(r))
	}
	if got[0] != "" || got[1] != "" || got[2] != "" || got[3] == "" {
		t.Errorf("reminders by round = %q; want one in round 4 only", got)
	}
}

var todoEmptyEqual = cmp.Comparer(func(a, b []todo.Item) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return cmp.Equal(a, b)
})

func todoRepeatJSON(s string, n int) string {
	out := s
	for range n - 1 {
		out += "," + s
	}
	return out
}

func todoRepeatLines(s string, n int) string {
	out := s
	for range n - 1 {
		out += "\n" + s
	}
	return out
}

func todoRepeatItem(it todo.Item, n int) []todo.Item {
	out := make([]todo.Item, n)
	for i := range out {
		out[i] = it
	}
	return out
}
