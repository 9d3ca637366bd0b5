package team

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/troupe-dev/troupe/internal/hook"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

// --- TaskCreate ---

type taskCreateArgs struct {
	Subject     string   `json:"subject" required:"true" desc:"A short imperative title."`
	Description string   `json:"description" desc:"What done means, in enough detail for a teammate."`
	ActiveForm  string   `json:"activeForm" desc:"The title in the present continuous, shown while the task is in progress."`
	Role        string   `json:"role" desc:"Reserve the task for teammates with this role (or name)."`
	BlockedBy   []string `json:"blockedBy" desc:"Ids of tasks that must be completed first."`
	Files       []string `json:"files" desc:"Paths (globs relative to the workspace, e.g. src/api/**) the task will change: while it is in progress its owner holds a lease on them and other teammates' writes there are refused."`
}

type taskCreateTool struct{ b *binding }

var taskCreateSpec = tool.NewSpec[taskCreateArgs]("TaskCreate", "Add a task to the team's shared board. It starts pending; idle teammates claim pending, unblocked tasks by themselves.")

func (taskCreateTool) Spec() llm.ToolSpec { return taskCreateSpec }
func (taskCreateTool) ReadOnly() bool     { return false }
func (taskCreateTool) Kind() kind.Kind    { return kind.Manage }
func (t taskCreateTool) Run(ctx context.Context, env *tool.Env, input json.RawMessage) tool.Result {
	return t.RunBatch(ctx, []*tool.Env{env}, []json.RawMessage{input})[0]
}

var _ tool.Batcher = taskCreateTool{}

// RunBatch creates the tasks of consecutive TaskCreate calls of one
// message in one change of the board where the store can (ids in the
// calls' order; a task may be blocked by one created before it), then
// runs the TaskCreated hooks and journals the tasks in order. When the
// change is refused, each task is created on its own, so that a bad call
// fails alone.
func (t taskCreateTool) RunBatch(ctx context.Context, _ []*tool.Env, inputs []json.RawMessage) []tool.Result {
	out := make([]tool.Result, len(inputs))
	type call struct {
		at    int
		task  store.Task
		files []string
	}
	var calls []call
	for i, input := range inputs {
		task, files, res, ok := decodeTaskCreate(input)
		if !ok {
			out[i] = res
			continue
		}
		calls = append(calls, call{at: i, task: task, files: files})
	}
	team, err := t.b.team()
	if err != nil {
		for _, c := range calls {
			out[c.at] = tool.Errorf("TaskCreate: %v", err)
		}
		return out
	}
	made := make([]store.Task, len(calls))
	errs := make([]error, len(calls))
	together := false
	if all, ok := team.Tasks().(store.TaskBatch); ok && len(calls) > 1 {
		ts := make([]store.Task, len(calls))
		for k, c := range calls {
			ts[k] = c.task
		}
		got, err := all.CreateAll(ctx, ts)
		together = err == nil // refused, nothing was made: one by one below, each with its own error
		copy(made, got)
	}
	if !together {
		for k, c := range calls {
			made[k], errs[k] = team.Tasks().Create(ctx, c.task)
		}
	}
	var events []teamevent.Event
	for k, c := range calls {
		if errs[k] != nil {
			out[c.at] = tool.Errorf("TaskCreate: %v", errs[k])
			continue
		}
		got := made[k]
		if h := t.b.rules.hooks(); h.Has("TaskCreated") {
			res := h.TaskCreated(ctx, t.b.who, hookTask(got))
			if res.Blocked {
				_, _ = team.Tasks().Update(ctx, got.ID, func(x *store.Task) error { x.Status = store.TaskDeleted; return nil })
				out[c.at] = tool.Errorf("TaskCreate: a TaskCreated hook refused the task: %s", res.Reason)
				continue
			}
		}
		events = append(events, teamevent.TaskCreate{Task: got.ID, Subject: got.Subject, BlockedBy: got.BlockedBy})
		out[c.at] = tool.OK(fmt.Sprintf("Created task #%s: %s", got.ID, got.Subject) + t.b.overlapWarning(ctx, team, got, c.files))
	}
	t.b.em.emitAll(ctx, team, events)
	return out
}

