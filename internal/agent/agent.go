// Package agent is the turn loop of one agent: call the model (streaming),
// pass each tool call through the permission gate, run read-only tools in
// parallel and the rest in order, answer every call (a failure is an is_error
// result, never a crash), deliver whatever waits at the tool boundary (inbox
// messages, reminders, finished background jobs) with the results, and repeat
// until the model stops calling tools.
//
// It knows nothing of teams: a team gives an agent its tools, its system
// prompt, a gate and boundary hooks. It must never import team or store.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

// Sentinel errors of a run.
var (
	// ErrMaxTurns means the run used all the model calls it was allowed.
	ErrMaxTurns = errors.New("reached the maximum number of turns")
	// ErrEmptyInput means Run was given nothing to say.
	ErrEmptyInput = errors.New("empty input")
	// ErrNoCompactor means compaction was asked of an agent configured
	// without a Compactor.
	ErrNoCompactor = errors.New("compaction is not configured for this agent")
)

// Decision is the gate's answer for one tool call.
type Decision struct {
	Allow  bool
	Reason string // shown to the model when the call is refused
	// Input, if set, replaces the call's input: the tool runs with it,
	// and AfterTool and observers see it (a PreToolUse hook's
	// updatedInput). It must be a JSON object.
	Input json.RawMessage
}

// haltKey carries a run's *halt in its context.
type haltKey struct{}

type halt struct {
	mu     sync.Mutex
	reason string
	set    bool
}

