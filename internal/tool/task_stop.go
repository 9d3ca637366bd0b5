package tool

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

//go:embed task_stop.md
var taskStopDescription string

type taskStopArgs struct {
	TaskID string `json:"task_id" required:"true" desc:"The background job's id, e.g. bg_1."`
}

type taskStopTool struct{}

var taskStopSpec = lazySpec[taskStopArgs]("TaskStop", taskStopDescription)

func (taskStopTool) Spec() llm.ToolSpec { return taskStopSpec() }
func (taskStopTool) ReadOnly() bool     { return false }
func (taskStopTool) Kind() kind.Kind    { return kind.Manage }

func (taskStopTool) Run(ctx context.Context, env *Env, input json.RawMessage) Result {
	args, res, ok := decodeArgs[taskStopArgs]("TaskStop", input)
	if !ok {
		return res
	}
	if env == nil || env.Jobs == nil {
		return Errorf("TaskStop: this agent has no background jobs")
	}
	before, err := env.Jobs.Output(ctx, args.TaskID, false, 0)
	if err != nil {
		return Errorf("TaskStop: %v", err)
	}
	if before.State != JobRunning {
		return OK(fmt.Sprintf("%s had already ended; nothing to stop.\n%s", args.TaskID, FormatJob(before)))
	}
	if err := env.Jobs.Stop(args.TaskID); err != nil {
		return Errorf("TaskStop: %v", err)
	}
	after, err := env.Jobs.Output(ctx, args.TaskID, false, 0)
	if err != nil {
		return Errorf("TaskStop: %v", err)
	}
	return OK(fmt.Sprintf("Stopped %s.\n%s", args.TaskID, FormatJob(after)))
}
