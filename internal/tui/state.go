package tui

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamview"
)

// entryKind is the kind of a line of the conversation.
type entryKind int

const (
	entryUser     entryKind = iota // the human to the lead
	entryToMember                  // the human to a member (@name)
	entryLead                      // the lead's text (markdown)
	entryTool                      // a tool the lead ran
	entryToolErr                   // a tool of the lead that failed
	entryFromTeam                  // a member's message to the lead, verbatim
	entryRequest                   // a request for the human
	entryNote                      // the UI's own remarks
	entryError                     // something failed
)

// entry is one item of the conversation as drawn.
type entry struct {
	kind entryKind
	who  string // sender or recipient
	text string
	// key names the entry for the markdown cache ("t" and the transcript
	// item's Seq, or "l" and the index of a local entry).
	key string
}

// local is one of the UI's own entries (its remarks, the human's messages
// to members, the end of the session): drawn after the lead's transcript
// item that was last when it was added.
type local struct {
	after int // teamview Seq at the time
	entry
}

// maxTimeline bounds the timeline shown.
const maxTimeline = 500

// timelineTypes are the journal types the team view's timeline shows.
var timelineTypes = []string{"team_create", "team_delete", "spawn", "status", "task_create", "complete", "claim", "send", "permission"}

// state is what the UI keeps of its own; the team is the teamview's.
type state struct {
	team     *teamview.View
	locals   []local
	finished *FinishedMsg
}

func newState(demo bool) state {
	return state{team: teamview.New(teamview.Options{Driverless: demo})}
}

// add puts an entry of the UI's own in the conversation.
func (s *state) add(e entry) {
	e.key = fmt.Sprintf("l%d", len(s.locals))
	s.locals = append(s.locals, local{after: s.team.Seq(), entry: e})
}

func (s *state) note(format string, args ...any) {
	s.add(entry{kind: entryNote, text: fmt.Sprintf(format, args...)})
}

// lead is the lead's roster row.
func (s *state) lead() teamview.Member {
	m, _ := s.team.Member(store.LeadName)
	return m
}

// busy reports whether the lead is in a turn.
func (s *state) busy() bool { return s.lead().InTurn }

// requests are the requests waiting for the human, first shown.
func (s *state) requests() []teamview.Pending { return s.team.Pending(true) }

// entries is the conversation: the lead's transcript with the UI's own
// entries in their places.
func (s *state) entries() []entry {
	items := s.team.Transcript(store.LeadName)
	out := make([]entry, 0, len(items)+len(s.locals))
	l := 0
	for _, it := range items {
		for l < len(s.locals) && s.locals[l].after < it.Seq {
			out = append(out, s.locals[l].entry)
			l++
		}
		out = append(out, itemEntry(it))
	}
	for ; l < len(s.locals); l++ {
		out = append(out, s.locals[l].entry)
	}
	return out
}

var itemKinds = map[teamview.ItemKind]entryKind{
	teamview.ItemHuman:     entryUser,
	teamview.ItemText:      entryLead,
	teamview.ItemTool:      entryTool,
	teamview.ItemToolError: entryToolErr,
	teamview.ItemMessage:   entryFromTeam,
	teamview.ItemRequest:   entryRequest,
	teamview.ItemError:     entryError,
}

func itemEntry(it teamview.Item) entry {
	return entry{kind: itemKinds[it.Kind], who: it.Who, text: it.Text, key: fmt.Sprintf("t%d", it.Seq)}
}

// timeline is what the team view's timeline shows, the last maxTimeline.
func (s *state) timeline() []teamview.Entry {
	tl := s.team.Timeline(teamview.Filter{Types: timelineTypes})
	if len(tl) > maxTimeline {
		tl = tl[len(tl)-maxTimeline:]
	}
	return tl
}

// setBusy marks the lead in a turn or not, as the driver says.
func (s *state) setBusy(busy bool, now time.Time) {
	if busy {
		s.team.Apply(now, teamview.TurnStart{})
	} else {
		s.team.Apply(now, teamview.TurnEnd{})
	}
}

// toolLine summarises a tool call in a few words.
func toolLine(name string, input json.RawMessage) string { return teamview.ToolLine(name, input) }
