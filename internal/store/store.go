// Package store defines troupe's durable team state: the roster, the shared
// task board, the members' inboxes and the team journal, as small interfaces
// with one conformance suite (storetest) that every implementation passes.
// The default implementation, store/file, keeps everything as plain files
// under .troupe/.
//
// The store knows nothing of agents, models or tools, and must never import
// them: it moves bytes durably and wakes whoever waits for them.
package store

import (
	"context"
	"encoding/json"
	"time"
)

// Store holds every team of a workspace.
type Store interface {
	// CreateTeam creates a team from r (Name required; Lead is forced to
	// LeadName, CreatedAt is set when zero) and returns it.
	CreateTeam(ctx context.Context, r Roster) (Team, error)
	// Team opens an existing team (ErrTeamNotFound otherwise).
	Team(ctx context.Context, name string) (Team, error)
	// ListTeams returns the rosters of every team, sorted by name. A team
	// whose roster cannot be read makes it fail; Teams reports it instead.
	ListTeams(ctx context.Context) ([]Roster, error)
	// Teams returns every team: the rosters that read, sorted by name, and
	// the teams whose roster cannot be read, so that one broken team does
	// not hide the others.
	Teams(ctx context.Context) (TeamList, error)
	// DeleteTeam removes a team and all its state.
	DeleteTeam(ctx context.Context, name string) error
	// ArchiveTeam ends a team like DeleteTeam but keeps its state (journal,
	// transcripts, roster, board) as an archive that OpenArchive reads; the
	// name is free again at once (ErrTeamNotFound if there is no such team).
	ArchiveTeam(ctx context.Context, name string) (Archive, error)
	// Archives returns the archives of team name, oldest first (none: an
	// empty list, not an error).
	Archives(ctx context.Context, name string) ([]Archive, error)
	// OpenArchive opens an archive by its ID, to read (ErrArchiveNotFound
	// otherwise). Its Name is the team's.
	OpenArchive(ctx context.Context, id string) (Team, error)
	// Close releases watchers and files; blocked calls return ErrClosed.
	Close() error
}

// Team is the durable state of one team.
type Team interface {
	Name() string
	// ReadRoster returns the current roster.
	ReadRoster(ctx context.Context) (Roster, error)
	// ReadMember returns one member's entry of the current roster, at the
	// cost of one member rather than of the roster; ok is false when the
	// roster has no such member.
	ReadMember(ctx context.Context, name string) (m Member, ok bool, err error)
	// UpdateRoster applies fn to the roster as one atomic read-modify-write
	// across processes. If fn returns an error nothing is written. The name,
	// lead and creation time cannot be changed; member names are validated.
	UpdateRoster(ctx context.Context, fn func(*Roster) error) (Roster, error)
	// UpdateMember is UpdateRoster for the entry of one member (fn cannot
	// rename it), at the cost of one member rather than of the roster. ok
	// is false, and nothing written, when the roster has no such member.
	UpdateMember(ctx context.Context, name string, fn func(*Member) error) (m Member, ok bool, err error)
	Tasks() Tasks
	Mailbox() Mailbox
	Journal() Journal
	Transcripts() Transcripts
}

// Archive is a team's state kept after the team ended (Store.ArchiveTeam).
type Archive struct {
	// ID names the archive among every archive of the store; OpenArchive
	// takes it.
	ID string `json:"id"`
	// Team is the name the team had.
	Team       string    `json:"team"`
	ArchivedAt time.Time `json:"archived_at"`
	// Path is where the archive lives, for people, when it is on disk.
	Path string `json:"path,omitempty"`
}

// Transcripts holds each member's conversation record: one JSON value per
// entry, in the order appended. It is not mail: nothing in it is signed or
// consumed, and only its own member's runtime writes it.
type Transcripts interface {
	// Append durably adds line (one JSON value; stored compacted, with any
	// secret redacted) to member's transcript.
	Append(ctx context.Context, member string, line json.RawMessage) error
	// Read returns member's transcript in order (empty if it has none).
	// Entries that cannot be read (a torn last line) are left out.
	Read(ctx context.Context, member string) ([]json.RawMessage, error)
}

