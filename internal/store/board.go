package store

import (
	"fmt"
	"slices"
	"strings"
)

// Corrupt is a piece of state the store holds but cannot read: a task file
// or a roster that does not parse, or breaks the rules. It is reported,
// never dropped, so that a person can see it and fix it.
type Corrupt struct {
	// ID is what the state belongs to: a task's id, or a team's name.
	ID string `json:"id"`
	// Path is where the state lives, when it is a file.
	Path string `json:"path,omitempty"`
	// Err says what is wrong with it.
	Err string `json:"error"`
}

func (c Corrupt) String() string {
	if c.Path != "" {
		return fmt.Sprintf("%s (%s): %s", c.ID, c.Path, c.Err)
	}
	return fmt.Sprintf("%s: %s", c.ID, c.Err)
}

// Board is a task board as one snapshot: every task that is not deleted, in
// numeric id order, and the tasks that exist but cannot be read. A corrupt
// task is unfinished work whose state nobody knows, so a team with one is
// never done.
type Board struct {
	Tasks   []Task    `json:"tasks"`
	Corrupt []Corrupt `json:"corrupt,omitempty"`
}

// TeamList is every team of a store: the rosters that read, sorted by name,
// and the teams whose roster cannot be read.
type TeamList struct {
	Rosters []Roster  `json:"rosters"`
	Corrupt []Corrupt `json:"corrupt,omitempty"`
}

// Line is a task in one line, as the team tools and `troupe mcp serve`
// show it: "#3 [pending] Subject (owner: x) (role: y) (blocked by: #1, #2)".
func (t Task) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%s [%s] %s", t.ID, t.Status, t.Subject)
	if t.Owner != "" {
		fmt.Fprintf(&b, " (owner: %s)", t.Owner)
	}
	if r, _ := t.Metadata["role"].(string); r != "" {
		fmt.Fprintf(&b, " (role: %s)", r)
	}
	if len(t.BlockedBy) > 0 {
		fmt.Fprintf(&b, " (blocked by: #%s)", strings.Join(t.BlockedBy, ", #"))
	}
	return b.String()
}

// AddTaskIDs returns have with the ids of add not in it yet, in order; an
// id may be written "#3" or " 3 ", as models write them.
func AddTaskIDs(have, add []string) []string {
	for _, a := range add {
		a = strings.TrimPrefix(strings.TrimSpace(a), "#")
		if a != "" && !slices.Contains(have, a) {
			have = append(have, a)
		}
	}
	return have
}

// TaskEdit is what a TaskUpdate call changes in a task: the fields set
// (Owner when not nil, the others when not empty) and the dependencies to
// add. The team tools and troupe mcp serve apply it alike.
type TaskEdit struct {
	Status, Subject, Description, ActiveForm string
	Owner                                    *string
	AddBlocks, AddBlockedBy                  []string
}

// Apply writes e into t.
func (e TaskEdit) Apply(t *Task) {
	if e.Status != "" {
		t.Status = e.Status
	}
	if e.Owner != nil {
		t.Owner = *e.Owner
	}
	if e.Subject != "" {
		t.Subject = e.Subject
	}
	if e.Description != "" {
		t.Description = e.Description
	}
	if e.ActiveForm != "" {
		t.ActiveForm = e.ActiveForm
	}
	t.Blocks = AddTaskIDs(t.Blocks, e.AddBlocks)
	t.BlockedBy = AddTaskIDs(t.BlockedBy, e.AddBlockedBy)
}
