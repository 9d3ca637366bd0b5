package tool

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/todo"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

//go:embed todowrite.md
var todoWriteDescription string

type todoWriteArgs struct {
	Todos []todo.Item `json:"todos" required:"true"`
}

// todoWriteSchema is written out by hand: the items are objects, which the
// argument-struct schema does not describe.
var todoWriteSchema = json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "todos": {
      "type": "array",
      "description": "The whole updated list; it replaces the previous one. [] clears it.",
      "maxItems": %d,
      "items": {
        "type": "object",
        "properties": {
          "content": {"type": "string", "minLength": 1, "description": "What to do, in the imperative: \"Run the tests\"."},
          "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
          "activeForm": {"type": "string", "description": "The same in the present continuous, shown while in progress: \"Running the tests\"."}
        },
        "required": ["content", "status", "activeForm"]
      }
    }
  },
  "required": ["todos"]
}`, todo.MaxItems))

type todoWriteTool struct{ list *todo.List }

// TodoWriteTool returns the TodoWrite tool over list, the checklist the
// agent loop also holds to call list.AfterRound once per round of tool use.
// A nil list gets a private one, which no loop will remind the model of.
//
// The tool is not read-only: it changes the list, and two calls in one
// round must apply in the order the model made them.
func TodoWriteTool(list *todo.List) Tool {
	if list == nil {
		list = new(todo.List)
	}
	return todoWriteTool{list: list}
}

func (todoWriteTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: todo.ToolName, Description: todoWriteDescription, InputSchema: todoWriteSchema}
}
func (todoWriteTool) ReadOnly() bool  { return false }
func (todoWriteTool) Kind() kind.Kind { return kind.Manage }

func (t todoWriteTool) Run(ctx context.Context, _ *Env, input json.RawMessage) Result {
	if err := ctx.Err(); err != nil {
		return Errorf("%s was not run: %v", todo.ToolName, err)
	}
	args, res, ok := decodeArgs[todoWriteArgs](todo.ToolName, input)
	if !ok {
		return res
	}
	if err := t.list.Replace(args.Todos); err != nil {
		return Errorf("the todo list was not changed: %v", err)
	}
	if len(args.Todos) == 0 {
		return OK("Todo list cleared.")
	}
	done := 0
	for _, it := range args.Todos {
		if it.Status == todo.Completed {
			done++
		}
	}
	return OK(fmt.Sprintf("Todo list updated (%d of %d completed):\n%s", done, len(args.Todos), t.list.Render()))
}
