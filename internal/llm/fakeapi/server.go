package fakeapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/fakescript"
)

// Options tunes a [Server].
type Options struct {
	// Latency is waited before the first byte of every answer to
	// POST /v1/messages, on top of a rule's own latency.
	Latency time.Duration
	// Logf, if set, receives one line per POST /v1/messages.
	Logf func(format string, args ...any)
	// IDPrefix goes before the call number in message and tool_use ids
	// (msg_fake_<prefix><call>), so that a second server answering the same
	// conversation (a resumed run) never repeats an id of the first.
	IDPrefix string
	// DeltaBytes, if set, cuts streamed text and thinking into deltas of at
	// most this many bytes, as a real stream of a long reply comes (tests
	// and benchmarks of long replies); by default a block streams in about
	// fifty deltas.
	DeltaBytes int

	// NoPromptCache turns the prompt cache simulation off: every call is
	// billed as plain input, cache fields 0 (what a server without
	// caching, or a request without cache_control, costs).
	NoPromptCache bool
	// Clock is the server's clock for the prompt cache's lifetimes
	// (default time.Now): a seam for tests.
	Clock func() time.Time
	// CacheClockScale speeds the cache's clock up: at 60, a real second
	// is a simulated minute, so a 5-minute lifetime ends after 5 seconds.
	// 0 means 1.
	CacheClockScale float64
	// NoRecords keeps no record of the calls: Requests returns none. A
	// server that runs for long (troupe fake-api) would otherwise hold
	// every request body it was sent.
	NoRecords bool
}

// Recorded is one POST /v1/messages as the server saw it.
type Recorded struct {
	N      int    // 1-based call number
	Agent  string // agent name found in the system prompt ("" if none)
	Body   []byte // the raw request body
	Model  string // the model the request named ("" if none)
	Stream bool   // the request asked for a stream
	// Status is the HTTP status sent: 0 while the call is in flight or when
	// the connection was dropped, 499 when the client went away (or the
	// server closed) before the answer.
	Status int
	Rule   int    // index of the rule that answered, -1 for none (fallback, error, fault)
	Fault  string // the kind of fault injected, "" for none
	// Usage is what the answer reported (zero for a refused call).
	Usage Usage
	// Cache is what each cache breakpoint of the call did (nil with the
	// simulation off or for a refused call).
	Cache []CachePoint
}

// Usage is the usage an answer reported, as the API's usage object has it.
type Usage struct {
	InputTokens              int
	OutputTokens             int
	CacheReadInputTokens     int
	CacheCreationInputTokens int // 5-minute and 1-hour writes together
	Ephemeral5mInputTokens   int
	Ephemeral1hInputTokens   int
}

// Server is the fake API. It is an [http.Handler]; [Server.Start] also
// serves it on a listener of its own.
type Server struct {
	script *Script
	opt    Options

	ctx    context.Context // cancelled by Close: stops latency waits
	cancel context.CancelFunc

	mu        sync.Mutex
	calls     int
	others    int // requests to other endpoints, for their request ids
	used      []int
	faults    map[int]Fault
	recs      []Recorded
	unmatched int
	onArrive  func(n int)    // test seam: called when call n is counted
	onRecord  func(Recorded) // test seam: called when a call is finished

	serving fakescript.Serving

	cache  promptCache
	clock  simClock
	memo   memo
	recent recentSplits
}

// New returns a server that answers by script s.
func New(s *Script, opt Options) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	srv := &Server{
		script: s,
		opt:    opt,
		ctx:    ctx,
		cancel: cancel,
		used:   make([]int, len(s.rules)),
		faults: make(map[int]Fault, len(s.faults)),
	}
	for n, f := range s.faults {
		srv.faults[n] = f
	}
	srv.clock = simClock{now: opt.Clock, scale: opt.CacheClockScale}
	if srv.clock.now == nil {
		srv.clock.now = time.Now
	}
	if srv.clock.scale <= 0 {
		srv.clock.scale = 1
	}
	srv.clock.start = srv.clock.now()
	return srv
}

// CacheEntries lists the live entries of the simulated prompt cache, the
// longest prefix first: what each holds, how often it was written and
// read, and by which agents.
func (s *Server) CacheEntries() []CacheEntry {
	return s.cache.snapshot(s.clock.at())
}

