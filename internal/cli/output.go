package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/compact"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/usage"
)

// Output formats of a headless run.
const (
	formatText       = "text"
	formatJSON       = "json"
	formatStreamJSON = "stream-json"
)

// outputConfig says how a headless run prints.
type outputConfig struct {
	Format string
	// Partial adds stream_event lines (--include-partial-messages).
	Partial bool
	// Verbose shows tool calls and results on stderr (text).
	Verbose    bool
	SessionID  string
	MaxRetries int
	Prices     usage.Prices
	Stdout     io.Writer
	Stderr     io.Writer
}

// runOutput writes a headless run's output. json and stream-json follow
// Claude Code's SDK message schema, so that a program written for `claude
// -p` reads troupe unchanged: stream-json is a system/init line, then the
// agents' assistant and user messages in the Messages API's shape,
// system/api_retry lines, stream_event lines with partial messages, and a
// last result line; json is that result line alone. troupe's team journal
// comes as lines of type "troupe", which such programs skip, and every line
// says its agent and team.
//
// It learns what the agent events leave out (message ids, the model, stop
// reasons, per-call usage, the streamed deltas) from tap, a wrapper of the
// model provider.
type runOutput struct {
	cfg outputConfig
	enc *json.Encoder

	mu       sync.Mutex
	calls    map[string]*callState // by agent: its model call in flight or last finished
	denials  []permissionDenial
	apiTime  time.Duration
	total    llm.Usage
	byModel  map[string]*modelUsage
	leadStop llm.StopReason
	model    string // the lead's model, for calls that name none
	// team names the lead's team, once it has one.
	team func() string
	// onRefusal is called when the lead's model refuses.
	onRefusal func()
	// between is true from a turn's result until the next turn starts:
	// the result stays the last line of its turn (what shutting the team
	// down journals afterwards is not written).
	between bool
}

// callState is one agent's model call.
type callState struct {
	id       string
	model    string // as asked; the response names the one that answered
	attempt  int
	skip     bool // a compaction summary: not part of the conversation
	resp     *llm.Response
	started  bool   // message_start written (partial messages)
	index    int    // the open content block, -1 for none
	open     string // its type: text or thinking
	buffered bool   // a tool call began: the rest waits for the response
}

func newRunOutput(cfg outputConfig) *runOutput {
	if cfg.Format == "" {
		cfg.Format = formatText
	}
	return &runOutput{cfg: cfg, enc: json.NewEncoder(cfg.Stdout), calls: map[string]*callState{},
		byModel: map[string]*modelUsage{}, team: func() string { return "" }}
}

// newID returns a random id with a prefix ("msg_…").
func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// newUUID returns a random (version 4) UUID, the form of Claude Code's
// session ids and message uuids.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func (o *runOutput) stream() bool { return o.cfg.Format == formatStreamJSON }

// line writes one stream-json line with the fields every line carries.
// Callers hold o.mu, and so never ask the session for its team inside: the
// session may call the output while holding its own lock.
func (o *runOutput) line(agentName, teamName string, m map[string]any) {
	if o.between {
		return
	}
	m["session_id"] = o.cfg.SessionID
	if _, ok := m["uuid"]; !ok {
		m["uuid"] = newUUID()
	}
	m["agent"], m["team"] = agentName, teamName
	_ = o.enc.Encode(m)
}

// initInfo is what the system/init line says of the session.
type initInfo struct {
	Cwd            string
	Model          string
	PermissionMode string
	Tools          []string
	Skills         []string
	APIKeySource   string
}

