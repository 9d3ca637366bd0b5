package team

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/compact"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/skill"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/subagent"
	"github.com/troupe-dev/troupe/internal/todo"
	"github.com/troupe-dev/troupe/internal/tool"
)

// Roles whose tools `troupe tools` can show.
const (
	RoleLead     = "lead"
	RoleTeammate = "teammate"
	RoleSubagent = "subagent"
)

// leadRegistry is the lead's column of DESIGN §4's table, in a fixed order
// (the order is part of the cached prompt prefix).
func leadRegistry(b *binding, list *todo.List, skills *skill.Set, sub tool.TaskHandlers, extra ...tool.Tool) *tool.Registry {
	r := tool.NewRegistry(tool.Builtins()...)
	r.Add(tool.TodoWriteTool(list))
	for _, t := range []tool.Tool{taskCreateTool{b}, taskUpdateTool{b}, taskListTool{b}, taskGetTool{b}, sendMessageTool{b}} {
		r.Add(t)
	}
	r.Add(tool.TaskTool(sub))
	r.Add(tool.SkillTool(skills))
	for _, t := range tool.JobTools() {
		r.Add(t)
	}
	r.Add(teamCreateTool{b})
	r.Add(teamDeleteTool{b})
	r.Add(mergeStatusTool{b})
	r.Add(tool.CompactTool())
	addExtra(r, extra)
	return r
}

// addExtra offers tools from outside troupe (MCP servers') after an
// agent's own; a name already taken keeps its own tool.
func addExtra(r *tool.Registry, extra []tool.Tool) {
	for _, t := range extra {
		if _, taken := r.Get(t.Spec().Name); !taken {
			r.Add(t)
		}
	}
}

// mcpPrefix begins the name of every MCP server's tool:
// mcp__<server>__<tool>.
const mcpPrefix = "mcp__"

// mcpServerOf returns the server an MCP tool's name names, if it is one.
func mcpServerOf(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, mcpPrefix)
	if !ok {
		return "", false
	}
	s, _, ok := strings.Cut(rest, "__")
	return s, ok && s != ""
}

// mcpSelect returns the tools of extra a member limited to servers is
// given: every tool not an MCP server's, and those of the servers named
// (servers empty: all).
func mcpSelect(extra []tool.Tool, servers []string) []tool.Tool {
	if len(servers) == 0 {
		return extra
	}
	var out []tool.Tool
	for _, t := range extra {
		if s, ok := mcpServerOf(t.Spec().Name); !ok || slices.Contains(servers, s) {
			out = append(out, t)
		}
	}
	return out
}

// mcpServerNames are the servers whose tools are among extra, sorted.
func mcpServerNames(extra []tool.Tool) []string {
	var out []string
	for _, t := range extra {
		if s, ok := mcpServerOf(t.Spec().Name); ok && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// teammateRegistry is a teammate's column: never Task, TeamCreate,
// TeamDelete, TaskGet or Skill. Unlike the seed's table, a teammate has
// TaskOutput and TaskStop for its own background jobs: bash offers it
// run_in_background, and a job it could start but never read or stop
// would be a leak.
func teammateRegistry(b *binding, list *todo.List, extra ...tool.Tool) *tool.Registry {
	r := tool.NewRegistry(tool.Builtins()...)
	r.Add(tool.TodoWriteTool(list))
	for _, t := range []tool.Tool{taskCreateTool{b}, taskUpdateTool{b}, taskListTool{b}, sendMessageTool{b}} {
		r.Add(t)
	}
	for _, t := range tool.JobTools() {
		r.Add(t)
	}
	r.Add(tool.CompactTool())
	addExtra(r, extra)
	return r
}

// ToolSpecs returns what a model in the given role is offered: "lead",
// "teammate" or "subagent" (a general subagent; "subagent:explore" for the
// read-only kind).
func ToolSpecs(role string) ([]llm.ToolSpec, error) {
	b := &binding{}
	switch role {
	case RoleLead:
		return leadRegistry(b, &todo.List{}, nil, tool.TaskHandlers{}).Specs(), nil
	case RoleTeammate:
		return teammateRegistry(b, &todo.List{}).Specs(), nil
	}
	typ := subagent.General
	if len(role) > len(RoleSubagent)+1 && role[:len(RoleSubagent)+1] == RoleSubagent+":" {
		typ = role[len(RoleSubagent)+1:]
	} else if role != RoleSubagent {
		return nil, fmt.Errorf("unknown role %q (want lead, teammate, subagent or subagent:TYPE)", role)
	}
	ts, err := subagent.Tools(typ, &todo.List{})
	if err != nil {
		return nil, err
	}
	return tool.NewRegistry(ts...).Specs(), nil
}

// compaction returns the compaction settings every agent of a session gets:
// automatic and micro compaction, and the summary recorded in the agent's
// transcript (the history itself is already there, message by message).
func compaction(t func() (store.Team, error), name string, log *slog.Logger) (agent.Compactor, func(agent.Compaction) error) {
	onCompact := func(c agent.Compaction) error {
		tm, err := t()
		if err != nil {
			return nil // no team yet: nothing to record to
		}
		line, err := json.Marshal(map[string]any{
			"ts": time.Now().UTC(), "type": "compaction", "reason": c.Reason, "summary": c.Summary,
			"replaced_messages": len(c.Replaced), "context_tokens": c.ContextTokens,
		})
		if err != nil {
			return err
		}
		if err := tm.Transcripts().Append(context.Background(), name, line); err != nil {
			return fmt.Errorf("record compaction of %s: %w", name, err)
		}
		return nil
	}
	return &compact.Compactor{}, onCompact
}