// Tasks is a team's shared task board.
type Tasks interface {
	// Create adds a task; the store assigns ID (the next integer),
	// CreatedAt and UpdatedAt, and links BlockedBy and Blocks on both sides.
	Create(ctx context.Context, t Task) (Task, error)
	// Get returns one task (ErrTaskNotFound if absent or deleted).
	Get(ctx context.Context, id string) (Task, error)
	// List returns every task that is not deleted, in numeric id order.
	// Tasks that cannot be read are left out (and logged); Board reports
	// them.
	List(ctx context.Context) ([]Task, error)
	// Board returns the whole board as one snapshot: the tasks List returns
	// and the tasks that exist but cannot be read, as Corrupt entries.
	Board(ctx context.Context) (Board, error)
	// Update applies fn to the task as one atomic read-modify-write. Changes
	// to BlockedBy or Blocks are mirrored on the other tasks; a cycle is
	// refused (ErrCycle); status completed removes the task from every
	// BlockedBy; status deleted unlinks it and removes it. If fn returns an
	// error nothing is written.
	Update(ctx context.Context, id string, fn func(*Task) error) (Task, error)
	// Claim is a compare-and-set: it makes owner the owner of task id and
	// sets it in progress only if the task is still pending, unowned and
	// unblocked (ErrNotPending, ErrClaimed, ErrBlocked otherwise).
	//
	// A claim never wins a task it should not, but a backend may refuse
	// one on news a moment old (the nats store answers refusals from its
	// copy of the board): a claim sees every change this client made, and
	// every change whose Watch wake started it, not always the latest
	// change of another client.
	Claim(ctx context.Context, id, owner string) (Task, error)
	// ClaimNext claims the claimable task with the lowest id (ErrNoTask if
	// there is none), with Claim's view of the board.
	ClaimNext(ctx context.Context, owner string) (Task, error)
	// ClaimFirst claims the first of ids that is claimable, in the order
	// given (ErrNoTask if none is), with Claim's view of the board. Tasks
	// that are gone are passed over. It is one claim however many of ids
	// were taken meanwhile: members that see the same board go for the
	// same tasks, and each Claim lost to another would cost a round of its
	// own.
	ClaimFirst(ctx context.Context, owner string, ids []string) (Task, error)
	// Watch returns a channel that receives a value (coalesced) after any
	// change to the board, by this process or another. It is closed when ctx
	// ends.
	Watch(ctx context.Context) (<-chan struct{}, error)
}

// Mailbox is the set of a team's inboxes. Each inbox has one reader (the
// member it belongs to); any number of processes may send to it.
//
// Delivery is at-least-once and never lossy: Receive hands out messages past
// the reader's position; Ack makes their consumption durable. A message
// handed out but not acked before a crash is handed out again after it
// (callers de-duplicate by ID); an acked message is never handed out again.
type Mailbox interface {
	// Send validates m, fills in ID and Timestamp when empty, checks the
	// recipient against the roster (ErrUnknownMember lists the valid names)
	// and durably appends it to the recipient's inbox.
	Send(ctx context.Context, m Message) (Message, error)
	// Broadcast sends m (type broadcast unless set) to every member of the
	// roster except m.From, and returns the messages sent.
	Broadcast(ctx context.Context, m Message) ([]Message, error)
	// Receive blocks until there are messages past the reader's position or
	// ctx ends, then returns them in order and moves the position past them.
	// With a done ctx it still returns what is already waiting.
	Receive(ctx context.Context, member string) ([]Message, error)
	// Ack durably consumes every message of member's inbox up to and
	// including the one with id, which must have been handed out by Receive.
	Ack(ctx context.Context, member, id string) error
	// Peek returns the messages not yet acked, consuming nothing.
	Peek(ctx context.Context, member string) ([]Message, error)
	// Watch returns a channel that receives a value (coalesced) whenever
	// something arrives in member's inbox. It is closed when ctx ends.
	Watch(ctx context.Context, member string) (<-chan struct{}, error)
}