// Halt asks the run whose context ctx is (or derives from) to stop once
// the tool calls of its current round are answered, instead of calling the
// model again; Result.Halted then holds reason. It is how a hook's
// "continue": false stops an agent. It reports whether ctx belongs to a
// run. Safe for concurrent use (gates, AfterTool and boundaries call it).
func Halt(ctx context.Context, reason string) bool {
	h, ok := ctx.Value(haltKey{}).(*halt)
	if !ok {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.set {
		h.set, h.reason = true, reason
	}
	return true
}

func (h *halt) get() (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reason, h.set
}

// Gate decides whether a tool call may run. It may block (for example while
// a human or the lead is asked); it must honour ctx.
type Gate func(ctx context.Context, call Call) Decision

// Call is one tool call as the gate and observers see it.
type Call struct {
	ID       string
	Name     string
	Input    json.RawMessage
	ReadOnly bool
	// Kind is what the called tool declares it does (tool.Tool.Kind);
	// kind.Unknown, the zero value, for a name the agent has no tool for
	// or a call built without one: the gates treat it as able to do
	// anything.
	Kind kind.Kind
	// Started is when the agent took the call up, before its gate.
	Started time.Time
}

// Boundary returns blocks to deliver with the tool results of a round (inbox
// messages, reminders, finished jobs). names are the tools called in the
// round.
type Boundary func(ctx context.Context, names []string) []llm.Block

// Config configures an Agent.
type Config struct {
	Name     string // "team-lead", "alice"
	Team     string // empty for a lone agent
	Provider llm.Provider
	Model    string
	System   string
	Tools    *tool.Registry
	Env      *tool.Env
	// MaxTurns bounds the model calls of one Run (0: no bound).
	MaxTurns int
	// MaxTokens is the output limit of one call (0: provider default).
	MaxTokens int
	// MaxContinuations bounds consecutive continuations after max_tokens
	// stops (default 5).
	MaxContinuations int
	// Gate checks each call before it runs (nil: allow all).
	Gate Gate
	// AfterTool, if set, sees every call that ran (got past the gate) and
	// its result before the model does, and may add to the result
	// (PostToolUse hooks). It is called from tool goroutines when
	// read-only calls run in parallel; it must be safe for concurrent use.
	AfterTool func(ctx context.Context, call Call, res *tool.Result)
	// Boundaries run, in order, at every tool boundary.
	Boundaries []Boundary
	// Observe receives every event of the run (nil: none). It is called
	// from the run's goroutine and from tool goroutines; it must be safe
	// for concurrent use and quick.
	Observe func(Event)
	// Record receives every message appended to the conversation, in
	// order, as it happens (transcripts). Nil: none.
	Record func(llm.Message)
	// Budget, if set, is asked before every model call; an error stops the
	// run before the call is made (a spending limit was reached) and is
	// returned from Run.
	Budget func() error
	// Now is the clock (default time.Now).
	Now func() time.Time

	// Identity is the agent's identity line (Identity.Line), put back at
	// the top of the conversation after compaction so that a teammate still
	// knows who it is. Empty: none. A System that opens with it (as
	// Prompt.String renders one) is sent with the line moved past the
	// cached prefix (llm.Request.SystemTail), so that agents differing
	// only by name share the prompt cache.
	Identity string
	// CacheTTL, if set, is asked before every model call for the lifetime
	// of the call's prompt cache breakpoints (the runtime asks for an hour
	// when the agent is about to idle longer than the default 5 minutes).
	CacheTTL func() llm.CacheTTL
	// Compactor keeps the conversation inside the context window; it is
	// consulted before every model call (see Agent.Compact). Nil: no
	// compaction, and the compact tool is refused.
	Compactor Compactor
	// OnCompact, if set, is called when a compaction has its summary and
	// before the history is replaced, so the owner can save the full
	// history and the summary to the transcript. An error abandons the
	// compaction: the history stays as it was and the error ends the run
	// (or is returned by Compact).
	OnCompact func(Compaction) error
	// PreCompact, if set, is called before a compaction's summary is
	// asked for (PreCompact hooks).
	PreCompact func(ctx context.Context, reason CompactReason, focus string)
	// PostCompact, if set, is called once a compaction has replaced the
	// history; the blocks it returns are added to the new conversation's
	// last user turn (SessionStart hooks of source "compact").
	PostCompact func(ctx context.Context, c Compaction) []llm.Block
}

// EventType names an Event.
type EventType string

const (
	EventText       EventType = "text"        // streamed assistant text (Text)
	EventThinking   EventType = "thinking"    // streamed thinking (Text)
	EventRetry      EventType = "retry"       // the model call is retried (Err, Delay)
	EventMessage    EventType = "message"     // an assistant message is complete (Message)
	EventToolCall   EventType = "tool_call"   // a tool is about to run (Call)
	EventToolResult EventType = "tool_result" // a tool finished (Call, Result, Duration)
	EventUsage      EventType = "usage"       // a model call's usage (Usage)
	EventDelivered  EventType = "delivered"   // blocks delivered at a boundary (Blocks)
	EventCompact    EventType = "compact"     // the history was replaced by a summary (Compaction)
)

// Event is something that happened in a run.
type Event struct {
	Type       EventType
	Agent      string
	Team       string
	Text       string
	Err        error
	Delay      time.Duration
	Message    *llm.Message
	Call       *Call
	Result     *tool.Result
	Duration   time.Duration
	Usage      *llm.Usage
	Model      string // for EventUsage: the model that answered
	Blocks     []llm.Block
	Compaction *Compaction
}

// Result is how a Run ended.
type Result struct {
	Text       string         // the final assistant text
	StopReason llm.StopReason // of the last model call
	Turns      int            // model calls made in this run
	Usage      llm.Usage      // summed over this run
	// Halted is set when the run stopped because Halt was called: the
	// reason given (for the user, not the model).
	Halted string
	// WasHalted reports that Halt was called, even with an empty reason.
	WasHalted bool
}

// Agent holds one conversation. Its methods must not be called concurrently.
type Agent struct {
	cfg      Config
	messages []llm.Message
	usage    llm.Usage
	turns    int

	// reported is the context the last call used, as the provider
	// reported it; measured is how many messages that call's prompt held.
	// The context used now is reported plus an estimate of
	// messages[measured:].
	reported int64
	measured int

	// compactReq is a compaction the compact tool asked for, taken before
	// the next model call. Tools run in parallel, hence the lock.
	reqMu      sync.Mutex
	compactReq *string
}

// New returns an agent with an empty conversation.
func New(cfg Config) (*Agent, error) {
	if cfg.Provider == nil {
		return nil, errors.New("agent: no model provider")
	}
	if cfg.Tools == nil {
		cfg.Tools = tool.NewRegistry()
	}
	if cfg.Env == nil {
		cfg.Env = &tool.Env{}
	}
	if cfg.Env.Agent == "" {
		cfg.Env.Agent = cfg.Name
	}
	if cfg.Env.Team == "" {
		cfg.Env.Team = cfg.Team
	}
	if cfg.MaxContinuations <= 0 {
		cfg.MaxContinuations = 5
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Agent{cfg: cfg}, nil
}

// Messages returns a copy of the conversation so far.
func (a *Agent) Messages() []llm.Message { return append([]llm.Message(nil), a.messages...) }

// SetMessages replaces the conversation (resume, compaction).
func (a *Agent) SetMessages(msgs []llm.Message) {
	a.messages = append([]llm.Message(nil), msgs...)
	a.reported, a.measured = 0, 0
}

// Usage is the total usage of every call this agent made.
func (a *Agent) Usage() llm.Usage { return a.usage }

// Turns is the number of model calls this agent made.
func (a *Agent) Turns() int { return a.turns }

// Config returns the agent's configuration.
func (a *Agent) Config() Config { return a.cfg }

func (a *Agent) emit(ev Event) {
	if a.cfg.Observe == nil {
		return
	}
	ev.Agent, ev.Team = a.cfg.Name, a.cfg.Team
	a.cfg.Observe(ev)
}

func (a *Agent) appendMessage(m llm.Message) {
	a.messages = append(a.messages, m)
	if a.cfg.Record != nil {
		a.cfg.Record(m)
	}
}

// Run adds a user turn made of input and runs the loop until the model ends
// its turn. An error means the run itself could not go on (model endpoint,
// cancellation, turn limit); the conversation keeps everything up to it.
func (a *Agent) Run(ctx context.Context, input ...llm.Block) (*Result, error) {
	if len(input) == 0 {
		return nil, ErrEmptyInput
	}
	a.appendMessage(llm.Message{Role: llm.RoleUser, Content: input})
	res := &Result{}
	h := &halt{}
	ctx = context.WithValue(ctx, haltKey{}, h)
	continuations := 0
	for {
		if a.cfg.MaxTurns > 0 && res.Turns >= a.cfg.MaxTurns {
			return res, fmt.Errorf("%w (%d)", ErrMaxTurns, a.cfg.MaxTurns)
		}
		if err := a.beforeCall(ctx); err != nil {
			return res, err
		}
		resp, err := a.call(ctx)
		if err != nil {
			return res, err
		}
		res.Turns++
		res.Usage.Add(resp.Usage)
		res.StopReason = resp.StopReason
		if len(resp.Message.Content) > 0 {
			a.appendMessage(resp.Message)
			msg := resp.Message
			a.emit(Event{Type: EventMessage, Message: &msg})
		}
		if t := resp.Message.Text(); t != "" {
			res.Text = t
		}
		uses := resp.Message.ToolUses()
		if len(uses) == 0 {
			if resp.StopReason == llm.StopMaxTokens && continuations < a.cfg.MaxContinuations {
				continuations++
				a.appendMessage(llm.Message{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(
					"Your reply was cut off at the output token limit. Continue exactly where you stopped.")}})
				continue
			}
			if resp.StopReason == llm.StopPauseTurn {
				a.appendMessage(llm.Message{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("Continue.")}})
				continue
			}
			return res, nil
		}
		continuations = 0
		blocks := a.runTools(ctx, uses)
		if resp.StopReason == llm.StopMaxTokens {
			blocks = append(blocks, llm.TextBlock(
				"Your reply was cut off at the output token limit; a tool call may be incomplete. Continue."))
		}
		names := make([]string, len(uses))
		for i, u := range uses {
			names[i] = u.Name
		}
		for _, b := range a.cfg.Boundaries {
			extra := b(ctx, names)
			if len(extra) > 0 {
				a.emit(Event{Type: EventDelivered, Blocks: extra})
				blocks = append(blocks, extra...)
			}
		}
		a.appendMessage(llm.Message{Role: llm.RoleUser, Content: blocks})
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if reason, ok := h.get(); ok {
			res.Halted, res.WasHalted = reason, true
			return res, nil
		}
	}
}

