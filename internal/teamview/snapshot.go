package teamview

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// Member is one row of the roster.
type Member struct {
	Name, Role, Model string
	// Status is working, idle, waiting, shutdown, dead, stopped or
	// starting.
	Status string
	// Mode is how a teammate runs (in-process, process); Worktree is its
	// own checkout, if any; Host is host:pid of the process reading its
	// inbox, on a store shared by several machines.
	Mode, Worktree, Host string
	// Tool is the tool running now, if any.
	Tool string
	// Doing is what the member does now, for a status line (thinking,
	// writing, ⚙ tool, retrying), since DoingSince.
	Doing      string
	DoingSince time.Time
	// InTurn: the lead is in a turn (since TurnSince).
	InTurn    bool
	TurnSince time.Time
	// Task and Subject are the task it owns and has in progress, if any.
	Task, Subject string
	Tokens        int64
	CostUSD       float64
	// InputTokens are all its input tokens (plain, cache reads, cache
	// writes) and CacheReadTokens those read from the prompt cache: the
	// hit ratio beside its tokens (see CacheHitRatio).
	InputTokens, CacheReadTokens int64
}

// CacheHitRatio is the share of the member's input tokens read from the
// prompt cache (0 before its first call).
func (m Member) CacheHitRatio() float64 {
	if m.InputTokens == 0 {
		return 0
	}
	return float64(m.CacheReadTokens) / float64(m.InputTokens)
}

// ItemKind is the kind of a transcript item.
type ItemKind int

// Transcript item kinds.
const (
	ItemHuman     ItemKind = iota // the human's words to the member
	ItemText                      // the member's model's text (markdown)
	ItemTool                      // a tool call (Tool, Input)
	ItemToolError                 // a tool call that failed
	ItemMessage                   // a message delivered to the member, verbatim (Who: sender)
	ItemRequest                   // a request put to the human (lead only; Who: asker)
	ItemError                     // something failed or needs review
)

// Item is one item of a member's transcript. Seq orders items across the
// whole view and never changes; Text of the last item may still grow while
// it is streamed.
type Item struct {
	Seq   int
	At    time.Time
	Kind  ItemKind
	Who   string
	Text  string
	Tool  string
	Input json.RawMessage
	// Message is the delivered message's id, if it had one.
	Message string
}

// Entry is one line of the timeline. Type is the journal type it came
// from; Members are the members it concerns (who did it first).
type Entry struct {
	Seq     int
	At      time.Time
	Who     string
	Type    string
	Text    string
	Members []string
}

// Filter selects timeline entries; zero fields select everything.
type Filter struct {
	Member string   // entries concerning this member
	Types  []string // entries of these journal types
}

// Match reports whether e passes f.
func (f Filter) Match(e Entry) bool {
	if f.Member != "" && !slices.Contains(e.Members, f.Member) {
		return false
	}
	return len(f.Types) == 0 || slices.Contains(f.Types, e.Type)
}

// Board is the task board.
type Board struct {
	Tasks   []store.Task // every task, in id order
	Corrupt []store.Corrupt
}

// Column returns the tasks of one status, in id order.
func (b Board) Column(status string) []store.Task {
	var out []store.Task
	for _, t := range b.Tasks {
		if t.Status == status {
			out = append(out, t)
		}
	}
	return out
}

// UsagePoint is one model call: its tokens and cost, and the member's
// totals after it.
type UsagePoint struct {
	At           time.Time
	Member       string
	Kind         string // coordination or work
	Task         string
	Tokens       int64
	CostUSD      float64
	TotalTokens  int64
	TotalCostUSD float64
}

// Pending is a request awaiting an answer.
type Pending struct {
	ID   string
	Kind string // teamevent.ProtocolPermission, ProtocolPlanRequest, …
	From string
	Tool string
	// Since is when it was asked.
	Since time.Time
	// Human: it was put to the human (Message is what was sent); the
	// others await the lead.
	Human   bool
	Message store.Message
}

// Counts are team-wide figures.
type Counts struct {
	Done, Total                  int
	Working, Idle, Waiting, Gone int
	Tokens                       int64
	CostUSD                      float64
}

// Team is the team's name, "" before there is one.
func (v *View) Team() string { return v.team }

// State is the driver's last word on the team ("done", "stalled: …").
func (v *View) State() string { return v.state }

// Roster returns the members in order of arrival, the lead first.
func (v *View) Roster() []Member {
	out := make([]Member, 0, len(v.order))
	for _, name := range v.order {
		out = append(out, v.row(name))
	}
	return out
}