// TaskBatch is a Tasks that creates several tasks in one atomic change:
// ids given in the tasks' order, a task may be blocked by one made before
// it in the same call, and either all are made or none.
type TaskBatch interface {
	Tasks
	CreateAll(ctx context.Context, ts []Task) ([]Task, error)
}

// TaskSnapshot is a Tasks that hands out the board it keeps without
// copying it, for readers that only look: an idle member choosing its
// work, a wake deciding whom to wake. Each such read after a change copied
// the whole board.
type TaskSnapshot interface {
	Tasks
	// Snapshot returns what List returns, shared with every other caller:
	// the caller must change nothing in it (the tasks, their lists, their
	// metadata). A later change makes a new snapshot; one handed out
	// never changes.
	Snapshot(ctx context.Context) ([]Task, error)
}

// ListShared is ts's Snapshot where it has one, else its List: the board,
// to be read and not changed.
func ListShared(ctx context.Context, ts Tasks) ([]Task, error) {
	if s, ok := ts.(TaskSnapshot); ok {
		return s.Snapshot(ctx)
	}
	return ts.List(ctx)
}

// TranscriptsDeferred is a Transcripts that can take a line without
// waiting for it to reach the disk: the line is in the transcript at once
// (readers see it, and it survives the writer's process being killed), and
// it is durable once a later Append to the same transcript returns, since
// the transcript is durable as a prefix, or once Sync returns. A line lost
// to a crash of the machine before that is one the next line's durability
// would have required anyway: a caller defers only lines whose loss leaves
// a transcript it can resume from (a tool's result, whose call is then
// answered as interrupted; a reply that ended a turn), and syncs before
// anything else comes to depend on them.
type TranscriptsDeferred interface {
	Transcripts
	AppendDeferred(ctx context.Context, member string, line json.RawMessage) error
	// Sync makes every line appended to member's transcript so far
	// durable; it costs nothing when none waits for it.
	Sync(ctx context.Context, member string) error
}

// SyncTranscript makes member's deferred lines in tr durable. A
// Transcripts that cannot defer has none.
func SyncTranscript(ctx context.Context, tr Transcripts, member string) error {
	if d, ok := tr.(TranscriptsDeferred); ok {
		return d.Sync(ctx, member)
	}
	return nil
}

// AppendTranscriptDeferred appends line to member's transcript in tr,
// deferred where tr can defer it, else durably.
func AppendTranscriptDeferred(ctx context.Context, tr Transcripts, member string, line json.RawMessage) error {
	if d, ok := tr.(TranscriptsDeferred); ok {
		return d.AppendDeferred(ctx, member, line)
	}
	return tr.Append(ctx, member, line)
}

// JournalBatch is a Journal that appends several events with one write:
// all of them, in order, or none.
type JournalBatch interface {
	Journal
	AppendAll(ctx context.Context, es []Event) error
}

// JournalDeferred is a Journal that can take events without waiting for
// them to reach the disk: they are in the journal at once (readers see
// them, and they survive the writer's process being killed), and durable
// with the journal's next durable append, or a few milliseconds later
// whatever comes (the journal is durable as a prefix). A caller defers
// only observations whose loss to a crash of the machine costs a line of
// history and nothing else: a model call's usage, a claim or a change of
// a task the board holds durably. Never a line something is restored
// from (a request's send).
type JournalDeferred interface {
	JournalBatch
	AppendDeferred(ctx context.Context, es []Event) error
}