// request is the model call for the conversation as it stands.
func (a *Agent) request() llm.Request {
	system, tail := SplitSystem(a.cfg.System, a.cfg.Identity)
	req := llm.Request{
		Model:      a.cfg.Model,
		System:     system,
		SystemTail: tail,
		Messages:   a.messages,
		Tools:      a.cfg.Tools.Specs(),
		MaxTokens:  a.cfg.MaxTokens,
		Agent:      a.cfg.Name,
	}
	if a.cfg.CacheTTL != nil {
		req.CacheTTL = a.cfg.CacheTTL()
	}
	return req
}

// call makes one model call, streaming its events to the observer.
func (a *Agent) call(ctx context.Context) (*llm.Response, error) {
	if a.cfg.Budget != nil {
		if err := a.cfg.Budget(); err != nil {
			return nil, err
		}
	}
	req := a.request()
	resp, err := llm.Collect(a.cfg.Provider.Stream(ctx, &req), func(ev llm.Event) {
		switch ev.Type {
		case llm.EventText:
			a.emit(Event{Type: EventText, Text: ev.Text})
		case llm.EventThinking:
			a.emit(Event{Type: EventThinking, Text: ev.Text})
		case llm.EventRetry:
			a.emit(Event{Type: EventRetry, Err: ev.Err, Delay: time.Duration(ev.Delay) * time.Millisecond})
		}
	})
	if err != nil {
		return nil, err
	}
	a.turns++
	a.usage.Add(resp.Usage)
	a.reported, a.measured = resp.Usage.ContextTokens(), len(req.Messages)
	u := resp.Usage
	a.emit(Event{Type: EventUsage, Usage: &u, Model: resp.Model})
	return resp, nil
}