// init writes the system/init line (stream-json only).
func (o *runOutput) init(in initInfo) {
	if !o.stream() {
		o.mu.Lock()
		o.model = in.Model
		o.mu.Unlock()
		return
	}
	tools := make([]string, 0, len(in.Tools))
	for _, t := range in.Tools {
		tools = append(tools, permission.ClaudeName(t))
	}
	skills := append([]string{}, in.Skills...)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.model = in.Model
	o.line(store.LeadName, "", map[string]any{
		"type": "system", "subtype": "init", "cwd": in.Cwd, "tools": tools, "mcp_servers": []any{},
		"model": in.Model, "permissionMode": in.PermissionMode, "slash_commands": skills, "skills": skills,
		"apiKeySource": in.APIKeySource, "output_style": "default", "plugins": []any{},
	})
}

// apiBlock is a content block in the Messages API's shape: the fields the
// API always sends are present even when empty.
func apiBlock(b llm.Block) map[string]any {
	switch b.Type {
	case llm.BlockText:
		return map[string]any{"type": "text", "text": b.Text}
	case llm.BlockToolUse:
		in := b.Input
		if len(in) == 0 || !json.Valid(in) {
			in = json.RawMessage(`{}`)
		}
		return map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": in}
	case llm.BlockToolResult:
		return map[string]any{"type": "tool_result", "tool_use_id": b.ToolUseID, "content": b.Content, "is_error": b.IsError}
	case llm.BlockThinking:
		return map[string]any{"type": "thinking", "thinking": b.Thinking, "signature": b.Signature}
	}
	return map[string]any{"type": string(b.Type)}
}

func apiBlocks(bs []llm.Block) []map[string]any {
	out := make([]map[string]any, 0, len(bs))
	for _, b := range bs {
		out = append(out, apiBlock(b))
	}
	return out
}

// stopReasonOf guesses a stop reason when the provider's response is not
// known (a message restored from elsewhere).
func stopReasonOf(m *llm.Message) llm.StopReason {
	if len(m.ToolUses()) > 0 {
		return llm.StopToolUse
	}
	return llm.StopEndTurn
}

// observe receives every agent event of the run.
func (o *runOutput) observe(ev agent.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch o.cfg.Format {
	case formatStreamJSON:
		o.streamEvent(ev)
	case formatText:
		o.textEvent(ev)
	}
	if ev.Type == agent.EventMessage && ev.Agent == store.LeadName {
		if st := o.calls[ev.Agent]; st != nil && st.resp != nil {
			o.leadStop = st.resp.StopReason
			if st.resp.StopReason == llm.StopRefusal && o.onRefusal != nil {
				o.onRefusal()
			}
		}
	}
}

func (o *runOutput) streamEvent(ev agent.Event) {
	switch ev.Type {
	case agent.EventMessage:
		msg := map[string]any{"type": "message", "role": "assistant", "content": apiBlocks(ev.Message.Content),
			"stop_sequence": nil}
		st := o.calls[ev.Agent]
		if st != nil && st.resp != nil {
			msg["id"], msg["model"], msg["stop_reason"], msg["usage"] = st.id, st.resp.Model, st.resp.StopReason, st.resp.Usage
		} else {
			msg["id"], msg["model"], msg["stop_reason"], msg["usage"] = newID("msg_"), "", stopReasonOf(ev.Message), llm.Usage{}
		}
		o.line(ev.Agent, ev.Team, map[string]any{"type": "assistant", "message": msg, "parent_tool_use_id": nil})
	case agent.EventToolResult:
		b := llm.ToolResultBlock(ev.Call.ID, ev.Result.Content, ev.Result.IsError)
		o.line(ev.Agent, ev.Team, map[string]any{"type": "user", "parent_tool_use_id": nil,
			"message": map[string]any{"role": "user", "content": []map[string]any{apiBlock(b)}}})
	case agent.EventDelivered:
		o.line(ev.Agent, ev.Team, map[string]any{"type": "user", "parent_tool_use_id": nil,
			"message": map[string]any{"role": "user", "content": apiBlocks(ev.Blocks)}})
	case agent.EventCompact:
		o.line(ev.Agent, ev.Team, map[string]any{"type": "troupe", "event": "compact"})
	}
}

