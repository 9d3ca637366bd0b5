package cassette

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"sort"
	"strconv"
	"sync"

	"github.com/troupe-dev/troupe/internal/llm"
)

// Replayer is an llm.Provider that answers from a cassette. It is safe for
// concurrent use.
type Replayer struct {
	c *Cassette

	mu        sync.Mutex
	next      map[string]int // agent -> calls served
	div       *Divergence
	onDiverge func(error)
}

// OnDivergence sets a function called once, with the first divergence, as
// soon as it is found (a replay stops there rather than run on).
func (r *Replayer) OnDivergence(f func(error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onDiverge = f
}

var _ llm.Provider = (*Replayer)(nil)

// NewReplayer returns a Replayer over c.
func NewReplayer(c *Cassette) *Replayer {
	return &Replayer{c: c, next: map[string]int{}}
}

// Name implements llm.Provider: the recorded provider's name, so that code
// which asks behaves as it did in the recording.
func (r *Replayer) Name() string {
	if r.c.Header.Provider == "" {
		return "replay"
	}
	return r.c.Header.Provider
}

// Divergence returns the first divergence met so far, or nil.
func (r *Replayer) Divergence() *Divergence {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.div
}

// Unused returns, for each agent with calls left, how many recorded calls
// were not replayed.
func (r *Replayer) Unused() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for agent, es := range r.c.byAgent {
		if left := len(es) - r.next[agent]; left > 0 {
			out[agent] = left
		}
	}
	return out
}

// Stream implements llm.Provider: the agent's next recorded call, if the
// request is the recorded one, else a *Divergence.
func (r *Replayer) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(llm.Event{}, err)
			return
		}
		e, err := r.take(req)
		if err != nil {
			if errors.As(err, new(*Divergence)) {
				r.mu.Lock()
				f := r.onDiverge
				r.onDiverge = nil
				r.mu.Unlock()
				if f != nil {
					f(err)
				}
			}
			yield(llm.Event{}, err)
			return
		}
		if e.Response == nil {
			yield(llm.Event{}, &RecordedError{Message: e.Error, kind: kindError(e.ErrorKind)})
			return
		}
		resp := copyResponse(e.Response)
		for _, b := range resp.Message.Content {
			var ev llm.Event
			switch b.Type {
			case llm.BlockText:
				ev = llm.Event{Type: llm.EventText, Text: b.Text}
			case llm.BlockThinking:
				ev = llm.Event{Type: llm.EventThinking, Text: b.Thinking}
			case llm.BlockToolUse:
				ev = llm.Event{Type: llm.EventToolStart, Name: b.Name, ID: b.ID}
			default:
				continue
			}
			if !yield(ev, nil) {
				return
			}
		}
		yield(llm.Event{Type: llm.EventDone, Response: resp}, nil)
	}
}

// take claims the agent's next entry and checks req against it.
func (r *Replayer) take(req *llm.Request) (*Entry, error) {
	got, err := json.Marshal(requestOf(req))
	if err != nil {
		return nil, fmt.Errorf("replay: encode request: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	es := r.c.byAgent[req.Agent]
	i := r.next[req.Agent]
	r.next[req.Agent]++
	if i >= len(es) {
		return nil, r.diverged(&Divergence{Agent: req.Agent, Seq: i + 1,
			Want: fmt.Sprintf("not in the recording, which has %d calls for this agent", len(es)),
			Got:  fmt.Sprintf("a request with %d messages", len(req.Messages))})
	}
	e := es[i]
	want, err := json.Marshal(e.Request)
	if err != nil {
		return nil, fmt.Errorf("replay: encode recorded request: %w", err)
	}
	if !bytes.Equal(want, got) {
		if d := diff(want, got); d != nil {
			d.Agent, d.Seq = req.Agent, e.Seq
			return nil, r.diverged(d)
		}
	}
	return e, nil
}

func (r *Replayer) diverged(d *Divergence) error {
	if r.div == nil {
		r.div = d
	}
	return d
}

func kindError(name string) error {
	for _, k := range errorKinds {
		if k.name == name {
			return k.err
		}
	}
	return nil
}

// copyResponse deep-copies a recorded response so a caller that changes
// what it got cannot change the cassette.
func copyResponse(r *Response) *llm.Response {
	var m llm.Message
	data, _ := llm.Marshal(r.Message)
	_ = json.Unmarshal(data, &m)
	return &llm.Response{ID: r.ID, Model: r.Model, Message: m, StopReason: r.StopReason, Usage: r.Usage}
}

// topOrder is the order the request's fields are compared in, so the
// reported difference is the first a reader of the request would meet.
var topOrder = []string{"model", "system", "messages", "tools", "max_tokens"}

// diff finds the first difference between two encoded requests, comparing
// their JSON values (so spacing and key order in tool inputs do not count).
func diff(want, got []byte) *Divergence {
	var w, g map[string]any
	if decode(want, &w) != nil || decode(got, &g) != nil {
		a, b := shorten(string(want), string(got), 80)
		return &Divergence{Path: "request", Want: a, Got: b}
	}
	for _, k := range topOrder {
		if p, a, b, ok := firstDiff(k, w[k], g[k]); ok {
			a, b = shorten(a, b, 80)
			return &Divergence{Path: p, Want: a, Got: b}
		}
	}
	return nil
}

func decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(v)
}

// firstDiff walks a and b together and returns the path of their first
// difference with both values as JSON; objects are walked in key order.
func firstDiff(path string, a, b any) (string, string, string, bool) {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := make([]string, 0, len(av)+len(bv))
		for k := range av {
			keys = append(keys, k)
		}
		for k := range bv {
			if _, dup := av[k]; !dup {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			x, inA := av[k]
			y, inB := bv[k]
			switch {
			case !inA:
				return path + "." + k, "(absent)", show(y), true
			case !inB:
				return path + "." + k, show(x), "(absent)", true
			}
			if p, s, t, ok := firstDiff(path+"."+k, x, y); ok {
				return p, s, t, true
			}
		}
		return "", "", "", false
	case []any:
		bv, ok := b.([]any)
		if !ok {
			break
		}
		for i := range min(len(av), len(bv)) {
			if p, s, t, ok := firstDiff(path+"["+strconv.Itoa(i)+"]", av[i], bv[i]); ok {
				return p, s, t, true
			}
		}
		switch {
		case len(av) > len(bv):
			return fmt.Sprintf("%s[%d]", path, len(bv)), show(av[len(bv)]), "(absent)", true
		case len(bv) > len(av):
			return fmt.Sprintf("%s[%d]", path, len(av)), "(absent)", show(bv[len(av)]), true
		}
		return "", "", "", false
	}
	if s, t := show(a), show(b); s != t {
		return path, s, t, true
	}
	return "", "", "", false
}

// show is v as JSON, with <, > and & left as they are for the reader.
func show(v any) string {
	data, err := llm.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}
