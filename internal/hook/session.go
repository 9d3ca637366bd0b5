package hook

import (
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"time"
)

// A hook's session_id names one agent session and stays the same when the
// session is resumed, so that hooks keeping state per session (a log, a
// counter, "already warned") carry on across a resume:
//
//   - a teammate's is derived from its team's name, its own name and the
//     team's created_at: the same after any resume, and different for a
//     new team of the same name;
//   - the lead's is made at random when its session starts, before any team
//     exists; it is kept in the team's journal when the lead creates a team
//     (the team_create event's session_id), and a resume of the team takes
//     it back from there (a team whose journal has none gets the derived
//     one, as a teammate would).

// SessionID is the session id derived for member of the team created at
// created: a UUID-shaped hash, stable across resumes.
func SessionID(team, member string, created time.Time) string {
	sum := sha256.Sum256([]byte("troupe-session\x00" + team + "\x00" + member + "\x00" + created.UTC().Format(time.RFC3339Nano)))
	return uuid(sum[:16])
}

// NewSessionID returns a random session id (a version 4 UUID).
func NewSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return uuid(b[:])
}

// uuid formats 16 bytes as a UUID of version 4 and RFC 4122 variant, the
// shape Claude Code's session ids have.
func uuid(b []byte) string {
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