// decodeTaskCreate turns a TaskCreate call's arguments into the task to
// create and the files it will change.
func decodeTaskCreate(input json.RawMessage) (store.Task, []string, tool.Result, bool) {
	args, res, ok := tool.DecodeArgs[taskCreateArgs]("TaskCreate", input)
	if !ok {
		return store.Task{}, nil, res, false
	}
	task := store.Task{Subject: args.Subject, Description: args.Description, ActiveForm: args.ActiveForm, BlockedBy: args.BlockedBy}
	if r := strings.TrimSpace(args.Role); r != "" {
		task.Metadata = map[string]any{"role": r}
	}
	files, err := cleanGlobs(args.Files)
	if err != nil {
		return store.Task{}, nil, tool.Errorf("TaskCreate: %v", err), false
	}
	if len(files) > 0 {
		if task.Metadata == nil {
			task.Metadata = map[string]any{}
		}
		task.Metadata[filesKey] = files
	}
	return task, files, tool.Result{}, true
}

// --- TaskUpdate ---

type taskUpdateArgs struct {
	TaskID       string   `json:"taskId" required:"true" desc:"The task's id."`
	Status       string   `json:"status" enum:"pending|in_progress|completed|deleted" desc:"The new status."`
	Owner        *string  `json:"owner" desc:"The new owner (a member name; empty to unassign). Assigning tells that member."`
	Subject      string   `json:"subject" desc:"A new title."`
	Description  string   `json:"description" desc:"A new description."`
	ActiveForm   string   `json:"activeForm" desc:"A new present-continuous title."`
	AddBlocks    []string `json:"addBlocks" desc:"Ids of tasks that must wait for this one."`
	AddBlockedBy []string `json:"addBlockedBy" desc:"Ids of tasks this one must wait for."`
}

type taskUpdateTool struct{ b *binding }

var taskUpdateSpec = tool.NewSpec[taskUpdateArgs]("TaskUpdate", "Change a task: status, owner, subject, description, or its dependencies. Completing a task unblocks the tasks that wait for it.")

func (taskUpdateTool) Spec() llm.ToolSpec { return taskUpdateSpec }
func (taskUpdateTool) ReadOnly() bool     { return false }
func (taskUpdateTool) Kind() kind.Kind    { return kind.Manage }
func (t taskUpdateTool) Run(ctx context.Context, env *tool.Env, input json.RawMessage) tool.Result {
	args, res, ok := tool.DecodeArgs[taskUpdateArgs]("TaskUpdate", input)
	if !ok {
		return res
	}
	team, err := t.b.team()
	if err != nil {
		return tool.Errorf("TaskUpdate: %v", err)
	}
	id := strings.TrimPrefix(strings.TrimSpace(args.TaskID), "#")
	var owner string
	if args.Owner != nil {
		if *args.Owner == "" {
			owner = ""
		} else {
			r, err := team.ReadRoster(ctx)
			if err != nil {
				return tool.Errorf("TaskUpdate: %v", err)
			}
			if owner, err = store.ResolveRecipient(&r, *args.Owner); err != nil {
				return tool.Errorf("TaskUpdate: owner: %v", err)
			}
		}
	}
	if args.Status == store.TaskCompleted {
		if h := t.b.rules.hooks(); h.Has("TaskCompleted") {
			cur, err := team.Tasks().Get(ctx, id)
			if err != nil {
				return tool.Errorf("TaskUpdate: %v", err)
			}
			if cur.Status != store.TaskCompleted {
				cur.Status = store.TaskCompleted
				if out := h.TaskCompleted(ctx, t.b.who, hookTask(cur)); out.Blocked {
					return tool.Errorf("TaskUpdate: task #%s not completed: a TaskCompleted hook says: %s", id, out.Reason)
				}
			}
		}
	}
	merged := ""
	if args.Status == store.TaskCompleted {
		note, refused := t.b.queueOnComplete(ctx, team, id)
		if refused != "" {
			return tool.Errorf("TaskUpdate: %s", refused)
		}
		merged = note
	}
	if !t.b.lead && ((args.Owner != nil && owner == t.b.self) || args.Status == store.TaskInProgress) {
		// Seed 004: a member tells the lead before it takes an unassigned
		// task; one that did not is announced here, before the claim.
		if cur, err := team.Tasks().Get(ctx, id); err == nil && cur.Owner == "" && cur.Status == store.TaskPending {
			if err := t.b.announceClaim(ctx, team, cur); err != nil {
				return tool.Errorf("TaskUpdate: telling the lead you take task #%s failed: %v", id, err)
			}
		}
	}
	edit := store.TaskEdit{Status: args.Status, Subject: args.Subject, Description: args.Description, ActiveForm: args.ActiveForm,
		AddBlocks: args.AddBlocks, AddBlockedBy: args.AddBlockedBy}
	if args.Owner != nil {
		edit.Owner = &owner
	}
	var before store.Task
	got, err := team.Tasks().Update(ctx, id, func(task *store.Task) error {
		before = *task
		edit.Apply(task)
		if !t.b.lead && before.Owner == t.b.self && task.Owner == "" && task.Status == store.TaskPending {
			// A teammate gave its task back: it will not claim it again by
			// itself, or it would take it straight back.
			markHandedBack(task, t.b.self)
		}
		return nil
	})
	if err != nil {
		return tool.Errorf("TaskUpdate: %v", err)
	}
	change := teamevent.TaskChange{Task: got.ID, Status: got.Status, Owner: got.Owner, AddBlockedBy: args.AddBlockedBy, AddBlocks: args.AddBlocks}
	// The board holds the change durably: its line is an observation.
	if got.Status == store.TaskCompleted && before.Status != store.TaskCompleted {
		t.b.em.emitDeferred(ctx, team, teamevent.TaskComplete{TaskChange: change})
	} else {
		t.b.em.emitDeferred(ctx, team, teamevent.TaskUpdate{TaskChange: change})
	}
	if args.Owner != nil && got.Owner != "" && got.Owner != before.Owner && got.Owner != t.b.self {
		if _, err := t.b.sendAsIn(ctx, team, store.Message{Type: store.TypeTaskAssignment, From: t.b.self, To: got.Owner, TaskID: got.ID,
			Content: taskText(got, "You were assigned"), Summary: "task #" + got.ID + " assigned"}); err != nil {
			return tool.Errorf("TaskUpdate: task #%s updated but telling %s failed: %v", got.ID, got.Owner, err)
		}
	}
	if got.Status == store.TaskDeleted {
		return tool.OK(fmt.Sprintf("Deleted task #%s.", got.ID))
	}
	return tool.OK("Updated " + got.Line() + merged)
}

