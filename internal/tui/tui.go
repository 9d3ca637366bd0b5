// Package tui is troupe's terminal UI (bubbletea): the conversation with the
// lead, streamed and rendered as markdown; a side panel of the team's
// members with their status, task and token use; the task board; a timeline
// of what members tell each other; approval prompts the human answers in
// place; and a status line with a spinner and team-wide counts.
//
// It shows what the agents and the team report (as messages sent to the
// program) and acts only through a Controller: it never touches the store
// or an agent itself. The team's state is a teamview.View (shared with the
// web dashboard); the UI keeps only its own (input, views, scroll, its
// remarks). Views are functions of that state, so they are tested with
// golden files.
package tui

import (
	"context"
	"time"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/teamview"
)

// Controller is what the UI asks of the session behind it. Methods that may
// block take a context and are called off the UI's goroutine.
type Controller interface {
	// Submit gives text to the lead (queued while the lead is in a turn).
	Submit(text string)
	// Interrupt stops the lead's turn in progress; false if there is none.
	Interrupt() bool
	// Compact summarises the lead's conversation (/compact).
	Compact(focus string)
	// Send sends text from the human to a member (@name text).
	Send(ctx context.Context, to, text string) error
	// Answer answers a permission or plan approval request.
	Answer(ctx context.Context, requestID string, approve bool, feedback string) error
	// Snapshot returns the team as it stands (roster and board).
	Snapshot(ctx context.Context) (Snapshot, error)
	// Inbox returns the messages waiting in a member's inbox, unconsumed.
	Inbox(ctx context.Context, name string) ([]store.Message, error)
}

// ModeSwitcher is a Controller that can change the lead's permission mode
// while the session runs (Shift+Tab).
type ModeSwitcher interface {
	SetPermissionMode(mode string) error
}

// Snapshot is the team as the store has it: its roster, its board, the
// tasks whose files cannot be read (shown as corrupt, never hidden), and
// the teammates whose runtime is up (a member that is neither shut down
// nor running is shown dead; nil: unknown).
type Snapshot = teamview.Snapshot

// Options configure a Model.
type Options struct {
	// Controller acts on the session; nil makes a read-only UI (the demo).
	Controller Controller
	// Demo plays a story the user only watches: no input line, q quits.
	Demo bool
	// PermissionMode is the lead's mode at the start, always shown in the
	// status line (default: "default"). Shift+Tab cycles default,
	// acceptEdits and plan, as Claude Code does, and bypassPermissions too
	// when the session started in it.
	PermissionMode string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Commands are the user's own slash commands (skills and Claude Code
	// commands), listed by /help; Expand turns "/name args" into the prompt
	// sent to the lead, ok false for a name it does not know.
	Commands []Command
	Expand   func(name, args string) (prompt string, ok bool)
	// ResumeCommand is the command that resumes a team, shown when the
	// human quits while members work (default "troupe resume TEAM").
	ResumeCommand func(team string) string
}

// Command is one of the user's own slash commands.
type Command struct {
	Name, ArgumentHint, Description string
}

// Messages the program accepts from outside (Program.Send).
type (
	// AgentMsg is an event of any agent's run.
	AgentMsg agent.Event
	// TeamMsg is a team journal event; the UI decodes it (teamevent).
	TeamMsg store.Event
	// HistoryMsg is a team's journal before this session (troupe resume):
	// the roster, board and timeline are rebuilt from it, without remarks.
	HistoryMsg []store.Event
	// DeliveredMsg: messages were handed to an agent's model (the team's
	// OnDelivered); those to the lead are shown verbatim.
	DeliveredMsg struct {
		Agent    string
		Messages []store.Message
		At       string
	}
	// UpdateMsg is what the interactive driver reports.
	UpdateMsg team.Update
	// RequestMsg is a permission or plan approval request for the human.
	RequestMsg store.Message
	// PromptMsg shows text as said by the human (the demo's goal).
	PromptMsg string
	// FinishedMsg ends a session or the demo: Summary is shown, then the
	// user quits with q.
	FinishedMsg struct {
		Summary string
		Err     error
	}
)
