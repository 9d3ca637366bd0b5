// Package teamevent is the team's event stream as types: one Go type per
// journal line the team writes, with Encode and Decode between those types
// and the store's untyped store.Event (type string + fields), which stays the
// on-disk format (.troupe/teams/<team>/journal.jsonl, readable with jq).
//
// Producers (the team wing) build a typed event and journal it; consumers
// (the terminal UI, teamview, a web dashboard, usage, replay) decode and
// switch on the type. Nobody reads a field by its string name or asserts the
// Go type of a map value, so an in-process event and one read back from disk
// decode the same.
//
// It imports only store and text: it must never depend on agents, tools or
// the UI.
package teamevent

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/text"
)

// Event is one typed team event. Type is the journal line's type.
type Event interface {
	Type() string
}

// Envelope is a decoded journal line: who wrote it, when, and what.
type Envelope struct {
	TS    time.Time
	Team  string
	Agent string
	Event Event
}

// Unknown is a journal line of a type this build does not know (written by a
// newer troupe, or by hand). Its fields are kept as read.
type Unknown struct {
	Kind   string
	Fields map[string]any
}

// Type implements Event.
func (u Unknown) Type() string { return u.Kind }

// TeamCreate: the lead created the team.
type TeamCreate struct {
	Description string `json:"description"`
	Pattern     string `json:"pattern"`
	// Theme and Lead are the persona theme the team plays and the lead's
	// character in it (seed 004), when it plays one.
	Theme     string `json:"theme,omitempty"`
	Lead      string `json:"lead_character,omitempty"`
	SessionID string `json:"session_id,omitempty"`
}

// TeamDelete: the team was dissolved.
type TeamDelete struct {
	Members []string `json:"members"`
	Forced  bool     `json:"forced"`
}

// Spawn: a teammate joined.
type Spawn struct {
	Member           string `json:"member"`
	Role             string `json:"role"`
	Model            string `json:"model"`
	PlanModeRequired bool   `json:"plan_mode_required"`
	PermissionMode   string `json:"permission_mode"`
	// Mode is how it runs: in-process or process.
	Mode string `json:"mode"`
}

// Status: a member's roster status changed (working, idle, shutdown).
type Status struct {
	Member string `json:"member"`
	Status string `json:"status"`
	Why    string `json:"why,omitempty"`
}

// Stopped: a member's loop ended without a shutdown (crash, interrupt).
type Stopped struct {
	Member string `json:"member"`
	Why    string `json:"why,omitempty"`
}

// Dead: a member's heartbeat went stale and its tasks were freed.
type Dead struct {
	Member      string    `json:"member"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	FreedTasks  []string  `json:"freed_tasks"`
}

// Restart: a teammate process died without a shutdown and was started
// again. Exit is how the old one ended; Restarts counts the restarts so far.
type Restart struct {
	Member   string `json:"member"`
	Exit     string `json:"exit"`
	Restarts int    `json:"restarts"`
}

// Budget: a member reached a spending limit.
type Budget struct {
	Member  string `json:"member"`
	Reached string `json:"reached"`
}

// IdleTimeout: a member exited after idling too long.
type IdleTimeout struct {
	Member string `json:"member"`
	After  string `json:"after"`
}

// HookTeammateIdle: a TeammateIdle hook sent an idle member back to work.
type HookTeammateIdle struct {
	Member string `json:"member"`
	Reason string `json:"reason"`
}

// Send: a message was appended to an inbox. Content is cut to one line.
type Send struct {
	ID        string `json:"id"`
	MsgType   string `json:"msg_type"`
	From      string `json:"from"`
	To        string `json:"to"`
	RequestID string `json:"request_id,omitempty"`
	Approve   *bool  `json:"approve,omitempty"`
	Summary   string `json:"summary,omitempty"`
	Feedback  string `json:"feedback,omitempty"`
	Content   string `json:"content,omitempty"`
}

// Sent is the journal line of message m, sent: its content cut to one
// line, so the journal says what was said without holding it twice.
func Sent(m store.Message) Send {
	return Send{ID: m.ID, MsgType: m.Type, From: m.From, To: m.To, RequestID: m.RequestID, Approve: m.Approve,
		Summary: m.Summary, Feedback: m.Feedback, Content: text.OneLine(m.Content, 200)}
}

// Deliver: messages were handed to a member's model. At is "idle" (they
// woke it) or "tool_boundary" (they arrived mid-turn).
type Deliver struct {
	Member string   `json:"member"`
	IDs    []string `json:"ids"`
	At     string   `json:"at"`
}

// Protocol kinds.
const (
	ProtocolShutdown     = "shutdown"
	ProtocolPermission   = "permission_request"
	ProtocolPlanRequest  = "plan_approval_request"
	ProtocolPlanResponse = "plan_approval_response"
	// ProtocolPermissionResponse is the lead's (or the human's) answer to
	// a permission request.
	ProtocolPermissionResponse = "permission_response"
)

// Protocol: a step of a request/answer protocol. Approve is nil for a
// request, set for an answer.
type Protocol struct {
	Kind      string `json:"kind"`
	RequestID string `json:"request_id"`
	Member    string `json:"member"`
	Approve   *bool  `json:"approve,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Tool      string `json:"tool,omitempty"`
}

