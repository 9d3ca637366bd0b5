package store

import "errors"

// Sentinel errors of every store implementation. Implementations wrap them
// with the name or id concerned, so callers test with errors.Is and show the
// wrapped text to people.
var (
	// ErrInvalidName: a team or member name does not match NamePattern.
	ErrInvalidName = errors.New("invalid name")
	// ErrTeamNotFound: no team by that name.
	ErrTeamNotFound = errors.New("team not found")
	// ErrTeamExists: CreateTeam on a name already taken.
	ErrTeamExists = errors.New("team already exists")
	// ErrUnknownMember: a message is addressed to a name that is not on the
	// roster. The wrapped text lists the valid names.
	ErrUnknownMember = errors.New("unknown member")
	// ErrMemberGone: a message is addressed to a member that has shut down.
	ErrMemberGone = errors.New("member has shut down")
	// ErrMemberExists: a roster update adds a name twice.
	ErrMemberExists = errors.New("member already exists")
	// ErrInvalidMessage: a message lacks a required field or has an unknown type.
	ErrInvalidMessage = errors.New("invalid message")
	// ErrInboxFull: the recipient's unread backlog has passed the configured
	// limit; the send was refused and nothing was written.
	ErrInboxFull = errors.New("inbox full")
	// ErrNotReceived: Ack names a message this reader was not handed.
	ErrNotReceived = errors.New("message not received")
	// ErrTaskNotFound: no task by that id (or it was deleted).
	ErrTaskNotFound = errors.New("task not found")
	// ErrInvalidTask: a task has an unknown status, a bad id or an empty subject.
	ErrInvalidTask = errors.New("invalid task")
	// ErrCycle: a dependency would make a task wait, directly or not, on itself.
	ErrCycle = errors.New("dependency cycle")
	// ErrClaimed: the task already has an owner.
	ErrClaimed = errors.New("task already claimed")
	// ErrBlocked: the task still waits on unfinished tasks.
	ErrBlocked = errors.New("task blocked")
	// ErrNotPending: the task is in progress, completed or deleted.
	ErrNotPending = errors.New("task not pending")
	// ErrNoTask: ClaimNext found no pending, unowned, unblocked task.
	ErrNoTask = errors.New("no claimable task")
	// ErrInvalidCursor: a journal cursor that the journal never returned.
	ErrInvalidCursor = errors.New("invalid journal cursor")
	// ErrArchiveNotFound: no archive by that id.
	ErrArchiveNotFound = errors.New("archive not found")
	// ErrUnknownScheme: Open was given a URL whose scheme no backend
	// registered. The wrapped text lists the known schemes.
	ErrUnknownScheme = errors.New("unknown store scheme")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store closed")
)
