package store

import (
	"context"
	"fmt"
	"time"
)

// Presence is what a store shared by several machines can say of one
// inbox's reader: where it runs and how far behind its reading is.
type Presence struct {
	Member string `json:"member"`
	// Host and PID are the machine and process that last opened the
	// member's inbox (empty: never opened).
	Host string    `json:"host,omitempty"`
	PID  int       `json:"pid,omitempty"`
	At   time.Time `json:"at,omitzero"`
	// Lag is how many messages of the inbox are not acked yet: not
	// delivered, or delivered and not acked.
	Lag uint64 `json:"lag"`
}

// PresenceReporter is an optional interface of a Team whose members may
// run on several machines (the nats store); the file store has none.
type PresenceReporter interface {
	// Presence returns one entry per member that has an inbox, in
	// roster order.
	Presence(ctx context.Context) ([]Presence, error)
}

// Where is host:pid of the reader ("" when the inbox was never opened).
func (p Presence) Where() string {
	if p.Host == "" {
		return ""
	}
	return fmt.Sprintf("%s:%d", p.Host, p.PID)
}
