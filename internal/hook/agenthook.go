package hook

import (
	"context"
	"time"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/subagent"
	"github.com/troupe-dev/troupe/internal/tool"
)

// AgentTimeout is an agent hook's timeout when its settings give none
// (Claude Code's default).
const AgentTimeout = 60 * time.Second

// AgentMaxTurns bounds the model calls of an agent hook's subagent, as
// Claude Code bounds its turns.
const AgentMaxTurns = 50

// AgentConfig is what agent hooks run on: the model their subagent calls,
// the workspace it reads, and the policy whose rules bind its reads.
type AgentConfig struct {
	Provider llm.Provider
	Model    string
	// Workspace is what the subagent's Read, Glob and Grep reach (its
	// additional directories included).
	Workspace *tool.Workspace
	// Policy, if set, decides the subagent's reads as in default mode: a
	// Read deny keeps it out, and so does an ask rule (nobody can answer
	// one from inside a hook); its searches leave denied paths out.
	Policy *permission.Policy
}

// agentInstructions tell an agent hook's subagent how to answer: Claude
// Code's response shape, after it has looked at what it needs.
const agentInstructions = `You verify a condition for a hook of a coding agent. You may read the workspace
(read_file, glob, grep) to check it; you change nothing. When you know, end with
one JSON object and nothing after it: {"ok": true} to let the agent go on, or
{"ok": false, "reason": "why, addressed to the agent"} to stop it.

`

// SetAgent gives the runner what its agent hooks run on. Until then they
// are reported and not run.
func (r *Runner) SetAgent(c AgentConfig) {
	if r != nil && c.Provider != nil {
		r.agent.Store(&c)
	}
}

// agentAsker is an Asker that answers through a read-only subagent
// (Claude Code's Explore tools: Read, Grep, Glob), at most AgentMaxTurns
// model calls; nil when SetAgent was not called. Its tool calls fire no
// hooks, so that an agent hook cannot set itself off.
func (r *Runner) agentAsker() Asker {
	c := r.agent.Load()
	if c == nil {
		return nil
	}
	return func(ctx context.Context, model, prompt string) (string, error) {
		if model == "" {
			model = c.Model
		}
		run := &subagent.Runner{Provider: c.Provider, Model: model, Workspace: c.Workspace, Parent: "hook",
			MaxIterations: AgentMaxTurns}
		if c.Policy != nil {
			run.Gate = permission.Gate(permission.GateConfig{Policy: c.Policy})
			run.Hidden = c.Policy.DeniesPath
		}
		return run.Run(ctx, tool.TaskArgs{SubagentType: subagent.Explore, Description: "agent hook", Prompt: agentInstructions + prompt})
	}
}