func (o *runOutput) textEvent(ev agent.Event) {
	switch ev.Type {
	case agent.EventRetry:
		fmt.Fprintf(o.cfg.Stderr, "troupe: model call failed (%v); retrying in %s\n", ev.Err, ev.Delay.Round(time.Millisecond))
	case agent.EventToolCall:
		if o.cfg.Verbose {
			fmt.Fprintf(o.cfg.Stderr, "%s → %s %s\n", agentOr(ev.Agent), ev.Call.Name, oneLine(string(ev.Call.Input), 120))
		}
	case agent.EventToolResult:
		if o.cfg.Verbose {
			mark := "✓"
			if ev.Result.IsError {
				mark = "✗"
			}
			fmt.Fprintf(o.cfg.Stderr, "%s %s %s %s\n", agentOr(ev.Agent), mark, ev.Call.Name, oneLine(ev.Result.Content, 120))
		}
	}
}

// teamEvent writes a team journal event: a "troupe" line in stream-json,
// a line on stderr with -v in text.
func (o *runOutput) teamEvent(e store.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.teammateDenial(e)
	switch o.cfg.Format {
	case formatStreamJSON:
		if e.Type == "usage" {
			return // the assistant message already carries it
		}
		line := map[string]any{"type": "troupe", "event": e.Type, "ts": e.TS}
		for k, v := range e.Fields {
			switch k {
			case "type", "event", "ts", "agent", "team", "session_id", "uuid":
			default:
				line[k] = v
			}
		}
		o.line(e.Agent, e.Team, line)
	case formatText:
		if o.cfg.Verbose {
			fmt.Fprintln(o.cfg.Stderr, verboseEvent(e))
		}
	}
}

// permissionDenial is one entry of the result's permission_denials: a tool
// call of the lead, its subagents or a teammate that the gate refused.
// tool_name is Claude Code's name, as rules spell it; reason and agent
// (troupe's additions, which Claude Code's consumers skip) are what the
// model was told and, for a teammate's call, who made it.
type permissionDenial struct {
	ToolName  string          `json:"tool_name"`
	ToolUseID string          `json:"tool_use_id"`
	ToolInput json.RawMessage `json:"tool_input"`
	Reason    string          `json:"reason,omitempty"`
	Agent     string          `json:"agent,omitempty"`
}

// teammateDenial records a teammate's refused call from its journal line
// (permission_check, allowed false): the lead's own come through denied,
// with its subagents' and the refusals hooks make. o.mu is held.
func (o *runOutput) teammateDenial(e store.Event) {
	if e.Type != (teamevent.PermissionCheck{}).Type() {
		return
	}
	env, err := teamevent.Decode(e)
	if err != nil {
		return
	}
	pc := env.Event.(teamevent.PermissionCheck)
	if pc.Member == "" || pc.Member == store.LeadName || pc.Allowed {
		return
	}
	in := pc.Input
	if len(in) == 0 || !json.Valid(in) {
		in = json.RawMessage(`{}`)
	}
	o.denials = append(o.denials, permissionDenial{ToolName: permission.ClaudeName(pc.Tool), ToolUseID: pc.ToolUseID,
		ToolInput: in, Reason: pc.Reason, Agent: pc.Member})
	if o.cfg.Format == formatText {
		fmt.Fprintf(o.cfg.Stderr, "troupe: %s's %s was refused: %s\n", pc.Member, pc.Tool, pc.Reason)
	}
}