// Start listens on addr (such as "127.0.0.1:0") and serves in a goroutine
// that [Server.Close] stops. It returns the base URL, http://host:port.
func (s *Server) Start(addr string) (string, error) {
	return s.serving.Start("fakeapi", s, addr, "")
}

// URL returns the base URL given by Start, or "" before it.
func (s *Server) URL() string { return s.serving.URL() }

// Close stops serving, breaks open connections, cancels latency waits and
// waits for every goroutine of the server to end. Later requests given to
// ServeHTTP get 503.
func (s *Server) Close() error { return s.serving.Close(s.cancel) }

// Requests returns every POST /v1/messages so far, in call order.
func (s *Server) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Recorded, len(s.recs))
	copy(out, s.recs)
	return out
}

// Unmatched returns how many calls the fallback answered.
func (s *Server) Unmatched() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unmatched
}

// InjectFault makes call number call (1-based) fail with f, replacing any
// fault the script set there. It panics on an unknown kind.
func (s *Server) InjectFault(call int, f Fault) {
	f.Call = call
	if err := checkFault(f); err != nil {
		panic("fakeapi: InjectFault: " + err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[call] = f
}

// ServeHTTP answers POST /v1/messages; any other request gets 404.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.serving.Enter() {
		writeError(w, http.StatusServiceUnavailable, "api_error", "fakeapi: server is closed", "req_fake_closed", nil)
		return
	}
	defer s.serving.Leave()

	if r.Method != http.MethodPost || strings.TrimSuffix(r.URL.Path, "/") != "/v1/messages" {
		s.mu.Lock()
		s.others++
		id := fmt.Sprintf("req_fake_other_%d", s.others)
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "not_found_error", fmt.Sprintf("Not found: %s %s", r.Method, r.URL.Path), id, nil)
		return
	}
	s.messages(w, r)
}