// runTools answers every tool_use, in order. Consecutive read-only calls run
// in parallel; consecutive calls of one tool that runs its calls as a batch
// (tool.Batcher: Task spawning teammates) are given to it together; any
// other call runs alone, after the ones before it.
func (a *Agent) runTools(ctx context.Context, uses []llm.Block) []llm.Block {
	results := make([]llm.Block, len(uses))
	for i := 0; i < len(uses); {
		j := i + 1
		b := a.batcher(uses[i].Name)
		switch {
		case a.readOnly(uses[i].Name):
			b = nil
			for j < len(uses) && a.readOnly(uses[j].Name) {
				j++
			}
		case b != nil:
			for j < len(uses) && uses[j].Name == uses[i].Name {
				j++
			}
		}
		switch {
		case j-i == 1:
			results[i] = a.runOne(ctx, uses[i])
		case b != nil:
			a.runBatch(ctx, b, uses[i:j], results[i:j])
		default:
			var wg sync.WaitGroup
			for k := i; k < j; k++ {
				wg.Go(func() { results[k] = a.runOne(ctx, uses[k]) })
			}
			wg.Wait()
		}
		i = j
	}
	return results
}

func (a *Agent) readOnly(name string) bool {
	t, ok := a.cfg.Tools.Get(name)
	return ok && t.ReadOnly()
}

func (a *Agent) batcher(name string) tool.Batcher {
	t, _ := a.cfg.Tools.Get(name)
	b, _ := t.(tool.Batcher)
	return b
}

// runOne runs one call and returns its tool_result. Nothing a tool or its
// input does can take the agent down.
func (a *Agent) runOne(ctx context.Context, use llm.Block) llm.Block {
	p := a.begin(ctx, use)
	if p.ready {
		p.res, p.ran = a.invoke(p, func(env *tool.Env) tool.Result { return p.t.Run(ctx, env, p.input) }), true
	}
	return a.finish(ctx, p)
}

// runBatch runs calls of one tool.Batcher: each is announced and gated in
// order as runOne would, those allowed are run together, and each is
// answered in order. out gets one result per call.
func (a *Agent) runBatch(ctx context.Context, b tool.Batcher, uses []llm.Block, out []llm.Block) {
	ps := make([]*pendingCall, len(uses))
	var (
		ready  []*pendingCall
		envs   []*tool.Env
		inputs []json.RawMessage
	)
	for i, use := range uses {
		ps[i] = a.begin(ctx, use)
		if ps[i].ready {
			ready = append(ready, ps[i])
			envs = append(envs, a.toolEnv(ps[i].call))
			inputs = append(inputs, ps[i].input)
		}
	}
	if len(ready) > 0 {
		var res []tool.Result
		failed := a.invoke(ready[0], func(*tool.Env) tool.Result {
			res = b.RunBatch(ctx, envs, inputs)
			return tool.Result{}
		})
		for i, p := range ready {
			p.ran = true
			switch {
			case len(res) == len(ready):
				p.res = res[i]
			case failed.IsError: // it panicked
				p.res = failed
			default:
				p.res = tool.Errorf("%s failed with an internal error: %d calls run together gave %d results", p.call.Name, len(ready), len(res))
			}
		}
	}
	for i, p := range ps {
		out[i] = a.finish(ctx, p)
	}
}

