package tool

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

//go:embed task_output.md
var taskOutputDescription string

const (
	taskOutputDefaultTimeout = 30
	taskOutputMaxTimeout     = 600
)

type taskOutputArgs struct {
	TaskID  string `json:"task_id" required:"true" desc:"The background job's id, e.g. bg_1."`
	Block   *bool  `json:"block" desc:"Wait for the job to finish before answering; default true."`
	Timeout *int   `json:"timeout" desc:"When blocking, the most seconds to wait; default 30, at most 600."`
}

type taskOutputTool struct{}

var taskOutputSpec = lazySpec[taskOutputArgs]("TaskOutput", taskOutputDescription)

func (taskOutputTool) Spec() llm.ToolSpec { return taskOutputSpec() }
func (taskOutputTool) ReadOnly() bool     { return true }
func (taskOutputTool) Kind() kind.Kind    { return kind.Manage }

func (taskOutputTool) Run(ctx context.Context, env *Env, input json.RawMessage) Result {
	args, res, ok := decodeArgs[taskOutputArgs]("TaskOutput", input)
	if !ok {
		return res
	}
	block := args.Block == nil || *args.Block
	timeout := taskOutputDefaultTimeout
	if args.Timeout != nil {
		timeout = *args.Timeout
		if timeout < 0 || timeout > taskOutputMaxTimeout {
			return Errorf(`invalid arguments for TaskOutput: "timeout" must be between 0 and %d seconds, got %d`, taskOutputMaxTimeout, timeout)
		}
	}
	if env == nil || env.Jobs == nil {
		return Errorf("TaskOutput: this agent has no background jobs")
	}
	st, err := env.Jobs.Output(ctx, args.TaskID, block, time.Duration(timeout)*time.Second)
	if err != nil {
		return Errorf("TaskOutput: %v", err)
	}
	note := ""
	if block && st.State == JobRunning {
		note = fmt.Sprintf(" (still running after waiting %ds)", timeout)
	}
	return OK(FormatJob(st) + note)
}

// FormatJob renders a job's status for a model: a header line, then its
// output. The agent loop may use it to announce finished jobs.
func FormatJob(st JobStatus) string {
	var b strings.Builder
	b.WriteString(jobHeader(st))
	switch {
	case st.Output == "" && st.State == JobRunning:
		b.WriteString("\n(no output yet)")
	case st.Output == "":
		b.WriteString("\n(no output)")
	default:
		b.WriteString("\n<output>\n")
		b.WriteString(st.Output)
		if !strings.HasSuffix(st.Output, "\n") {
			b.WriteString("\n")
		}
		b.WriteString("</output>")
	}
	return b.String()
}

// jobHeader is "bg_1 [bash] npm test: failed, exit code 1".
func jobHeader(st JobStatus) string {
	s := fmt.Sprintf("%s [%s] %s: %s", st.ID, st.Kind, st.Description, st.State)
	if st.ExitCode != nil {
		s += fmt.Sprintf(", exit code %d", *st.ExitCode)
	}
	if st.Error != "" {
		s += ": " + st.Error
	}
	return s
}