func hookTask(t store.Task) hook.Task {
	return hook.Task{ID: t.ID, Subject: t.Subject, Description: t.Description, Owner: t.Owner, Status: t.Status}
}

// --- TaskList / TaskGet ---

type taskListArgs struct{}

type taskListTool struct{ b *binding }

var taskListSpec = tool.NewSpec[taskListArgs]("TaskList", "Show the team's task board: every task with its status, owner and what blocks it.")

func (taskListTool) Spec() llm.ToolSpec { return taskListSpec }
func (taskListTool) ReadOnly() bool     { return true }
func (taskListTool) Kind() kind.Kind    { return kind.Manage }
func (t taskListTool) Run(ctx context.Context, env *tool.Env, input json.RawMessage) tool.Result {
	team, err := t.b.team()
	if err != nil {
		return tool.Errorf("TaskList: %v", err)
	}
	board, err := team.Tasks().Board(ctx)
	if err != nil {
		return tool.Errorf("TaskList: %v", err)
	}
	lines := boardLines(board)
	if len(lines) == 0 {
		return tool.OK("The board is empty.")
	}
	return tool.OK(strings.Join(lines, "\n"))
}

type taskGetArgs struct {
	TaskID string `json:"taskId" required:"true" desc:"The task's id."`
}

type taskGetTool struct{ b *binding }

var taskGetSpec = tool.NewSpec[taskGetArgs]("TaskGet", "Show one task in full.")

func (taskGetTool) Spec() llm.ToolSpec { return taskGetSpec }
func (taskGetTool) ReadOnly() bool     { return true }
func (taskGetTool) Kind() kind.Kind    { return kind.Manage }
func (t taskGetTool) Run(ctx context.Context, env *tool.Env, input json.RawMessage) tool.Result {
	args, res, ok := tool.DecodeArgs[taskGetArgs]("TaskGet", input)
	if !ok {
		return res
	}
	team, err := t.b.team()
	if err != nil {
		return tool.Errorf("TaskGet: %v", err)
	}
	task, err := team.Tasks().Get(ctx, strings.TrimPrefix(strings.TrimSpace(args.TaskID), "#"))
	if err != nil {
		return tool.Errorf("TaskGet: %v", err)
	}
	b, _ := json.MarshalIndent(task, "", "  ")
	return tool.OK(string(b))
}