// pendingCall is a tool call between its announcement and its result.
type pendingCall struct {
	use   llm.Block
	t     tool.Tool
	call  *Call
	input json.RawMessage
	ready bool // known, well-formed and allowed: to be run
	ran   bool // the tool itself was run
	res   tool.Result
}

// begin announces a call and checks it; the call is ready to run unless
// it was refused, and then carries its answer.
func (a *Agent) begin(ctx context.Context, use llm.Block) *pendingCall {
	start := a.cfg.Now()
	t, ok := a.cfg.Tools.Get(use.Name)
	call := &Call{ID: use.ID, Name: use.Name, Input: use.Input, ReadOnly: ok && t.ReadOnly(), Started: start}
	if ok {
		call.Kind = t.Kind()
	}
	a.emit(Event{Type: EventToolCall, Call: call})
	p := &pendingCall{use: use, t: t, call: call}
	p.input, p.res, p.ready = a.check(ctx, t, ok, call)
	return p
}

// finish runs the after-tool hooks of a call that ran, reports its result
// and returns its tool_result block.
func (a *Agent) finish(ctx context.Context, p *pendingCall) llm.Block {
	if p.ran && a.cfg.AfterTool != nil {
		a.cfg.AfterTool(ctx, *p.call, &p.res)
	}
	if p.res.Content == "" {
		p.res.Content = "(no output)"
	}
	a.emit(Event{Type: EventToolResult, Call: p.call, Result: &p.res, Duration: a.cfg.Now().Sub(p.call.Started)})
	b := llm.ToolResultBlock(p.use.ID, p.res.Content, p.res.IsError)
	b.Images = p.res.Images
	return b
}

// check decides whether a call may run: known, well-formed, allowed by the
// gate (which may rewrite its input). When it may not, res says why.
func (a *Agent) check(ctx context.Context, t tool.Tool, ok bool, call *Call) (input json.RawMessage, res tool.Result, ready bool) {
	if !ok {
		return nil, a.cfg.Tools.UnknownError(call.Name), false
	}
	input = call.Input
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	if !json.Valid(input) {
		return nil, tool.Errorf("invalid arguments for %s: not valid JSON", call.Name), false
	}
	if a.cfg.Gate != nil {
		if d := a.cfg.Gate(ctx, *call); !d.Allow {
			reason := d.Reason
			if reason == "" {
				reason = "permission denied"
			}
			return nil, tool.Errorf("%s was not run: %s", call.Name, reason), false
		} else if len(d.Input) > 0 {
			if !json.Valid(d.Input) {
				return nil, tool.Errorf("%s was not run: its rewritten input is not valid JSON", call.Name), false
			}
			input = d.Input
			call.Input = d.Input
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, tool.Errorf("%s was not run: %v", call.Name, err), false
	}
	return input, tool.Result{}, true
}

// toolEnv is the environment a call runs in.
func (a *Agent) toolEnv(call *Call) *tool.Env {
	env := *a.cfg.Env
	env.ToolUseID = call.ID
	if a.cfg.Compactor != nil {
		env.RequestCompact = a.requestCompact
	}
	return &env
}

// invoke runs a checked call through run; a panic becomes the call's
// error result.
func (a *Agent) invoke(p *pendingCall, run func(*tool.Env) tool.Result) (res tool.Result) {
	defer func() {
		if r := recover(); r != nil {
			res = tool.Errorf("%s failed with an internal error: %v\n%s", p.call.Name, r, firstLines(string(debug.Stack()), 8))
		}
	}()
	return run(a.toolEnv(p.call))
}

func firstLines(s string, n int) string {
	count := 0
	for i, c := range s {
		if c == '\n' {
			count++
			if count == n {
				return s[:i]
			}
		}
	}
	return s
}
