package store

import "fmt"

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