// denied records a refused call of the lead.
func (o *runOutput) denied(call agent.Call, reason string) {
	in := call.Input
	if len(in) == 0 || !json.Valid(in) {
		in = json.RawMessage(`{}`)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.denials = append(o.denials, permissionDenial{ToolName: permission.ClaudeName(call.Name), ToolUseID: call.ID, ToolInput: in, Reason: reason})
	if o.cfg.Format == formatText {
		fmt.Fprintf(o.cfg.Stderr, "troupe: %s was refused: %s\n", call.Name, reason)
	}
}

// modelUsage is one entry of the result's modelUsage.
type modelUsage struct {
	InputTokens              int64   `json:"inputTokens"`
	OutputTokens             int64   `json:"outputTokens"`
	CacheReadInputTokens     int64   `json:"cacheReadInputTokens"`
	CacheCreationInputTokens int64   `json:"cacheCreationInputTokens"`
	WebSearchRequests        int     `json:"webSearchRequests"`
	CostUSD                  float64 `json:"costUSD"`
}

func cost(p usage.Prices, model string, u llm.Usage) float64 {
	pr, ok := p.Lookup(model)
	if !ok {
		return 0
	}
	return (float64(u.InputTokens)*pr.Input + float64(u.OutputTokens)*pr.Output +
		float64(u.CacheReadTokens)*pr.CacheRead + float64(u.CacheWriteTokens)*pr.CacheWrite) / 1e6
}

// resultMessage is Claude Code's result message, with troupe's own figures
// under "troupe".
type resultMessage struct {
	Type              string                 `json:"type"`
	Subtype           string                 `json:"subtype"`
	IsError           bool                   `json:"is_error"`
	DurationMS        int64                  `json:"duration_ms"`
	DurationAPIMS     int64                  `json:"duration_api_ms"`
	NumTurns          int                    `json:"num_turns"`
	Result            string                 `json:"result"`
	StopReason        *llm.StopReason        `json:"stop_reason"`
	SessionID         string                 `json:"session_id"`
	TotalCostUSD      float64                `json:"total_cost_usd"`
	Usage             llm.Usage              `json:"usage"`
	ModelUsage        map[string]*modelUsage `json:"modelUsage"`
	PermissionDenials []permissionDenial     `json:"permission_denials"`
	Errors            []string               `json:"errors,omitempty"`
	UUID              string                 `json:"uuid"`
	Agent             string                 `json:"agent"`
	Team              string                 `json:"team"`
	Troupe            troupeResult           `json:"troupe"`
}

type troupeResult struct {
	Stats   team.Stats `json:"stats"`
	Summary string     `json:"summary,omitempty"`
	// End is how the run ended (team.End); Why explains a stall.
	End team.End `json:"end,omitempty"`
	Why string   `json:"why,omitempty"`
}

// resultSubtype is Claude Code's name for how a run ended.
func resultSubtype(err error) string {
	switch {
	case err == nil:
		return "success"
	case errors.Is(err, agent.ErrMaxTurns):
		return "error_max_turns"
	default:
		return "error_during_execution"
	}
}

// finish writes how the run ended: the result line (json, stream-json) or
// the final text and a summary (text).
func (o *runOutput) finish(res *team.Result, tl *tally, err error, d time.Duration) {
	if res == nil {
		res = &team.Result{}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.between = true
	switch o.cfg.Format {
	case formatJSON, formatStreamJSON:
		r := resultMessage{Type: "result", Subtype: resultSubtype(err), IsError: err != nil,
			DurationMS: d.Milliseconds(), DurationAPIMS: o.apiTime.Milliseconds(), NumTurns: res.Stats.LeadModelTurns,
			Result: res.Text, SessionID: o.cfg.SessionID, Usage: o.total, ModelUsage: o.byModel,
			PermissionDenials: append([]permissionDenial{}, o.denials...), UUID: newUUID(),
			Agent: store.LeadName, Team: res.Team, Troupe: troupeResult{Stats: res.Stats, Summary: tl.summary(), End: res.End, Why: res.Why}}
		if o.leadStop != "" {
			sr := o.leadStop
			r.StopReason = &sr
		}
		for _, mu := range o.byModel {
			r.TotalCostUSD += mu.CostUSD
		}
		if err != nil {
			r.Errors = []string{err.Error()}
		}
		_ = o.enc.Encode(r)
	default:
		if res.Text != "" {
			fmt.Fprintln(o.cfg.Stdout, strings.TrimRight(res.Text, "\n"))
		}
		if sum := tl.summary(); sum != "" {
			fmt.Fprintf(o.cfg.Stdout, "\n%s; lead model turns %d (%d from idle notifications alone)\n", sum, res.Stats.LeadModelTurns, res.Stats.LeadTurnsFromIdleOnly)
		}
	}
}

// tap wraps the model provider so the output learns what every call
// returned, and streams its deltas with --include-partial-messages.
func (o *runOutput) tap(p llm.Provider) llm.Provider { return &tapProvider{inner: p, out: o} }

type tapProvider struct {
	inner llm.Provider
	out   *runOutput
}

func (p *tapProvider) Name() string { return p.inner.Name() }

func (p *tapProvider) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		start := time.Now()
		st := p.out.callStart(req)
		defer func() { p.out.callEnd(time.Since(start)) }()
		for ev, err := range p.inner.Stream(ctx, req) {
			if err == nil {
				p.out.callEvent(req.Agent, st, ev)
			}
			if !yield(ev, err) {
				return
			}
		}
	}
}