// call is one POST /v1/messages in progress.
type call struct {
	rec   Recorded
	start time.Time
	id    string // request id
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.calls++
	c := &call{rec: Recorded{N: s.calls, Rule: -1}, start: time.Now()}
	if !s.opt.NoRecords {
		s.recs = append(s.recs, c.rec)
	}
	fault, faulted := s.faults[c.rec.N]
	arrive := s.onArrive
	s.mu.Unlock()
	if arrive != nil {
		arrive(c.rec.N)
	}
	c.id = fmt.Sprintf("req_fake_%d", c.rec.N)
	defer s.finish(c)

	body, err := readBody(w, r)
	c.rec.Body = body
	if err != nil {
		s.fail(w, c, http.StatusBadRequest, "invalid_request_error", "could not read request body: "+err.Error())
		return
	}
	// The body is decoded once, through the memo where it can be: what
	// the recording shows even for a request that is then refused is read
	// from the same value that is validated below.
	p, raw, decodeErr := s.read(body)
	if obj, ok := raw.(map[string]any); ok {
		c.rec.Stream, _ = obj["stream"].(bool)
		c.rec.Model, _ = obj["model"].(string)
		if p != nil && p.sys != nil {
			c.rec.Agent = p.sys.agent
		} else {
			c.rec.Agent = s.agentIn(obj["system"])
		}
	}

	if !hasKey(r.Header) {
		s.fail(w, c, http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
		return
	}
	if r.Header.Get("anthropic-version") == "" {
		s.fail(w, c, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
		return
	}
	if faulted && fault.Kind != FaultCut {
		s.fault(w, r, c, fault)
		return
	}
	req, err := validateDecoded(raw, decodeErr, p)
	if err != nil {
		s.fail(w, c, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}

	cut := faulted && fault.Kind == FaultCut
	ruleIndex, rl, vs := s.choose(req, c.rec.N, c.rec.Agent, !cut)
	if !cut {
		c.rec.Rule = ruleIndex
	}
	model := s.script.model
	if model == "" {
		model = req.model
	}
	msg, err := buildMessage(rl, vs, model, s.opt.IDPrefix, c.rec.N, len(body))
	if err != nil {
		s.fail(w, c, http.StatusInternalServerError, "api_error", "fakeapi: "+err.Error())
		return
	}
	if !s.opt.NoPromptCache {
		// The cache is kept for the model the request named, whatever
		// the script's model says the answer came from.
		var prev *chain
		if p != nil && p.from != nil {
			prev = p.from.chain.Load()
		}
		cu, next := s.cache.use(req.model, c.rec.Agent, req.blocks, msg.Usage.InputTokens, s.clock.at(), prev)
		if p != nil && p.split != nil && next != nil {
			p.split.chain.Store(next)
		}
		c.rec.Cache = cu.Points
		if !rl.usage.set() { // a script's own figures win
			msg.Usage.InputTokens = cu.Input
			msg.Usage.CacheReadInputTokens = cu.Read
			msg.Usage.CacheCreationInputTokens = cu.Write5m + cu.Write1h
			msg.Usage.CacheCreation = &wireCacheCreation{Ephemeral5m: cu.Write5m, Ephemeral1h: cu.Write1h}
		}
	}
	c.rec.Usage = msg.Usage.recorded()
	if !s.wait(r, c, rl.latency) {
		return
	}
	if cut {
		c.rec.Fault = string(FaultCut)
	}
	w.Header().Set("request-id", c.id)
	if req.stream {
		s.stream(w, c, msg, cut)
		return
	}
	data, err := llm.Marshal(msg)
	if err != nil {
		s.fail(w, c, http.StatusInternalServerError, "api_error", "fakeapi: "+err.Error())
		return
	}
	c.rec.Status = http.StatusOK
	s.store(c)
	if cut {
		s.cutPlain(w, c, data)
		return
	}
	w.Header().Set("content-type", "application/json")
	w.Header().Set("content-length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

// choose picks the answering rule: the first, in file order, that is not
// exhausted and whose conditions hold, else the fallback (index -1). With
// consume it counts the answer; the choice and the count are one atomic step.
func (s *Server) choose(req *request, n int, agent string, consume bool) (int, *rule, vars) {
	vs := vars{Agent: agent, Call: n}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.script.rules {
		rl := &s.script.rules[i]
		groups, ok := rl.Match(agent, req.lastUser, s.used[i])
		if !ok {
			continue
		}
		if consume {
			s.used[i]++
		}
		vs.Groups = groups
		return i, rl, vs
	}
	if consume {
		s.unmatched++
	}
	return -1, &s.script.fallback, vs
}

// agentIn finds the agent's name in a request's system prompt. The blocks
// are searched last first: the identity line comes after the prefix that
// agents of one role share (and that may quote anything).
func (s *Server) agentIn(system any) string {
	if blocks, ok := system.([]any); ok {
		for i := len(blocks) - 1; i >= 0; i-- {
			b, _ := blocks[i].(map[string]any)
			text, _ := b["text"].(string)
			if name := fakescript.AgentOf(s.script.agentRE, text); name != "" {
				return name
			}
		}
		return ""
	}
	sys, _ := system.(string)
	return fakescript.AgentOf(s.script.agentRE, sys)
}

// maxBody is the largest request body the server reads.
const maxBody = 64 << 20

// readBody reads a request's body, in one buffer of its declared length
// when it has one.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	rd := http.MaxBytesReader(w, r.Body, maxBody)
	if n := r.ContentLength; n > 0 && n <= maxBody {
		body := make([]byte, n)
		if _, err := io.ReadFull(rd, body); err != nil {
			return nil, err
		}
		return body, nil
	}
	return io.ReadAll(rd)
}

func hasKey(h http.Header) bool {
	if h.Get("x-api-key") != "" {
		return true
	}
	token, ok := strings.CutPrefix(h.Get("authorization"), "Bearer ")
	return ok && strings.TrimSpace(token) != ""
}

// wait sleeps the latency of the call, and reports false, recording 499,
// if the client or the server gave up first.
func (s *Server) wait(r *http.Request, c *call, extra time.Duration) bool {
	d := s.opt.Latency + extra
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
	case <-s.ctx.Done():
	}
	c.rec.Status = 499
	return false
}

// fail answers an error in the API's shape.
func (s *Server) fail(w http.ResponseWriter, c *call, status int, typ, msg string) {
	s.failWith(w, c, status, typ, msg, nil)
}

func (s *Server) failWith(w http.ResponseWriter, c *call, status int, typ, msg string, hdr map[string]string) {
	c.rec.Status = status
	s.store(c)
	writeError(w, status, typ, msg, c.id, hdr)
}

func writeError(w http.ResponseWriter, status int, typ, msg, id string, hdr map[string]string) {
	var e wireError
	e.Type = "error"
	e.Error.Type = typ
	e.Error.Message = msg
	e.RequestID = id
	data, _ := llm.Marshal(e)
	h := w.Header()
	for k, v := range hdr {
		h.Set(k, v)
	}
	h.Set("content-type", "application/json")
	h.Set("content-length", strconv.Itoa(len(data)))
	h.Set("request-id", id)
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// fault answers call c with an injected failure other than cut.
func (s *Server) fault(w http.ResponseWriter, r *http.Request, c *call, f Fault) {
	if !s.wait(r, c, 0) {
		return
	}
	c.rec.Fault = string(f.Kind)
	msg := f.Message
	switch f.Kind {
	case FaultDrop:
		s.store(c)
		s.hangUp(w)
	case FaultRateLimit:
		if msg == "" {
			msg = "fakeapi: injected rate limit"
		}
		after := f.RetryAfter
		if after == 0 {
			after = 1
		}
		s.failWith(w, c, http.StatusTooManyRequests, "rate_limit_error", msg,
			map[string]string{"retry-after": strconv.FormatFloat(after, 'f', -1, 64)})
	case FaultOverloaded:
		if msg == "" {
			msg = "Overloaded"
		}
		s.fail(w, c, 529, "overloaded_error", msg)
	case FaultServerError:
		if msg == "" {
			msg = "fakeapi: injected internal server error"
		}
		s.fail(w, c, http.StatusInternalServerError, "api_error", msg)
	}
}

// stream answers with server-sent events; a cut stream ends with a broken
// connection.
func (s *Server) stream(w http.ResponseWriter, c *call, msg wireMessage, cut bool) {
	h := w.Header()
	h.Set("content-type", "text/event-stream; charset=utf-8")
	h.Set("cache-control", "no-cache")
	c.rec.Status = http.StatusOK
	s.store(c)
	w.WriteHeader(http.StatusOK)
	out := &sse{w: w, deltaBytes: s.opt.DeltaBytes}
	complete := out.stream(msg, cut)
	// What was written goes out now: before the call's record is logged,
	// and before a hang-up (Hijack drops what the response buffers).
	_ = http.NewResponseController(w).Flush()
	if !complete {
		s.hangUp(w)
	}
}

// cutPlain sends a JSON reply whose body stops halfway, then hangs up.
func (s *Server) cutPlain(w http.ResponseWriter, c *call, data []byte) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	defer conn.Close()
	var head bytes.Buffer
	fmt.Fprintf(&head, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\nrequest-id: %s\r\n\r\n", len(data), c.id)
	_, _ = buf.Write(head.Bytes())
	_, _ = buf.Write(data[:len(data)/2])
	_ = buf.Flush()
}

// hangUp closes the connection under the response at once, whatever was
// sent so far.
func (s *Server) hangUp(w http.ResponseWriter) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable (HTTP/2): the server aborts the stream instead.
		panic(http.ErrAbortHandler)
	}
	_ = buf.Flush()
	_ = conn.Close()
}

// store makes the call's record what Requests shows. It runs before the
// last byte of an answer leaves, so a client that has its answer finds the
// call recorded.
func (s *Server) store(c *call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keep(c)
}

// keep makes c's record the one Requests shows. Under s.mu.
func (s *Server) keep(c *call) {
	if !s.opt.NoRecords {
		s.recs[c.rec.N-1] = c.rec
	}
}

// finish stores the call's final record, logs it and tells the test seam.
func (s *Server) finish(c *call) {
	s.mu.Lock()
	s.keep(c)
	hook := s.onRecord
	s.mu.Unlock()
	if s.opt.Logf != nil {
		rule := "-"
		if c.rec.Rule >= 0 {
			rule = strconv.Itoa(c.rec.Rule)
		}
		u := c.rec.Usage
		s.opt.Logf("fakeapi: call %d agent=%q stream=%t rule=%s status=%d fault=%q in %s input=%d cache_read=%d cache_write=%d",
			c.rec.N, c.rec.Agent, c.rec.Stream, rule, c.rec.Status, c.rec.Fault, time.Since(c.start).Round(time.Microsecond),
			u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens)
	}
	if hook != nil {
		hook(c.rec)
	}
}