// AppendEventsDeferred appends es to j in order, deferred where j can
// defer them, else durably (in one append where j takes several).
func AppendEventsDeferred(ctx context.Context, j Journal, es []Event) error {
	switch j := j.(type) {
	case JournalDeferred:
		return j.AppendDeferred(ctx, es)
	case JournalBatch:
		return j.AppendAll(ctx, es)
	}
	for _, e := range es {
		if err := j.Append(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

// Journal is the team's append-only event log.
type Journal interface {
	// Append records e (Team and TS are filled in when empty).
	Append(ctx context.Context, e Event) error
	// Read returns every event in order.
	Read(ctx context.Context) ([]Event, error)
	// Tail returns the last n events in order.
	Tail(ctx context.Context, n int) ([]Event, error)
	// ReadAfter returns, in order, the events appended after cursor c (the
	// zero Cursor: from the start), and the cursor after the last of them,
	// to pass on the next call. A cursor is a position in the journal, not
	// a client's state: it stays good across clients, processes and
	// reopens. An event being written while ReadAfter runs comes with a
	// later call. A cursor this journal never returned fails with
	// ErrInvalidCursor.
	ReadAfter(ctx context.Context, c Cursor) ([]Event, Cursor, error)
	// Watch returns a channel that receives a value (coalesced) after
	// events are appended, by this process or another. It is closed when
	// ctx ends.
	Watch(ctx context.Context) (<-chan struct{}, error)
}

// Cursor is an opaque position in a journal, made by the backend (a byte
// offset for the file store, a stream sequence for a log service). Callers
// keep it and hand it back; they never build or compare one. The zero
// value is the journal's start.
type Cursor string

// Member statuses stored in the roster. "dead" is never stored: it is
// derived from a stale HeartbeatAt.
const (
	StatusWorking  = "working"
	StatusIdle     = "idle"
	StatusShutdown = "shutdown"
)

// Roster is a team's config.json.
type Roster struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	CreatedAt   time.Time `json:"created_at"`
	Lead        string    `json:"lead"`
	Pattern     string    `json:"pattern"`
	// Theme is the persona theme the team plays ("": none); Personas are
	// the characters cast for it, each with the member playing it once one
	// does (seed 004's characters; internal names never change).
	Theme    string    `json:"theme,omitempty"`
	Personas []Persona `json:"personas,omitempty"`
	// Remote is the git remote teammates on other machines clone (a URL or
	// a path they can reach) and Base the branch they start from and the
	// lead merges into; both empty when the team has none.
	Remote  string   `json:"remote,omitempty"`
	Base    string   `json:"base,omitempty"`
	Members []Member `json:"members"`
}

// Persona is a character a member plays: a display name, a role and a
// voice. Member is "" until a member is given it.
type Persona struct {
	Name   string `json:"name"`
	Role   string `json:"role,omitempty"`
	Voice  string `json:"voice,omitempty"`
	Member string `json:"member,omitempty"`
}

// PersonaOf returns the persona member plays, if any.
func (r *Roster) PersonaOf(member string) (Persona, bool) {
	for _, p := range r.Personas {
		if p.Member != "" && p.Member == member {
			return p, true
		}
	}
	return Persona{}, false
}

// Member is one teammate on the roster.
type Member struct {
	Name     string `json:"name"`
	Role     string `json:"role"`
	Model    string `json:"model"`
	Provider string `json:"provider,omitempty"`
	// BudgetTokens and BudgetUSD are the member's own spending limits
	// (0: the settings' limits apply).
	BudgetTokens int64   `json:"budget_tokens,omitempty"`
	BudgetUSD    float64 `json:"budget_usd,omitempty"`
	// MCPServers are the MCP servers whose tools the member is given
	// (empty: all of its lead's).
	MCPServers       []string `json:"mcp_servers,omitempty"`
	AgentType        string   `json:"agent_type"`
	Status           string   `json:"status"`
	PlanModeRequired bool     `json:"plan_mode_required"`
	PermissionMode   string   `json:"permission_mode"`
	CWD              string   `json:"cwd"`
	Worktree         string   `json:"worktree"`
	// Branch is the git branch of the member's worktree, and MergeMode
	// how that branch is merged into the lead's (worktree isolation).
	Branch    string `json:"branch,omitempty"`
	MergeMode string `json:"merge_mode,omitempty"`
	// Placement is "remote" for a teammate that runs on another machine in
	// its own clone of the team's Remote (troupe agent --join): Worktree is
	// then that clone's path there, and its branch is pushed, not merged
	// where it runs.
	Placement string `json:"placement,omitempty"`
	// Key is the public key of an agent waiting in a pool, which the lead
	// seals the team's key to when it takes the agent.
	Key         string    `json:"key,omitempty"`
	PID         int       `json:"pid"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	JoinedAt    time.Time `json:"joined_at"`
}

// Member returns the member called name, if any.
func (r *Roster) Member(name string) (*Member, bool) {
	for i := range r.Members {
		if r.Members[i].Name == name {
			return &r.Members[i], true
		}
	}
	return nil, false
}

// Recipients returns every name a message may be addressed to: the lead
// first, then the members in roster order.
func (r *Roster) Recipients() []string {
	names := []string{LeadName}
	for _, m := range r.Members {
		if m.Name != LeadName && m.Status != StatusShutdown {
			names = append(names, m.Name)
		}
	}
	return names
}

// Names returns the lead's name and every member's, shut down or not:
// everyone who has an inbox.
func (r *Roster) Names() []string {
	names := []string{LeadName}
	for _, m := range r.Members {
		if m.Name != LeadName {
			names = append(names, m.Name)
		}
	}
	return names
}

// Task statuses.
const (
	TaskPending    = "pending"
	TaskInProgress = "in_progress"
	TaskCompleted  = "completed"
	TaskDeleted    = "deleted"
)

// Task is one entry of the shared board.
type Task struct {
	ID          string         `json:"id"`
	Subject     string         `json:"subject"`
	Description string         `json:"description"`
	ActiveForm  string         `json:"active_form"`
	Status      string         `json:"status"`
	Owner       string         `json:"owner"`
	BlockedBy   []string       `json:"blocked_by"`
	Blocks      []string       `json:"blocks"`
	Metadata    map[string]any `json:"metadata"`
	CreatedAt   time.Time      `json:"created_at"`
	UpdatedAt   time.Time      `json:"updated_at"`
}

// Claimable reports whether a claim on t would succeed, and why not.
func (t *Task) Claimable() error {
	switch {
	case t.Status != TaskPending:
		return ErrNotPending
	case t.Owner != "":
		return ErrClaimed
	case len(t.BlockedBy) > 0:
		return ErrBlocked
	}
	return nil
}

// Message types.
const (
	TypeMessage              = "message"
	TypeBroadcast            = "broadcast"
	TypeShutdownRequest      = "shutdown_request"
	TypeShutdownResponse     = "shutdown_response"
	TypePlanApprovalRequest  = "plan_approval_request"
	TypePlanApprovalResponse = "plan_approval_response"
	TypeIdleNotification     = "idle_notification"
	TypeTaskAssignment       = "task_assignment"
	TypePermissionRequest    = "permission_request"
	TypePermissionResponse   = "permission_response"
)

var messageTypes = map[string]bool{
	TypeMessage: true, TypeBroadcast: true, TypeShutdownRequest: true, TypeShutdownResponse: true,
	TypePlanApprovalRequest: true, TypePlanApprovalResponse: true, TypeIdleNotification: true,
	TypeTaskAssignment: true, TypePermissionRequest: true, TypePermissionResponse: true,
}

// Message is one line of an inbox.
type Message struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	From      string    `json:"from"`
	To        string    `json:"to"`
	Content   string    `json:"content"`
	Summary   string    `json:"summary,omitempty"`
	Timestamp time.Time `json:"timestamp"`
	RequestID string    `json:"request_id,omitempty"`
	Approve   *bool     `json:"approve,omitempty"`
	Feedback  string    `json:"feedback,omitempty"`
	TaskID    string    `json:"task_id,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Plan      string    `json:"plan,omitempty"`
	ToolName  string    `json:"tool_name,omitempty"`
	// ToolInput is the raw JSON input of a permission request.
	ToolInput json.RawMessage `json:"tool_input,omitempty"`
	// MAC authenticates the message as sent by one of the team's own
	// processes (see package store/seal); stores carry it unchanged.
	MAC string `json:"mac,omitempty"`
}

// Event is one line of the team journal: {ts, type, team, agent, ...fields}.
type Event struct {
	TS     time.Time
	Type   string
	Team   string
	Agent  string
	Fields map[string]any
}
