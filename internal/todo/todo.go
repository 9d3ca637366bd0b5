// Package todo holds an agent's personal checklist: the list the model keeps
// with the TodoWrite tool to plan and track multi-step work, and the rule
// that reminds it of the list when it has gone stale.
//
// The list is shared by the tool (which replaces it) and the agent loop
// (which asks for reminders), so it is safe for concurrent use. It must never
// depend on agents, tools, teams or the store.
package todo

import (
	"fmt"
	"strings"
	"sync"
)

// ToolName is the name of the tool that writes the list; AfterRound looks
// for it among the tools called in a round.
const ToolName = "TodoWrite"

// MaxItems caps the list: a checklist longer than this is a plan that
// belongs on the shared task board, or steps too small to track.
const MaxItems = 20

// StaleRounds is how many consecutive rounds of tool use without a TodoWrite
// call make an open list stale.
const StaleRounds = 3

// Status is where an item stands.
type Status string

const (
	Pending    Status = "pending"
	InProgress Status = "in_progress"
	Completed  Status = "completed"
)

// Item is one entry of the list.
type Item struct {
	// Content says what is to be done, imperatively ("Run the tests").
	Content string `json:"content"`
	Status  Status `json:"status"`
	// ActiveForm says it while it is being done ("Running the tests");
	// when empty, Content is shown instead.
	ActiveForm string `json:"activeForm,omitempty"`
}

// List is a checklist. The zero value is an empty list ready to use.
type List struct {
	mu    sync.Mutex
	items []Item
	idle  int // rounds since the last TodoWrite call
}

// Replace checks items and, if they are valid, makes them the whole list.
// Content and ActiveForm are trimmed. At most MaxItems items, each with
// content and a known status, and at most one in progress; otherwise the
// list is left as it was and the error says what to fix, in words meant for
// the model.
func (l *List) Replace(items []Item) error {
	if len(items) > MaxItems {
		return fmt.Errorf("%w: the list holds at most %d items and got %d; merge small steps or drop finished ones", ErrTooMany, MaxItems, len(items))
	}
	clean := make([]Item, len(items))
	var doing []string
	for i, it := range items {
		it.Content = strings.TrimSpace(it.Content)
		it.ActiveForm = strings.TrimSpace(it.ActiveForm)
		if it.Content == "" {
			return fmt.Errorf("%w: item %d has no content", ErrEmptyContent, i+1)
		}
		switch it.Status {
		case Pending, Completed:
		case InProgress:
			doing = append(doing, fmt.Sprintf("%d (%q)", i+1, it.Content))
		default:
			return fmt.Errorf("%w: item %d (%q) has status %q; use pending, in_progress or completed", ErrBadStatus, i+1, it.Content, it.Status)
		}
		clean[i] = it
	}
	if len(doing) > 1 {
		return fmt.Errorf("%w: only one item may be in_progress at a time, but items %s are; keep the one you are working on and set the others to pending or completed", ErrManyInProgress, joinAnd(doing))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = clean
	l.idle = 0
	return nil
}

// Items returns a copy of the list.
func (l *List) Items() []Item {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Item(nil), l.items...)
}

// Open reports whether any item is not completed.
func (l *List) Open() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return open(l.items)
}

// Render returns the list one item per line: "[x] content" when completed,
// "[>] activeForm" in progress, "[ ] content" pending. It is "" for an empty
// list.
func (l *List) Render() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return render(l.items)
}

// AfterRound is called by the agent loop once per round of tool use, with
// the names of the tools called in that round (in any order, repeats
// allowed). When the list has open items and StaleRounds consecutive rounds
// have passed without a TodoWrite call, it returns a reminder and starts
// counting again; otherwise it returns "".
//
// The loop appends a non-empty reminder as a text block after the tool
// results of that round, in the same user message, never as an assistant
// turn: it is the runtime speaking, not the model.
func (l *List) AfterRound(toolNames []string) (reminder string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range toolNames {
		if n == ToolName {
			l.idle = 0
			return ""
		}
	}
	l.idle++
	if l.idle < StaleRounds || !open(l.items) {
		return ""
	}
	l.idle = 0
	return fmt.Sprintf("<reminder>Your todo list has open items and has not been updated for %d rounds:\n%s\nIf you have made progress, update it with %s now (mark finished items completed, set the one you are working on to in_progress); if it no longer fits the work, rewrite it. Do not mention this reminder to the user.</reminder>",
		StaleRounds, render(l.items), ToolName)
}

func open(items []Item) bool {
	for _, it := range items {
		if it.Status != Completed {
			return true
		}
	}
	return false
}

func render(items []Item) string {
	var b strings.Builder
	for i, it := range items {
		if i > 0 {
			b.WriteByte('\n')
		}
		switch it.Status {
		case Completed:
			b.WriteString("[x] " + oneLine(it.Content))
		case InProgress:
			text := it.ActiveForm
			if text == "" {
				text = it.Content
			}
			b.WriteString("[>] " + oneLine(text))
		default:
			b.WriteString("[ ] " + oneLine(it.Content))
		}
	}
	return b.String()
}

// oneLine keeps an item on its line whatever the model put in it.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

func joinAnd(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}