// isSummaryCall reports whether req is a compaction's summary call.
func isSummaryCall(req *llm.Request) bool {
	if len(req.Messages) == 0 {
		return false
	}
	last := req.Messages[len(req.Messages)-1]
	return last.Role == llm.RoleUser && strings.HasPrefix(last.Text(), compact.SummaryPrompt)
}

func (o *runOutput) callStart(req *llm.Request) *callState {
	st := &callState{id: newID("msg_"), model: req.Model, index: -1, skip: isSummaryCall(req)}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !st.skip {
		o.calls[req.Agent] = st
	}
	return st
}

func (o *runOutput) callEnd(d time.Duration) {
	o.mu.Lock()
	o.apiTime += d
	o.mu.Unlock()
}

func (o *runOutput) callEvent(agentName string, st *callState, ev llm.Event) {
	teamName := ""
	if ev.Type == llm.EventRetry || o.cfg.Partial {
		teamName = o.team() // every agent but the lead's subagents before TeamCreate is of the session's team
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch ev.Type {
	case llm.EventRetry:
		st.attempt++
		if o.stream() {
			o.apiRetry(agentName, teamName, st, ev)
		}
		// What was streamed is void; the next attempt starts a new message.
		st.started, st.index, st.open, st.buffered = false, -1, "", false
		return
	case llm.EventDone:
		if r := ev.Response; r != nil {
			o.total.Add(r.Usage)
			mu := o.byModel[r.Model]
			if mu == nil {
				mu = &modelUsage{}
				o.byModel[r.Model] = mu
			}
			mu.InputTokens += r.Usage.InputTokens
			mu.OutputTokens += r.Usage.OutputTokens
			mu.CacheReadInputTokens += r.Usage.CacheReadTokens
			mu.CacheCreationInputTokens += r.Usage.CacheWriteTokens
			mu.CostUSD += cost(o.cfg.Prices, r.Model, r.Usage)
			if !st.skip {
				st.resp = r
				if !o.cfg.Partial && r.ID != "" {
					st.id = r.ID // partial messages gave the message its id before the API did
				}
			}
		}
	}
	if st.skip || !o.stream() || !o.cfg.Partial {
		return
	}
	o.partial(agentName, teamName, st, ev)
}

// apiRetry writes a system/api_retry line. error is Claude Code's category
// of the failure; error_status its HTTP status, null when there was none.
func (o *runOutput) apiRetry(agentName, teamName string, st *callState, ev llm.Event) {
	var status any
	category := "unknown"
	var ae *llm.APIError
	if errors.As(ev.Err, &ae) && ae.Status != 0 {
		status = ae.Status
		switch {
		case ae.Status == 401 || ae.Status == 403:
			category = "authentication_failed"
		case ae.Status == 429:
			category = "rate_limit"
		case ae.Status == 400:
			category = "invalid_request"
		case ae.Status >= 500:
			category = "server_error"
		}
	}
	line := map[string]any{"type": "system", "subtype": "api_retry", "attempt": st.attempt,
		"max_retries": o.cfg.MaxRetries, "retry_delay_ms": ev.Delay, "error_status": status, "error": category}
	if ev.Err != nil {
		line["message"] = ev.Err.Error()
	}
	o.line(agentName, teamName, line)
}

// partial writes the stream_event lines of one streamed event, in the
// Messages API's streaming shape. Text and thinking stream as they come; a
// tool call's input is known only when the response is complete, so from
// the first tool call on, the rest of the message is written from the
// response: each block's start, its whole content as one delta, its stop.
func (o *runOutput) partial(agentName, teamName string, st *callState, ev llm.Event) {
	emit := func(event map[string]any) {
		o.line(agentName, teamName, map[string]any{"type": "stream_event", "event": event, "parent_tool_use_id": nil})
	}
	startMessage := func(model string) {
		if st.started {
			return
		}
		if model == "" {
			model = st.model
		}
		if model == "" {
			model = o.model
		}
		st.started = true
		emit(map[string]any{"type": "message_start", "message": map[string]any{"id": st.id, "type": "message",
			"role": "assistant", "model": model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": llm.Usage{}}})
	}
	closeBlock := func() {
		if st.open != "" {
			emit(map[string]any{"type": "content_block_stop", "index": st.index})
			st.open = ""
		}
	}
	switch ev.Type {
	case llm.EventText, llm.EventThinking:
		if st.buffered {
			return
		}
		startMessage("")
		kind, delta := "text", map[string]any{"type": "text_delta", "text": ev.Text}
		if ev.Type == llm.EventThinking {
			kind, delta = "thinking", map[string]any{"type": "thinking_delta", "thinking": ev.Text}
		}
		if st.open != kind {
			closeBlock()
			st.index++
			st.open = kind
			block := map[string]any{"type": "text", "text": ""}
			if kind == "thinking" {
				block = map[string]any{"type": "thinking", "thinking": "", "signature": ""}
			}
			emit(map[string]any{"type": "content_block_start", "index": st.index, "content_block": block})
		}
		emit(map[string]any{"type": "content_block_delta", "index": st.index, "delta": delta})
	case llm.EventToolStart:
		startMessage("")
		closeBlock()
		st.buffered = true
	case llm.EventDone:
		r := ev.Response
		if r == nil {
			return
		}
		startMessage(r.Model)
		closeBlock()
		for i := st.index + 1; i < len(r.Message.Content); i++ {
			b := r.Message.Content[i]
			switch b.Type {
			case llm.BlockToolUse:
				in := string(b.Input)
				if in == "" {
					in = "{}"
				}
				emit(map[string]any{"type": "content_block_start", "index": i,
					"content_block": map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{}}})
				emit(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": in}})
			case llm.BlockThinking:
				emit(map[string]any{"type": "content_block_start", "index": i,
					"content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
				emit(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "thinking_delta", "thinking": b.Thinking}})
				if b.Signature != "" {
					emit(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "signature_delta", "signature": b.Signature}})
				}
			default:
				emit(map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
				emit(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": b.Text}})
			}
			emit(map[string]any{"type": "content_block_stop", "index": i})
		}
		emit(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": r.StopReason, "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": r.Usage.OutputTokens}})
		emit(map[string]any{"type": "message_stop"})
	}
}

// startTurn opens the lines of the next turn.
func (o *runOutput) startTurn() {
	o.mu.Lock()
	o.between = false
	o.mu.Unlock()
}

// refused reports whether the lead's last model call ended on a refusal.
func (o *runOutput) refused() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.leadStop == llm.StopRefusal
}