// Permission: the answer a teammate's runtime applied to its permission
// request (or the timeout that refused it).
type Permission struct {
	RequestID string `json:"request_id"`
	Member    string `json:"member"`
	Tool      string `json:"tool"`
	Approve   bool   `json:"approve"`
	Why       string `json:"why,omitempty"`
}

// PermissionCheck: the permission engine decided a call by a rule (plain
// mode defaults are not journaled).
type PermissionCheck struct {
	Member  string `json:"member"`
	Tool    string `json:"tool"`
	Effect  string `json:"effect"`
	Rule    string `json:"rule"`
	Source  string `json:"source"`
	Reason  string `json:"reason"`
	Allowed bool   `json:"allowed"`
	// ToolUseID and Input (kept only for a refused call) make the run's
	// permission_denials.
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

// TaskCreate: a task was added to the board.
type TaskCreate struct {
	Task      string   `json:"task"`
	Subject   string   `json:"subject"`
	BlockedBy []string `json:"blocked_by,omitempty"`
}

// TaskChange is what TaskUpdate and TaskComplete carry.
type TaskChange struct {
	Task         string   `json:"task"`
	Status       string   `json:"status"`
	Owner        string   `json:"owner"`
	AddBlockedBy []string `json:"add_blocked_by,omitempty"`
	AddBlocks    []string `json:"add_blocks,omitempty"`
}

// TaskUpdate: a task was changed by a tool call.
type TaskUpdate struct{ TaskChange }

// TaskComplete: a task was marked completed.
type TaskComplete struct{ TaskChange }

// Claim: a member claimed a task by itself.
type Claim struct {
	Task    string `json:"task"`
	Owner   string `json:"owner"`
	Subject string `json:"subject"`
}

// HandBack: a member gave an unfinished task back to the board.
type HandBack struct {
	Member string `json:"member"`
	Task   string `json:"task"`
}

// Resume: the team was resumed after its process ended.
type Resume struct {
	Restarted        []string `json:"restarted"`
	RunningElsewhere []string `json:"running_elsewhere"`
	PendingRequests  int      `json:"pending_requests"`
}

// Forgery: a message not sealed by the team's runtime was refused.
type Forgery struct {
	Inbox       string `json:"inbox"`
	ClaimedFrom string `json:"claimed_from"`
	MsgType     string `json:"msg_type"`
	ID          string `json:"id"`
	Why         string `json:"why"`
	RequestID   string `json:"request_id,omitempty"`
	Content     string `json:"content,omitempty"`
}

// KeyCreated: a team key was made for a team that had none.
type KeyCreated struct {
	Why string `json:"why"`
}

// Usage kinds: coordination is the lead's and the team tools' share; work
// is the teammates' turns on tasks.
const (
	UsageCoordination = "coordination"
	UsageWork         = "work"
)

// Usage: one model call's tokens.
type Usage struct {
	AgentName        string `json:"agent_name"`
	InputTokens      int64  `json:"input_tokens"`
	OutputTokens     int64  `json:"output_tokens"`
	CacheReadTokens  int64  `json:"cache_read_input_tokens"`
	CacheWriteTokens int64  `json:"cache_creation_input_tokens"`
	Model            string `json:"model"`
	Kind             string `json:"kind"`
	Task             string `json:"task,omitempty"`
	// CacheWrite1hTokens is the part of CacheWriteTokens written with the
	// 1-hour lifetime (priced higher).
	CacheWrite1hTokens int64 `json:"cache_creation_1h_input_tokens,omitempty"`
	// CacheTTL is the lifetime the call asked for its breakpoints ("" for
	// the default 5 minutes, "1h" when the runtime chose the hour for an
	// agent about to idle).
	CacheTTL string `json:"cache_ttl,omitempty"`
}

// CacheChoice: the runtime chose the prompt cache lifetime of a
// teammate's calls, because it expects the teammate to idle (or no longer
// does). ExpectedSavedUSD is what the choice saves over the default
// lifetime if the idle outlasts it, for the context the teammate carries.
type CacheChoice struct {
	Member           string  `json:"member"`
	TTL              string  `json:"ttl"` // "1h", or "5m" back to the default
	Why              string  `json:"why"`
	Tokens           int64   `json:"tokens"` // the context the choice is for
	ExpectedSavedUSD float64 `json:"expected_saved_usd"`
}

// Coordination: the lead's coordination took more than the set share of
// the team's tokens over the last Window calls, and the lead was told to
// batch its messages and let the board drive the work.
type Coordination struct {
	Window             int     `json:"window"` // calls counted
	CoordinationTokens int64   `json:"coordination_tokens"`
	TeamTokens         int64   `json:"team_tokens"`
	Share              float64 `json:"share"`
	MaxShare           float64 `json:"max_share"`
}

// Tool: a teammate ran a tool that changes the workspace (write_file,
// edit_file, bash: Path or Command says what), or a tool of any kind
// failed (Error). Journaled so that a teammate in its own process is seen
// doing it as one in the lead's process is.
type Tool struct {
	Tool    string `json:"tool"`
	Path    string `json:"path,omitempty"`
	Command string `json:"command,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Merge: the lead's merge queue merged a completed task's branch into
// the base (Status "merged", How "fast-forward" or "merge commit"), found
// it conflicting (Files; the task went back to Owner), or failed (Error).
type Merge struct {
	Task   string   `json:"task"`
	Owner  string   `json:"owner"`
	Branch string   `json:"branch"`
	Into   string   `json:"into"`
	Status string   `json:"status"`
	How    string   `json:"how,omitempty"`
	Commit string   `json:"commit,omitempty"`
	Files  []string `json:"files,omitempty"`
	Error  string   `json:"error,omitempty"`
}

// Type implementations: the journal's type strings, fixed forever (old
// journals must keep decoding).
func (TeamCreate) Type() string       { return "team_create" }
func (TeamDelete) Type() string       { return "team_delete" }
func (Spawn) Type() string            { return "spawn" }
func (Status) Type() string           { return "status" }
func (Stopped) Type() string          { return "stopped" }
func (Dead) Type() string             { return "dead" }
func (Restart) Type() string          { return "restart" }
func (Budget) Type() string           { return "budget" }
func (IdleTimeout) Type() string      { return "idle_timeout" }
func (HookTeammateIdle) Type() string { return "hook_teammate_idle" }
func (Send) Type() string             { return "send" }
func (Deliver) Type() string          { return "deliver" }
func (Protocol) Type() string         { return "protocol" }
func (Permission) Type() string       { return "permission" }
func (PermissionCheck) Type() string  { return "permission_check" }
func (TaskCreate) Type() string       { return "task_create" }
func (TaskUpdate) Type() string       { return "task_update" }
func (TaskComplete) Type() string     { return "complete" }
func (Claim) Type() string            { return "claim" }
func (HandBack) Type() string         { return "hand_back" }
func (Resume) Type() string           { return "resume" }
func (Forgery) Type() string          { return "forgery" }
func (KeyCreated) Type() string       { return "key_created" }
func (Usage) Type() string            { return "usage" }
func (CacheChoice) Type() string      { return "cache_choice" }
func (Coordination) Type() string     { return "coordination" }
func (Tool) Type() string             { return "tool" }
func (Merge) Type() string            { return "merge" }

// known makes an empty value of each type, by journal type.
var known = map[string]func() Event{}

func register(mk ...func() Event) {
	for _, f := range mk {
		known[f().Type()] = f
	}
}

func init() {
	register(
		func() Event { return &TeamCreate{} }, func() Event { return &TeamDelete{} },
		func() Event { return &Spawn{} }, func() Event { return &Status{} },
		func() Event { return &Stopped{} }, func() Event { return &Dead{} },
		func() Event { return &Budget{} }, func() Event { return &IdleTimeout{} },
		func() Event { return &Restart{} },
		func() Event { return &HookTeammateIdle{} }, func() Event { return &Send{} },
		func() Event { return &Deliver{} }, func() Event { return &Protocol{} },
		func() Event { return &Permission{} }, func() Event { return &PermissionCheck{} },
		func() Event { return &TaskCreate{} }, func() Event { return &TaskUpdate{} },
		func() Event { return &TaskComplete{} }, func() Event { return &Claim{} },
		func() Event { return &HandBack{} }, func() Event { return &Resume{} },
		func() Event { return &Forgery{} }, func() Event { return &KeyCreated{} },
		func() Event { return &Usage{} },
		func() Event { return &CacheChoice{} }, func() Event { return &Coordination{} },
		func() Event { return &Tool{} }, func() Event { return &Merge{} },
	)
}

// Types returns every journal type this build knows, for tests and docs.
func Types() []string {
	out := make([]string, 0, len(known))
	for k := range known {
		out = append(out, k)
	}
	return out
}

// Encode turns e into a store event (TS and Team are left for the journal
// to fill in). The fields are e's JSON form, so what a consumer decodes in
// the same process is what it would decode from disk.
func Encode(agent string, e Event) (store.Event, error) {
	if u, ok := e.(Unknown); ok {
		return store.Event{Type: u.Kind, Agent: agent, Fields: u.Fields}, nil
	}
	b, err := json.Marshal(e)
	if err != nil {
		return store.Event{}, fmt.Errorf("teamevent: encode %s: %w", e.Type(), err)
	}
	var f map[string]any
	if err := json.Unmarshal(b, &f); err != nil {
		return store.Event{}, fmt.Errorf("teamevent: encode %s: %w", e.Type(), err)
	}
	return store.Event{Type: e.Type(), Agent: agent, Fields: f}, nil
}

// Decode turns a store event into its typed form. A type this build does
// not know decodes to Unknown; fields of the wrong shape are an error that
// names the type and the field problem (the caller skips the line).
func Decode(e store.Event) (Envelope, error) {
	env := Envelope{TS: e.TS, Team: e.Team, Agent: e.Agent}
	mk, ok := known[e.Type]
	if !ok {
		env.Event = Unknown{Kind: e.Type, Fields: e.Fields}
		return env, nil
	}
	v := mk()
	if len(e.Fields) > 0 {
		b, err := json.Marshal(e.Fields)
		if err != nil {
			return env, fmt.Errorf("teamevent: %s: %w", e.Type, err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			return env, fmt.Errorf("teamevent: %s: %w", e.Type, err)
		}
	}
	env.Event = deref(v)
	return env, nil
}

// deref returns the value behind the pointer made for decoding, so that
// consumers switch on value types (case teamevent.Spawn:).
func deref(v Event) Event {
	return reflect.ValueOf(v).Elem().Interface().(Event)
}
