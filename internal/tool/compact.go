package tool

import (
	"context"
	_ "embed"
	"encoding/json"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

//go:embed compact.md
var compactDescription string

type compactArgs struct {
	Focus string `json:"focus" desc:"What the summary must keep in detail; optional."`
}

type compactTool struct{}

var compactSpec = lazySpec[compactArgs]("compact", compactDescription)

// CompactTool returns the compact tool: it asks the agent, through
// Env.RequestCompact, to replace its conversation by a summary before its
// next model call. The agent does the work; the tool only asks.
func CompactTool() Tool { return compactTool{} }

func (compactTool) Spec() llm.ToolSpec { return compactSpec() }

// ReadOnly: the tool changes nothing outside the conversation, so plan mode
// may allow it and it may run beside other read-only calls.
func (compactTool) ReadOnly() bool { return true }

// Kind: the conversation is the agent's own to manage, so a delegate lead
// may compact too.
func (compactTool) Kind() kind.Kind { return kind.Manage }

func (compactTool) Run(ctx context.Context, env *Env, input json.RawMessage) Result {
	args, res, ok := decodeArgs[compactArgs]("compact", input)
	if !ok {
		return res
	}
	if env == nil || env.RequestCompact == nil {
		return Errorf("compact is not available: this agent cannot compact its conversation")
	}
	if err := ctx.Err(); err != nil {
		return Errorf("compact was not run: %v", err)
	}
	env.RequestCompact(args.Focus)
	return OK("Compaction requested: the conversation will be replaced by your summary before your next turn.")
}
