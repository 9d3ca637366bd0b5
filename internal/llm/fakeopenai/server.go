package fakeopenai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/fakescript"
)

// Options tunes a [Server].
type Options struct {
	// APIKey, if set, must come as "Authorization: Bearer <key>" on every
	// call (else 401). Empty accepts calls with or without a key, as local
	// servers (Ollama, llama.cpp) do.
	APIKey string
	// Latency is waited before the first byte of every answer to a chat
	// completion, on top of a rule's own latency.
	Latency time.Duration
	// Logf, if set, receives one line per chat completion.
	Logf func(format string, args ...any)
	// IDPrefix goes before the call number in completion and tool call
	// ids (call_fake_<prefix><call>_<part>), so that a second server
	// answering the same conversation (a resumed run) never repeats an id
	// of the first; fakescript.UniquePrefix makes one. Empty keeps the ids
	// of the docs, for tests that compare them.
	IDPrefix string
}

// Recorded is one POST /v1/chat/completions as the server saw it.
type Recorded struct {
	N      int    // 1-based call number
	Agent  string // agent name found in the system message ("" if none)
	Body   []byte // the raw request body
	Stream bool   // the request asked for a stream
	// HasKey reports that the call carried a bearer token (never kept).
	HasKey bool
	// Status is the HTTP status sent: 0 while in flight or when the
	// connection was dropped, 499 when the client went away first.
	Status int
	Rule   int    // index of the rule that answered, -1 for none
	Fault  string // the kind of fault injected, "" for none
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
	used      []int
	recs      []Recorded
	unmatched int
	serving   fakescript.Serving
}

// New returns a server that answers by script s.
func New(s *Script, opt Options) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{script: s, opt: opt, ctx: ctx, cancel: cancel, used: make([]int, len(s.rules))}
}

// Start listens on addr (such as "127.0.0.1:0") and serves in a goroutine
// that [Server.Close] stops. It returns the base URL an OpenAI client takes,
// http://host:port/v1.
func (s *Server) Start(addr string) (string, error) {
	return s.serving.Start("fakeopenai", s, addr, "/v1")
}

// URL returns the base URL given by Start (ending in /v1), or "" before it.
func (s *Server) URL() string { return s.serving.URL() }

// Close stops serving, breaks open connections, cancels latency waits and
// waits for every goroutine of the server to end.
func (s *Server) Close() error { return s.serving.Close(s.cancel) }

// Requests returns every chat completion call so far, in call order.
func (s *Server) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Recorded(nil), s.recs...)
}

// Unmatched returns how many calls the fallback answered.
func (s *Server) Unmatched() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unmatched
}

// ServeHTTP answers POST /v1/chat/completions; anything else gets 404.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.serving.Enter() {
		writeError(w, http.StatusServiceUnavailable, "server_error", nil, "fakeopenai: server is closed", nil)
		return
	}
	defer s.serving.Leave()
	if r.Method != http.MethodPost || strings.TrimSuffix(r.URL.Path, "/") != "/v1/chat/completions" {
		code := "unknown_url"
		writeError(w, http.StatusNotFound, "invalid_request_error", &code, fmt.Sprintf("Unknown request URL: %s %s.", r.Method, r.URL.Path), nil)
		return
	}
	s.complete(w, r)
}

// call is one chat completion in progress.
type call struct {
	rec   Recorded
	start time.Time
}

