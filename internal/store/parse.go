package store

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"time"
)

// NewID returns a message id unique across processes: 8 bytes of the
// current time in nanoseconds then 8 random bytes, in hex, so ids sort by
// creation time.
func NewID(now time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixNano()))
	_, _ = rand.Read(b[8:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// ValidateMessage checks what every stored message must have.
func ValidateMessage(m *Message) error {
	switch {
	case m.ID == "":
		return fmt.Errorf("%w: no id", ErrInvalidMessage)
	case !messageTypes[m.Type]:
		return fmt.Errorf("%w: unknown type %q", ErrInvalidMessage, m.Type)
	case m.From == "":
		return fmt.Errorf("%w: no sender", ErrInvalidMessage)
	case m.To == "":
		return fmt.Errorf("%w: no recipient", ErrInvalidMessage)
	case m.Timestamp.IsZero():
		return fmt.Errorf("%w: no timestamp", ErrInvalidMessage)
	}
	return nil
}

// MarshalMessageLine encodes m as one inbox line, newline included.
func MarshalMessageLine(m *Message) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ParseMessageLine decodes one inbox line (with or without its newline) and
// validates it.
func ParseMessageLine(line []byte) (Message, error) {
	line = bytes.TrimSuffix(line, []byte("\n"))
	var m Message
	if err := json.Unmarshal(line, &m); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrInvalidMessage, err)
	}
	if err := ValidateMessage(&m); err != nil {
		return Message{}, err
	}
	return m, nil
}

// ValidTaskID reports whether id is a positive integer in canonical form.
func ValidTaskID(id string) bool {
	n, err := strconv.ParseUint(id, 10, 63)
	return err == nil && n > 0 && strconv.FormatUint(n, 10) == id
}

// TaskNum returns the numeric value of a valid task id (0 otherwise).
func TaskNum(id string) uint64 {
	n, _ := strconv.ParseUint(id, 10, 63)
	return n
}

var taskStatuses = map[string]bool{TaskPending: true, TaskInProgress: true, TaskCompleted: true, TaskDeleted: true}

// ValidateTask checks a task's id, status, subject and dependency ids.
func ValidateTask(t *Task) error {
	if !ValidTaskID(t.ID) {
		return fmt.Errorf("%w: id %q is not a positive integer", ErrInvalidTask, t.ID)
	}
	if !taskStatuses[t.Status] {
		return fmt.Errorf("%w %s: unknown status %q", ErrInvalidTask, t.ID, t.Status)
	}
	if t.Subject == "" {
		return fmt.Errorf("%w %s: empty subject", ErrInvalidTask, t.ID)
	}
	for _, d := range append(append([]string(nil), t.BlockedBy...), t.Blocks...) {
		if !ValidTaskID(d) {
			return fmt.Errorf("%w %s: dependency id %q is not a positive integer", ErrInvalidTask, t.ID, d)
		}
		if d == t.ID {
			return fmt.Errorf("%w: task %s depends on itself", ErrCycle, t.ID)
		}
	}
	return nil
}

// MarshalTask encodes a task file (indented, newline-terminated, so that cat
// and diff read it well). Nil lists and maps are written as [] and {}.
func MarshalTask(t *Task) ([]byte, error) {
	c := *t
	if c.BlockedBy == nil {
		c.BlockedBy = []string{}
	}
	if c.Blocks == nil {
		c.Blocks = []string{}
	}
	if c.Metadata == nil {
		c.Metadata = map[string]any{}
	}
	b, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ParseTask decodes and validates a task file.
func ParseTask(data []byte) (Task, error) {
	var t Task
	if err := json.Unmarshal(data, &t); err != nil {
		return Task{}, fmt.Errorf("%w: %v", ErrInvalidTask, err)
	}
	if err := ValidateTask(&t); err != nil {
		return Task{}, err
	}
	if t.BlockedBy == nil {
		t.BlockedBy = []string{}
	}
	if t.Blocks == nil {
		t.Blocks = []string{}
	}
	if t.Metadata == nil {
		t.Metadata = map[string]any{}
	}
	return t, nil
}

// MarshalJSON writes an event as one flat object: ts, type, team, agent,
// then the fields.
// Field returns field k of e as text: a string as it is, a number or a
// boolean printed, a missing field as "".
func (e Event) Field(k string) string {
	switch v := e.Fields[k].(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

func (e Event) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(e.Fields)+4)
	maps.Copy(m, e.Fields)
	m["ts"] = e.TS
	m["type"] = e.Type
	m["team"] = e.Team
	if e.Agent != "" {
		m["agent"] = e.Agent
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads the flat form written by MarshalJSON.
func (e *Event) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*e = Event{}
	str := func(k string, dst *string) error {
		if raw, ok := m[k]; ok {
			delete(m, k)
			return json.Unmarshal(raw, dst)
		}
		return nil
	}
	if raw, ok := m["ts"]; ok {
		delete(m, "ts")
		if err := json.Unmarshal(raw, &e.TS); err != nil {
			return err
		}
	}
	for k, dst := range map[string]*string{"type": &e.Type, "team": &e.Team, "agent": &e.Agent} {
		if err := str(k, dst); err != nil {
			return err
		}
	}
	if e.Type == "" {
		return fmt.Errorf("event without type")
	}
	if len(m) > 0 {
		e.Fields = make(map[string]any, len(m))
		for k, raw := range m {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				return err
			}
			e.Fields[k] = v
		}
	}
	return nil
}