// Member returns one member's row.
func (v *View) Member(name string) (Member, bool) {
	if _, ok := v.members[name]; !ok {
		return Member{}, false
	}
	return v.row(name), true
}

func (v *View) row(name string) Member {
	r := v.members[name].row
	if t := v.currentTask(name); t != nil {
		r.Task, r.Subject = t.ID, t.Subject
	}
	return r
}

// currentTask is the task member owns and has in progress (the lowest id).
func (v *View) currentTask(name string) *store.Task {
	var best *store.Task
	for _, t := range v.tasks {
		if t.Owner == name && t.Status == store.TaskInProgress {
			if best == nil || store.TaskNum(t.ID) < store.TaskNum(best.ID) {
				best = t
			}
		}
	}
	return best
}

// Board returns the board.
func (v *View) Board() Board {
	b := Board{Tasks: make([]store.Task, 0, len(v.tasks)), Corrupt: append([]store.Corrupt(nil), v.corrupt...)}
	for _, t := range v.tasks {
		b.Tasks = append(b.Tasks, cloneTask(*t))
	}
	sortTasks(b.Tasks)
	return b
}

// Timeline returns the entries f selects, oldest first.
func (v *View) Timeline(f Filter) []Entry {
	var out []Entry
	for _, e := range v.timeline {
		if f.Match(e) {
			e.Members = slices.Clone(e.Members)
			out = append(out, e)
		}
	}
	return out
}

// Transcript returns a member's transcript. The lead's is the human's
// conversation: what the human told it, its text and tool calls, what the
// team told it, and the requests put to the human.
func (v *View) Transcript(name string) []Item {
	m, ok := v.members[name]
	if !ok {
		return nil
	}
	return slices.Clone(m.items)
}

// Seq is the sequence number of the last item or entry added.
func (v *View) Seq() int { return v.seq }

// Usage returns the model calls of a member ("" for everyone), oldest
// first.
func (v *View) Usage(member string) []UsagePoint {
	var out []UsagePoint
	for _, p := range v.usage {
		if member == "" || p.Member == member {
			out = append(out, p)
		}
	}
	return out
}

// Pending returns the requests awaiting an answer, oldest first; human
// selects those put to the human only.
func (v *View) Pending(human bool) []Pending {
	var out []Pending
	for _, p := range v.pending {
		if !human || p.Human {
			out = append(out, p)
		}
	}
	return out
}

// Counts returns the team-wide figures.
func (v *View) Counts() Counts {
	var c Counts
	for _, t := range v.tasks {
		c.Total++
		if t.Status == store.TaskCompleted {
			c.Done++
		}
	}
	for _, name := range v.order {
		r := v.members[name].row
		c.Tokens += r.Tokens
		c.CostUSD += r.CostUSD
		switch r.Status {
		case store.StatusWorking, StatusStarting:
			c.Working++
		case store.StatusIdle:
			c.Idle++
		case StatusWaiting:
			c.Waiting++
		default:
			c.Gone++
		}
	}
	return c
}

// Load builds the view of a team from its store: the journal replayed,
// then the roster and the board as they stand. running names the
// teammates known to be up (nil: unknown, so nobody is shown dead for
// that alone). A journal line that does not decode is skipped.
func Load(ctx context.Context, t store.Team, running map[string]bool, opts Options) (*View, error) {
	v := New(opts)
	events, err := t.Journal().Read(ctx)
	if err != nil {
		return nil, fmt.Errorf("teamview: read journal of %s: %w", t.Name(), err)
	}
	for _, e := range events {
		env, err := teamevent.Decode(e)
		if err != nil {
			continue
		}
		v.Apply(env.TS, env)
	}
	r, err := t.ReadRoster(ctx)
	if err != nil {
		return nil, fmt.Errorf("teamview: read roster of %s: %w", t.Name(), err)
	}
	b, err := t.Tasks().Board(ctx)
	if err != nil {
		return nil, fmt.Errorf("teamview: read board of %s: %w", t.Name(), err)
	}
	v.Apply(time.Time{}, Snapshot{Roster: &r, Tasks: b.Tasks, Corrupt: b.Corrupt, Running: running, Presence: Presence(ctx, t)})
	return v, nil
}

// Presence is where team t's members read their inboxes, when its store
// can say (nil otherwise, or when asking fails: it is shown, not relied on).
func Presence(ctx context.Context, t store.Team) []store.Presence {
	pr, ok := t.(store.PresenceReporter)
	if !ok {
		return nil
	}
	ps, err := pr.Presence(ctx)
	if err != nil {
		return nil
	}
	return ps
}
