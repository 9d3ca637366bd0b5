// Package cassette records every model call of a run to a file and replays
// a run from it, with no network and deterministically, reporting the first
// request that differs from the recording when the code has changed.
//
// A cassette is JSON Lines: a [Header], then one [Entry] per completed call
// of any agent, written whole under a lock as each call ends. Replay serves
// each agent its own calls in its own order, so how the agents' calls
// interleaved does not matter. A paced run (package pace) adds its schedule
// as {"step": …} lines, in the order the agents took their turns; replay
// gives them to the pacer so the agents take their turns in that order
// again.
//
// A cassette never holds credentials: llm.Request carries none, and the
// recorder sees nothing else. It must never depend on agents, tools or teams.
package cassette

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/replay/pace"
)

// Version is the cassette format this package writes and reads.
const Version = 1

// Header is the first line of a cassette.
type Header struct {
	Version   int       `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	// Provider is the name of the recorded provider ("anthropic", "openai").
	Provider string `json:"provider"`
	// Args is the troupe command line that re-runs the recorded run
	// (without --record), filled by the caller.
	Args []string `json:"args,omitempty"`
	// Meta holds whatever else the caller wants kept (team, version…).
	Meta map[string]string `json:"meta,omitempty"`
}

// Request is what a cassette keeps of an llm.Request: everything sent to
// the model, nothing else.
type Request struct {
	Model     string         `json:"model"`
	System    string         `json:"system"`
	Messages  []llm.Message  `json:"messages"`
	Tools     []llm.ToolSpec `json:"tools"`
	MaxTokens int            `json:"max_tokens"`
	// SystemTail and CacheTTL are sent too (llm.Request); empty in
	// recordings made before they existed.
	SystemTail string       `json:"system_tail,omitempty"`
	CacheTTL   llm.CacheTTL `json:"cache_ttl,omitempty"`
}

// Response is what a cassette keeps of an llm.Response.
type Response struct {
	ID         string         `json:"id"`
	Model      string         `json:"model"`
	Message    llm.Message    `json:"message"`
	StopReason llm.StopReason `json:"stop_reason"`
	Usage      llm.Usage      `json:"usage"`
}

// Entry is one completed call: its response or its error.
type Entry struct {
	Agent    string    `json:"agent"`
	Seq      int       `json:"seq"` // 1-based, per agent
	Request  Request   `json:"request"`
	Response *Response `json:"response,omitempty"`
	Error    string    `json:"error,omitempty"`
	// ErrorKind names the llm sentinel the error matched ("unavailable",
	// "auth", "invalid_request", "no_response", "missing_key",
	// "canceled", "deadline"), so a replayed error tests the same.
	ErrorKind string `json:"error_kind,omitempty"`
}

// Cassette is a loaded recording.
type Cassette struct {
	Header Header
	// Entries are in file order (the order calls ended).
	Entries []Entry
	// Steps are the schedule of a paced run, in order; empty for a run
	// that was not paced.
	Steps   []pace.Step
	byAgent map[string][]*Entry // each agent's entries in seq order
}

// Agents returns each recorded agent's number of calls.
func (c *Cassette) Agents() map[string]int {
	out := make(map[string]int, len(c.byAgent))
	for a, es := range c.byAgent {
		out[a] = len(es)
	}
	return out
}

// Usage sums the usage of every recorded response.
func (c *Cassette) Usage() llm.Usage {
	var u llm.Usage
	for _, e := range c.Entries {
		if e.Response != nil {
			u.Add(e.Response.Usage)
		}
	}
	return u
}

// Load reads a cassette. Errors name the line they are about.
func Load(r io.Reader) (*Cassette, error) {
	br := bufio.NewReader(r)
	c := &Cassette{byAgent: map[string][]*Entry{}}
	n, sawHeader := 0, false
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			n++
			if perr := c.parseLine(n, line, !sawHeader, err != nil); perr != nil {
				return nil, perr
			}
			if len(bytes.TrimSpace(line)) > 0 {
				sawHeader = true
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read cassette: line %d: %w", n+1, err)
		}
	}
	if !sawHeader {
		return nil, errors.New("read cassette: empty (no header line)")
	}
	seen := map[string]map[int]int{} // agent -> seq -> line, for the messages below
	for i := range c.Entries {
		e := &c.Entries[i]
		if seen[e.Agent] == nil {
			seen[e.Agent] = map[int]int{}
		}
		seen[e.Agent][e.Seq] = i
		c.byAgent[e.Agent] = append(c.byAgent[e.Agent], e)
	}
	for agent, es := range c.byAgent {
		sort.SliceStable(es, func(a, b int) bool { return es[a].Seq < es[b].Seq })
		for i, e := range es {
			if e.Seq != i+1 {
				if i > 0 && es[i-1].Seq == e.Seq {
					return nil, fmt.Errorf("read cassette: agent %q: call %d recorded twice", agent, e.Seq)
				}
				return nil, fmt.Errorf("read cassette: agent %q: call %d missing (the recording has calls up to %d)", agent, i+1, es[len(es)-1].Seq)
			}
		}
	}
	return c, nil
}

func (c *Cassette) parseLine(n int, line []byte, header, last bool) error {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	if header {
		var h Header
		if err := json.Unmarshal(line, &h); err != nil {
			return fmt.Errorf("read cassette: line %d: header: %v", n, err)
		}
		if h.Version == 0 {
			return fmt.Errorf("read cassette: line %d: not a cassette header (no version)", n)
		}
		if h.Version != Version {
			return fmt.Errorf("read cassette: line %d: version %d, this troupe reads version %d", n, h.Version, Version)
		}
		c.Header = h
		return nil
	}
	var step struct {
		Step *pace.Step `json:"step"`
	}
	if json.Unmarshal(line, &step) == nil && step.Step != nil {
		if step.Step.Agent == "" || step.Step.Kind == "" {
			return fmt.Errorf("read cassette: line %d: step without agent or kind", n)
		}
		c.Steps = append(c.Steps, *step.Step)
		return nil
	}
	var e Entry
	if err := json.Unmarshal(line, &e); err != nil {
		if last {
			return fmt.Errorf("read cassette: line %d: torn last entry (the run stopped mid-write?): %v", n, err)
		}
		return fmt.Errorf("read cassette: line %d: %v", n, err)
	}
	switch {
	case e.Seq < 1:
		return fmt.Errorf("read cassette: line %d: seq must be 1 or more, got %d", n, e.Seq)
	case e.Response == nil && e.Error == "":
		return fmt.Errorf("read cassette: line %d: entry has neither a response nor an error", n)
	case e.Response != nil && e.Error != "":
		return fmt.Errorf("read cassette: line %d: entry has both a response and an error", n)
	}
	c.Entries = append(c.Entries, e)
	return nil
}

// requestOf is the recorded form of req; nil lists become empty ones so
// that a request and its recording compare equal.
func requestOf(req *llm.Request) Request {
	r := Request{Model: req.Model, System: req.System, Messages: req.Messages, Tools: req.Tools, MaxTokens: req.MaxTokens,
		SystemTail: req.SystemTail, CacheTTL: req.CacheTTL}
	if r.Messages == nil {
		r.Messages = []llm.Message{}
	}
	if r.Tools == nil {
		r.Tools = []llm.ToolSpec{}
	}
	return r
}

func responseOf(resp *llm.Response) *Response {
	return &Response{ID: resp.ID, Model: resp.Model, Message: resp.Message, StopReason: resp.StopReason, Usage: resp.Usage}
}

var errorKinds = []struct {
	name string
	err  error
}{
	{"unavailable", llm.ErrUnavailable},
	{"auth", llm.ErrAuth},
	{"invalid_request", llm.ErrInvalidRequest},
	{"no_response", llm.ErrNoResponse},
	{"missing_key", llm.ErrMissingKey},
	{"canceled", errCanceled},
	{"deadline", errDeadline},
}