func (s *Server) complete(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.calls++
	c := &call{rec: Recorded{N: s.calls, Rule: -1}, start: time.Now()}
	s.recs = append(s.recs, c.rec)
	fault, faulted := s.script.faults[c.rec.N]
	s.mu.Unlock()
	defer s.finish(c)

	token, bearer := strings.CutPrefix(r.Header.Get("authorization"), "Bearer ")
	c.rec.HasKey = bearer && strings.TrimSpace(token) != ""
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<20))
	c.rec.Body = body
	if err != nil {
		s.fail(w, c, http.StatusBadRequest, "invalid_request_error", nil, "could not read the request body: "+err.Error(), nil)
		return
	}
	// What the record shows even for a request that is then refused.
	var peek struct {
		Stream   bool `json:"stream"`
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &peek) == nil {
		c.rec.Stream = peek.Stream
		for _, m := range peek.Messages {
			if m.Role == "system" || m.Role == "developer" {
				sys, _ := content(m.Content, "", false)
				c.rec.Agent = s.agentOf(sys)
				break
			}
		}
	}
	req, verr := validate(body)
	if s.opt.APIKey != "" && (!bearer || token != s.opt.APIKey) {
		code := "invalid_api_key"
		s.fail(w, c, http.StatusUnauthorized, "invalid_request_error", &code, "Incorrect API key provided.", nil)
		return
	}
	if faulted && fault.Kind != FaultCut {
		s.fault(w, r, c, fault)
		return
	}
	if verr != nil {
		s.fail(w, c, http.StatusBadRequest, "invalid_request_error", nil, verr.Error(), nil)
		return
	}
	cut := faulted // only a cut is left
	idx, rl, vs := s.choose(req, c.rec.N, c.rec.Agent, !cut)
	if !cut {
		c.rec.Rule = idx
	}
	model := s.script.model
	if model == "" {
		model = req.model
	}
	rep, err := buildReply(rl, vs, model, s.opt.IDPrefix, c.rec.N, len(body))
	if err != nil {
		s.fail(w, c, http.StatusInternalServerError, "server_error", nil, "fakeopenai: "+err.Error(), nil)
		return
	}
	if !s.wait(r, c, rl.latency) {
		return
	}
	if cut {
		c.rec.Fault = string(FaultCut)
	}
	w.Header().Set("x-request-id", fmt.Sprintf("req_fake_%d", c.rec.N))
	c.rec.Status = http.StatusOK
	s.store(c)
	if req.stream {
		w.Header().Set("content-type", "text/event-stream; charset=utf-8")
		w.Header().Set("cache-control", "no-cache")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		if !streamReply(w, func() { _ = rc.Flush() }, rep, req.includeUsage, cut) {
			hangUp(w)
		}
		return
	}
	data, _ := llm.Marshal(rep.completion())
	if cut {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		defer conn.Close()
		fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n", len(data))
		_, _ = buf.Write(data[:len(data)/2])
		_ = buf.Flush()
		return
	}
	w.Header().Set("content-type", "application/json")
	w.Header().Set("content-length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

// choose picks the answering rule: the first, in file order, that is not
// exhausted and whose conditions hold, else the fallback (index -1). With
// consume it counts the answer, in the same critical section as the choice.
func (s *Server) choose(req *request, n int, agent string, consume bool) (int, *rule, vars) {
	vs := vars{Agent: agent, Call: n}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.script.rules {
		rl := &s.script.rules[i]
		groups, ok := rl.Match(agent, req.latest, s.used[i])
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

func (s *Server) agentOf(system string) string {
	return fakescript.AgentOf(s.script.agentRE, system)
}

// wait sleeps the latency of the call and reports false, recording 499, if
// the client or the server gave up first.
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

func (s *Server) fault(w http.ResponseWriter, r *http.Request, c *call, f Fault) {
	if !s.wait(r, c, 0) {
		return
	}
	c.rec.Fault = string(f.Kind)
	msg := f.Message
	switch f.Kind {
	case FaultDrop:
		s.store(c)
		hangUp(w)
	case FaultRateLimit:
		if msg == "" {
			msg = "fakeopenai: injected rate limit. Please try again later."
		}
		after := f.RetryAfter
		if after == 0 {
			after = 1
		}
		code := "rate_limit_exceeded"
		s.fail(w, c, http.StatusTooManyRequests, "requests", &code, msg,
			map[string]string{"retry-after": strconv.FormatFloat(after, 'f', -1, 64)})
	case FaultServerError:
		if msg == "" {
			msg = "fakeopenai: injected server error"
		}
		s.fail(w, c, http.StatusInternalServerError, "server_error", nil, msg, nil)
	}
}

func (s *Server) fail(w http.ResponseWriter, c *call, status int, typ string, code *string, msg string, hdr map[string]string) {
	c.rec.Status = status
	s.store(c)
	writeError(w, status, typ, code, msg, hdr)
}

// wireError is OpenAI's error body.
type wireError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, typ string, code *string, msg string, hdr map[string]string) {
	var e wireError
	e.Error.Message, e.Error.Type, e.Error.Code = msg, typ, code
	data, _ := llm.Marshal(e)
	h := w.Header()
	for k, v := range hdr {
		h.Set(k, v)
	}
	h.Set("content-type", "application/json")
	h.Set("content-length", strconv.Itoa(len(data)))
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// hangUp closes the connection under the response at once.
func hangUp(w http.ResponseWriter) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // HTTP/2: abort the stream instead
	}
	_ = buf.Flush()
	_ = conn.Close()
}

// store makes the call's record what Requests shows; it runs before the
// last byte of an answer leaves, so a client that has its answer finds the
// call recorded.
func (s *Server) store(c *call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs[c.rec.N-1] = c.rec
}

func (s *Server) finish(c *call) {
	s.store(c)
	if s.opt.Logf != nil {
		s.opt.Logf("fakeopenai: call %d agent=%q stream=%t rule=%d status=%d fault=%q in %s",
			c.rec.N, c.rec.Agent, c.rec.Stream, c.rec.Rule, c.rec.Status, c.rec.Fault, time.Since(c.start).Round(time.Microsecond))
	}
}

// reply is the answer to one call, ready to be written either way.
type reply struct {
	id, model string
	created   int64
	text      string
	calls     []wireCall
	finish    string
	usage     wireUsage
}

type (
	wireCall struct {
		Index    *int   `json:"index,omitempty"` // in stream deltas only
		ID       string `json:"id,omitempty"`
		Type     string `json:"type,omitempty"`
		Function struct {
			Name      string `json:"name,omitempty"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	wireUsage struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	}
	wireMessage struct {
		Role      string     `json:"role,omitempty"`
		Content   *string    `json:"content,omitempty"`
		ToolCalls []wireCall `json:"tool_calls,omitempty"`
	}
	wireChoice struct {
		Index        int          `json:"index"`
		Message      *wireMessage `json:"message,omitempty"`
		Delta        *wireMessage `json:"delta,omitempty"`
		Logprobs     *struct{}    `json:"logprobs"`
		FinishReason *string      `json:"finish_reason"`
	}
	wireCompletion struct {
		ID      string       `json:"id"`
		Object  string       `json:"object"`
		Created int64        `json:"created"`
		Model   string       `json:"model"`
		Choices []wireChoice `json:"choices"`
		Usage   *wireUsage   `json:"usage"`
	}
)

// buildReply makes the reply of rule r to call n.
func buildReply(r *rule, vs vars, model, idPrefix string, n, requestBytes int) (*reply, error) {
	rep := &reply{id: fmt.Sprintf("chatcmpl-fake-%s%d", idPrefix, n), model: model, created: 1700000000 + int64(n), finish: r.finish}
	outBytes := 0
	var text strings.Builder
	for i, p := range r.reply {
		if p.text != nil {
			t := vs.Expand(*p.text)
			text.WriteString(t)
			outBytes += len(t)
			continue
		}
		args, err := llm.Marshal(vs.ExpandAny(p.call.Arguments))
		if err != nil {
			return nil, fmt.Errorf("tool_call arguments: %w", err)
		}
		var wc wireCall
		wc.ID, wc.Type = fmt.Sprintf("call_fake_%s%d_%d", idPrefix, n, i), "function"
		wc.Function.Name, wc.Function.Arguments = p.call.Name, string(args)
		rep.calls = append(rep.calls, wc)
		outBytes += len(args) + len(p.call.Name)
	}
	rep.text = text.String()
	u := r.usage
	rep.usage.PromptTokens = pick(u.PromptTokens, max(1, requestBytes/4))
	rep.usage.CompletionTokens = pick(u.CompletionTokens, max(1, outBytes/4))
	rep.usage.PromptTokensDetails.CachedTokens = min(pick(u.CachedTokens, 0), rep.usage.PromptTokens)
	rep.usage.TotalTokens = rep.usage.PromptTokens + rep.usage.CompletionTokens
	return rep, nil
}

func pick(p *int, def int) int {
	if p != nil {
		return *p
	}
	return def
}

// completion is the non-streamed body.
func (rep *reply) completion() wireCompletion {
	msg := &wireMessage{Role: "assistant", ToolCalls: rep.calls}
	if rep.text != "" || len(rep.calls) == 0 {
		msg.Content = &rep.text
	}
	return wireCompletion{
		ID: rep.id, Object: "chat.completion", Created: rep.created, Model: rep.model,
		Choices: []wireChoice{{Message: msg, FinishReason: &rep.finish}},
		Usage:   &rep.usage,
	}
}

// streamReply writes rep as chat.completion.chunk events: the role, the text
// a few words at a time, each tool call's id and name and then its arguments
// in several pieces, the finish_reason, the usage when asked, and [DONE].
// With cut it stops after the first content chunk and reports false, so
// that the caller breaks the connection.
func streamReply(w io.Writer, flush func(), rep *reply, includeUsage, cut bool) bool {
	var failed bool
	send := func(choices []wireChoice, usage *wireUsage) {
		if failed {
			return
		}
		data, _ := llm.Marshal(wireCompletion{ID: rep.id, Object: "chat.completion.chunk", Created: rep.created, Model: rep.model, Choices: choices, Usage: usage})
		if _, err := fmt.Fprintf(w, "data: %s\n\n", data); err != nil {
			failed = true
			return
		}
		flush()
	}
	delta := func(d wireMessage) { send([]wireChoice{{Delta: &d}}, nil) }
	empty := ""
	delta(wireMessage{Role: "assistant", Content: &empty})
	for _, piece := range splitWords(rep.text) {
		delta(wireMessage{Content: &piece})
		if cut {
			return false
		}
	}
	for i, c := range rep.calls {
		head := c
		head.Index = &i
		head.Function.Arguments = ""
		delta(wireMessage{ToolCalls: []wireCall{head}})
		for _, piece := range splitArgs(c.Function.Arguments) {
			var d wireCall
			d.Index = &i
			d.Function.Arguments = piece
			delta(wireMessage{ToolCalls: []wireCall{d}})
			if cut {
				return false
			}
		}
	}
	if cut {
		return false
	}
	finish := rep.finish
	send([]wireChoice{{Delta: &wireMessage{}, FinishReason: &finish}}, nil)
	if includeUsage {
		send([]wireChoice{}, &rep.usage)
	}
	if !failed {
		if _, err := io.WriteString(w, "data: [DONE]\n\n"); err == nil {
			flush()
		}
	}
	return true
}

// splitWords cuts text into pieces of a few words, each keeping the
// whitespace after it.
func splitWords(text string) []string {
	if text == "" {
		return nil
	}
	var out []string
	words, start := 0, 0
	for i := 1; i < len(text); i++ {
		if text[i-1] == ' ' && text[i] != ' ' {
			if words++; words == 3 {
				out = append(out, text[start:i])
				start, words = i, 0
			}
		}
	}
	return append(out, text[start:])
}

// splitArgs cuts a JSON text into at least three pieces on rune boundaries,
// none of them valid JSON on its own, as real servers send arguments.
func splitArgs(s string) []string {
	size := max(1, min(len(s)/3, 64))
	var out []string
	for len(s) > size {
		cut := size
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		if cut == 0 {
			cut = size
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return append(out, s)
}
