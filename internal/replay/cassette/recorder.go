package cassette

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/replay/pace"
)

// Recorder is an llm.Provider that passes every call to another and writes
// it to a cassette when it ends. It is safe for concurrent use.
type Recorder struct {
	inner llm.Provider

	mu  sync.Mutex // guards w, seq and err; one line is one Write under it
	w   io.Writer
	seq map[string]int
	err error
}

var _ llm.Provider = (*Recorder)(nil)

// NewRecorder returns a Recorder that writes header at once to w, then one
// line per call of inner. A zero header.Version, CreatedAt or Provider is
// filled in (Provider with inner's name).
func NewRecorder(inner llm.Provider, w io.Writer, header Header) *Recorder {
	if header.Version == 0 {
		header.Version = Version
	}
	if header.CreatedAt.IsZero() {
		header.CreatedAt = time.Now().UTC()
	}
	if header.Provider == "" {
		header.Provider = inner.Name()
	}
	r := &Recorder{inner: inner, w: w, seq: map[string]int{}}
	r.writeLine(header)
	return r
}

// Name implements llm.Provider: the recorded provider's name.
func (r *Recorder) Name() string { return r.inner.Name() }

// Err returns the first error writing the cassette, if any. Recording
// never fails a model call; the caller checks Err at the end of the run.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Stream implements llm.Provider. The call's number is taken when it
// starts, so an agent's calls keep its order whatever the others do.
func (r *Recorder) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		r.mu.Lock()
		r.seq[req.Agent]++
		e := Entry{Agent: req.Agent, Seq: r.seq[req.Agent], Request: requestOf(req)}
		r.mu.Unlock()
		// The request is encoded now: the caller may change its slices
		// once the call is over.
		reqJSON, err := json.Marshal(e.Request)
		if err != nil {
			r.fail(err)
		}
		done := false
		defer func() {
			if !done {
				e.Error = "call abandoned by the caller before it ended"
			}
			r.writeEntry(e, reqJSON)
		}()
		for ev, err := range r.inner.Stream(ctx, req) {
			if err != nil {
				done = true
				e.Error, e.ErrorKind = err.Error(), kindOf(err)
				yield(ev, err)
				return
			}
			if ev.Type == llm.EventDone && ev.Response != nil {
				done = true
				e.Response = responseOf(ev.Response)
			}
			if !yield(ev, nil) {
				return
			}
		}
		if !done {
			done = true
			e.Error, e.ErrorKind = llm.ErrNoResponse.Error(), "no_response"
		}
	}
}

// Step writes one step of a paced run's schedule. Steps keep the order of
// the calls to Step.
func (r *Recorder) Step(s pace.Step) {
	r.writeLine(struct {
		Step pace.Step `json:"step"`
	}{s})
}

func kindOf(err error) string {
	for _, k := range errorKinds {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	return ""
}

// writeEntry writes e with its request as encoded at the start of the call.
func (r *Recorder) writeEntry(e Entry, reqJSON json.RawMessage) {
	type line struct {
		Agent     string          `json:"agent"`
		Seq       int             `json:"seq"`
		Request   json.RawMessage `json:"request"`
		Response  *Response       `json:"response,omitempty"`
		Error     string          `json:"error,omitempty"`
		ErrorKind string          `json:"error_kind,omitempty"`
	}
	if reqJSON == nil {
		return // could not be encoded; r.err says why
	}
	r.writeLine(line{e.Agent, e.Seq, reqJSON, e.Response, e.Error, e.ErrorKind})
}

func (r *Recorder) writeLine(v any) {
	data, err := llm.Marshal(v)
	if err != nil {
		r.fail(err)
		return
	}
	data = append(data, '\n')
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return // a cassette with a hole would replay wrong
	}
	if _, err := r.w.Write(data); err != nil {
		r.err = err
	}
}

func (r *Recorder) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
	}
}
