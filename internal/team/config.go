package team

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/replay/pace"
	"github.com/troupe-dev/troupe/internal/skill"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/subagent"
	"github.com/troupe-dev/troupe/internal/teamkey"
	"github.com/troupe-dev/troupe/internal/tool"
)

// Config is what every agent of a session shares. Its options are grouped
// by concern into embedded records, so a reader finds related settings
// together and the record stays small (issue 15); the fields are promoted,
// so cfg.Model or cfg.OnEvent reads and writes them directly.
type Config struct {
	Store     store.Store
	Provider  llm.Provider
	Workspace *tool.Workspace
	// Rules are the settings' permission rules, hooks, guard and patterns.
	Rules *Rules
	// Keys holds the teams' secret keys: TeamCreate makes one, Resume
	// reads it, TeamDelete deletes it, and every message of the team is
	// signed with it (see package store/seal); teammate processes get it
	// through an inherited descriptor. Nil leaves messages unsigned.
	Keys *teamkey.Keys
	// Pacer, when set, shares one turn between the lead and its in-process
	// teammates so a run can be recorded and replayed exactly (see package
	// pace); nil runs them freely.
	Pacer *pace.Pacer

	Limits
	Prompts
	Modes
	Processes
	Approvals
	Observers
}

// Limits groups the models the session's agents run on with the bounds on
// how long they run: both are chosen per run on the command line and
// passed on to every teammate.
type Limits struct {
	// Model is the lead's model; TeammateModel the default for teammates
	// (empty: the provider's default).
	Model         string
	TeammateModel string
	// MaxTurns bounds the model calls of one agent run (0: none).
	MaxTurns int
	// IdleTimeout makes an idle teammate exit after this long with nothing
	// to do (0: stay until shut down).
	IdleTimeout time.Duration
}

// Prompts groups what the lead's system prompt and its prompt-driven tools
// are made of: the text given to the model, and the skills and subagent
// types it may call on.
type Prompts struct {
	// SystemPrompt, when set, replaces the lead's whole system prompt
	// (--system-prompt); AppendSystemPrompt is added at its end
	// (--append-system-prompt). Teammates keep their own.
	SystemPrompt       string
	AppendSystemPrompt string
	// Sections are added to every agent's system prompt (project memory,
	// the skills list); Skills backs the lead's Skill tool.
	Sections []string
	Skills   *skill.Set
	// Agents are the custom subagent types (.claude/agents) the lead's Task
	// tool may start beside the built-in ones.
	Agents *subagent.Catalog
	// Tools are offered to the lead and every teammate after their own
	// (the MCP servers' tools, mcp__<server>__<tool>); each declares its
	// kind, which the permission engine decides by.
	Tools []tool.Tool
}

// Modes groups the switches that decide what the lead may do itself and
// how its teammates run: each is one flag of the command line.
type Modes struct {
	// PermissionMode is the lead's mode and the default for teammates.
	PermissionMode string
	// Delegate limits the lead to management tools.
	Delegate bool
	// TeammateMode is ModeInProcess (default) or ModeProcess.
	TeammateMode string
}

// Processes groups how teammates are started and stopped: the command and
// environment of process mode, where each teammate works, and how long
// shutting them down may take.
type Processes struct {
	// AgentCommand is the command that runs one teammate in process mode;
	// "--team T --name N --workspace DIR" and the key's descriptor are
	// appended.
	AgentCommand []string
	// AgentEnv is added to the environment of teammate processes.
	AgentEnv []string
	// AgentStderr receives the standard error of teammate processes
	// (default: the lead's own standard error).
	AgentStderr io.Writer
	// ShutdownWait bounds how long TeamDelete waits for members to stop
	// (default 2m).
	ShutdownWait time.Duration
	// Placement gives each teammate its workspace, rules and launcher
	// (nil: SharedPlacement, the lead's workspace and rules, in process or
	// with AgentCommand).
	Placement Placement
	// Worktrees is where teammates work by default and how their
	// branches merge back (worktree isolation).
	Worktrees
	// Remote is the git remote teammates on other machines clone, recorded
	// in the roster at TeamCreate (remote placement).
	Remote RemoteGit
}

// Approvals groups the lead's permission decisions that leave the team:
// the refusals reported to the caller and the requests and questions a
// human attached to the lead answers instead of its model. Only the lead
// has them; teammates' requests go to the lead.
type Approvals struct {
	// OnDenied, when set, sees every tool call of the lead (and of its
	// subagents) that the permission gate refused, with the reason the
	// model was given.
	OnDenied func(call agent.Call, reason string)
	// HumanRequests, when set, is offered every permission and plan
	// approval request addressed to the lead: a human is attached (the
	// terminal UI). If it returns true the human will answer (with
	// AnswerAsHuman) and the lead's model never sees the request.
	HumanRequests func(store.Message) bool
	// AskHuman, when set, answers the lead's own permission questions (a
	// human is attached); nil refuses them.
	AskHuman func(ctx context.Context, call agent.Call, reason string) agent.Decision
}

// Observers groups where an agent's activity is reported as it happens:
// its agent events, the team events it journals, the messages delivered to
// it, and the log. The lead hands the same Observers to its in-process
// teammates (MemberConfig embeds it too), so one type keeps them all
// passed on.
type Observers struct {
	// Observe receives every agent's events.
	Observe func(agent.Event)
	// OnEvent receives team events (status changes, messages, tasks) as
	// they are journaled; package teamevent decodes them.
	OnEvent func(store.Event)
	// OnDelivered receives the inbox messages handed to an agent's model
	// (the lead's or a teammate's in this process), as they were sent, and
	// where: AtIdle (they woke it) or AtToolBoundary (during its turn).
	OnDelivered func(agent string, msgs []store.Message, at string)
	Logger      *slog.Logger
}
