// Package openai is the llm.Provider for OpenAI-compatible chat-completions
// servers (OpenAI itself, Ollama, vLLM, llama.cpp), over the official
// openai-go SDK. It streams, gathers tool-call deltas by index, and retries
// transient failures itself (429, 5xx, broken connections, streams that end
// without a finish_reason and [DONE]) with the same policy as the anthropic
// provider.
//
// Usage follows troupe's (Anthropic's) meaning: InputTokens counts only the
// prompt tokens that were neither read from nor written to a cache, so that
// InputTokens+CacheReadTokens+CacheWriteTokens is the server's prompt_tokens
// and totals from both providers add up the same way.
//
// It must never depend on agents, tools or teams.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/retry"
)

// DefaultBaseURL is OpenAI's own endpoint, used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.openai.com/v1"

// Config configures a Provider. Zero values take the defaults noted.
type Config struct {
	// APIKey is sent as a bearer token when set; local servers need none.
	APIKey string
	// BaseURL is the server's API root, the part before /chat/completions
	// (e.g. http://localhost:11434/v1 for Ollama; default DefaultBaseURL).
	BaseURL string
	// Model is used when a request names none. A request with no model
	// and no default here is refused: there is no sensible guess for a
	// local server.
	Model string
	// HTTPClient carries the requests (default: a client with no overall
	// timeout; RequestTimeout bounds each attempt instead).
	HTTPClient *http.Client
	// MaxRetries is how many times a failed attempt is retried (default
	// 5; a negative value means none).
	MaxRetries int
	// RequestTimeout bounds one attempt, stream included (default 10m).
	RequestTimeout time.Duration
	// BaseBackoff, MaxBackoff and MaxRetryAfter shape the waits (see
	// retry.Backoff; defaults 500ms, 30s, 5m).
	BaseBackoff   time.Duration
	MaxBackoff    time.Duration
	MaxRetryAfter time.Duration
	// Jitter returns a number in [0,1) (default math/rand); Sleep waits
	// (default: a timer that honours ctx). Seams for tests.
	Jitter func() float64
	Sleep  func(ctx context.Context, d time.Duration) error
	// MaxReplyBytes caps one reply's content (text and tool arguments); a
	// reply past it ends the call with llm.ErrReplyTooLarge. Default
	// llm.DefaultMaxReplyBytes; negative means no cap.
	MaxReplyBytes int64
}

// Provider calls a chat-completions endpoint.
type Provider struct {
	cfg     Config
	backoff retry.Backoff
	chat    sdk.ChatCompletionService
}

var _ llm.Provider = (*Provider)(nil)

// New returns a Provider. It reads no environment variable: the caller
// passes OPENAI_API_KEY in cfg.APIKey when the server needs one.
func New(cfg Config) (*Provider, error) {
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 5
	}
	if cfg.MaxRetries < 0 {
		cfg.MaxRetries = 0
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Minute
	}
	if cfg.Jitter == nil {
		cfg.Jitter = rand.Float64
	}
	if cfg.Sleep == nil {
		cfg.Sleep = retry.Sleep
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if !strings.HasPrefix(cfg.BaseURL, "http://") && !strings.HasPrefix(cfg.BaseURL, "https://") {
		return nil, fmt.Errorf("openai: base URL %q: want http:// or https://", cfg.BaseURL)
	}
	// The service is built directly, not through sdk.NewClient, so that no
	// OPENAI_* variable of the environment changes what is sent.
	chat := sdk.NewChatCompletionService(
		option.WithBaseURL(strings.TrimSuffix(cfg.BaseURL, "/")+"/"),
		option.WithHTTPClient(cfg.HTTPClient),
		option.WithAPIKey(strings.TrimSpace(cfg.APIKey)),
		option.WithMaxRetries(0), // we retry ourselves, streams included
	)
	return &Provider{
		cfg:     cfg,
		backoff: retry.Backoff{Base: cfg.BaseBackoff, Max: cfg.MaxBackoff, MaxRetryAfter: cfg.MaxRetryAfter, Jitter: cfg.Jitter},
		chat:    chat,
	}, nil
}

// Name implements llm.Provider.
func (p *Provider) Name() string { return "openai" }

// Stream implements llm.Provider.
func (p *Provider) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		params, err := buildParams(req, p.cfg.Model)
		if err != nil {
			yield(llm.Event{}, err)
			return
		}
		llm.Retries{Max: p.cfg.MaxRetries, Delay: p.backoff.Delay, Sleep: p.cfg.Sleep, Classify: classify}.Run(ctx, yield,
			func() (*llm.Response, bool, error) { return p.attempt(ctx, params, yield) })
	}
}

// toolCall gathers the deltas of one streamed tool call.
type toolCall struct {
	id, name string
	args     strings.Builder
}

// attempt makes one streamed call. stopped reports that the consumer quit.
func (p *Provider) attempt(ctx context.Context, params sdk.ChatCompletionNewParams, yield func(llm.Event, error) bool) (resp *llm.Response, stopped bool, err error) {
	actx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	done := &doneWatch{}
	stream := p.chat.NewStreaming(actx, params, option.WithMiddleware(done.middleware))
	defer stream.Close()

	var (
		id, model, finish string
		text              strings.Builder
		calls             = map[int64]*toolCall{}
		usage             sdk.CompletionUsage
		limit             = llm.ReplyCap{Max: llm.ReplyCapOf(p.cfg.MaxReplyBytes)}
	)
	for stream.Next() {
		chunk := stream.Current()
		if id == "" {
			id = chunk.ID
		}
		if model == "" {
			model = chunk.Model
		}
		if chunk.JSON.Usage.Valid() {
			usage = chunk.Usage
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue // we never ask for more than one choice
			}
			for _, piece := range []string{ch.Delta.Content, ch.Delta.Refusal} {
				if piece == "" {
					continue
				}
				text.WriteString(piece)
				if err := limit.Add(len(piece)); err != nil {
					return nil, false, err
				}
				if !yield(llm.Event{Type: llm.EventText, Text: piece}, nil) {
					return nil, true, nil
				}
			}
			for _, d := range ch.Delta.ToolCalls {
				tc := calls[d.Index]
				if tc == nil {
					tc = &toolCall{}
					calls[d.Index] = tc
				}
				if d.ID != "" && tc.id == "" {
					tc.id = d.ID
				}
				tc.args.WriteString(d.Function.Arguments)
				if err := limit.Add(len(d.Function.Arguments)); err != nil {
					return nil, false, err
				}
				if d.Function.Name != "" && tc.name == "" {
					tc.name = d.Function.Name
					if tc.id == "" {
						tc.id = fmt.Sprintf("call_%s_%d", id, d.Index)
					}
					if !yield(llm.Event{Type: llm.EventToolStart, Name: tc.name, ID: tc.id}, nil) {
						return nil, true, nil
					}
				}
			}
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	if err := stream.Err(); err != nil {
		if actx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
			return nil, false, &streamError{fmt.Errorf("no complete reply within %s", p.cfg.RequestTimeout)}
		}
		return nil, false, err
	}
	switch {
	case finish == "":
		return nil, false, &streamError{errors.New("stream ended before a finish_reason")}
	case !done.seen:
		return nil, false, &streamError{errors.New("stream ended before [DONE]")}
	}
	return response(id, model, finish, text.String(), calls, usage), false, nil
}

// response assembles the call's result.
func response(id, model, finish, text string, calls map[int64]*toolCall, u sdk.CompletionUsage) *llm.Response {
	resp := &llm.Response{ID: id, Model: model, Message: llm.Message{Role: llm.RoleAssistant}}
	if text != "" {
		resp.Message.Content = append(resp.Message.Content, llm.TextBlock(text))
	}
	idx := make([]int64, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
	for _, i := range idx {
		tc := calls[i]
		if tc.name == "" {
			continue // arguments without a function: nothing to call
		}
		resp.Message.Content = append(resp.Message.Content, llm.Block{Type: llm.BlockToolUse, ID: tc.id, Name: tc.name, Input: arguments(tc.args.String())})
	}
	resp.StopReason = stopReason(finish, len(resp.Message.ToolUses()) > 0)
	cached, written := u.PromptTokensDetails.CachedTokens, u.PromptTokensDetails.CacheWriteTokens
	resp.Usage = llm.Usage{
		InputTokens:      max(u.PromptTokens-cached-written, 0),
		OutputTokens:     u.CompletionTokens,
		CacheReadTokens:  cached,
		CacheWriteTokens: written,
	}
	return resp
}

// arguments makes a tool call's arguments a JSON value the transcript can
// hold: as sent when they are JSON, {} when empty, else the text as a JSON
// string, so the tool refuses it with a message the model can act on.
func arguments(s string) json.RawMessage {
	s = strings.TrimSpace(s)
	if s == "" {
		return json.RawMessage(`{}`)
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

// stopReason maps a finish_reason. Some servers (older Ollama) say "stop"
// while calling tools; the calls decide then.
func stopReason(finish string, calls bool) llm.StopReason {
	switch finish {
	case "tool_calls", "function_call":
		return llm.StopToolUse
	case "length":
		return llm.StopMaxTokens
	case "content_filter":
		return llm.StopRefusal
	}
	if calls {
		return llm.StopToolUse
	}
	return llm.StopEndTurn
}

// doneWatch notices the "data: [DONE]" line of a stream, which the SDK
// swallows: a stream cut after the last chunk but before [DONE] looks
// complete to it.
type doneWatch struct{ seen bool }

func (d *doneWatch) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	resp, err := next(req)
	if err == nil && resp != nil && resp.StatusCode < 300 && resp.Body != nil {
		resp.Body = &doneReader{ReadCloser: resp.Body, watch: d, tail: []byte("\n")}
	}
	return resp, err
}

// doneReader scans what passes through it for a line that starts with
// "data: [DONE]" (or "data:[DONE]"). JSON payloads cannot hide one: a raw
// newline never appears inside a JSON string.
type doneReader struct {
	io.ReadCloser
	watch *doneWatch
	tail  []byte // the last bytes read, so a marker split across reads is found
}

var doneMarks = [][]byte{[]byte("\ndata: [DONE]"), []byte("\ndata:[DONE]")}

func (r *doneReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if n > 0 && !r.watch.seen {
		buf := append(r.tail, p[:n]...)
		for _, m := range doneMarks {
			if bytes.Contains(buf, m) {
				r.watch.seen = true
			}
		}
		const keep = 16
		r.tail = append(r.tail[:0], buf[max(len(buf)-keep, 0):]...)
	}
	return n, err
}

// streamError is a failure after the response started: always retryable.
type streamError struct{ err error }

func (e *streamError) Error() string { return e.err.Error() }
func (e *streamError) Unwrap() error { return e.err }

// APIError is a failed call as troupe reports it (llm.APIError, named
// "openai").
type APIError = llm.APIError

func classify(err error) *APIError {
	ae := judge(err)
	ae.Provider = "openai"
	return ae
}

func judge(err error) *APIError {
	if errors.Is(err, llm.ErrReplyTooLarge) {
		return &APIError{Message: err.Error(), Kind: llm.ErrReplyTooLarge}
	}
	var se *sdk.Error
	if errors.As(err, &se) {
		ae := &APIError{Status: se.StatusCode, Type: se.Type, Code: se.Code, Message: bounded(se.Message)}
		if ae.Message == "" {
			ae.Message = bounded(se.RawJSON())
		}
		if se.Response != nil {
			ae.RetryAfter = retry.After(se.Response.Header)
			ae.RequestID = se.Response.Header.Get("x-request-id")
		}
		ae.JudgeStatus(se.StatusCode)
		return ae
	}
	var sse *ssestream.StreamError
	if errors.As(err, &sse) {
		// An error object inside a 200 stream: judge by its type.
		var body struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
				Code    any    `json:"code"`
			} `json:"error"`
		}
		ae := &APIError{Message: bounded(sse.Message), Retry: true, Kind: llm.ErrUnavailable}
		if json.Unmarshal(sse.Event.Data, &body) == nil {
			ae.Type = body.Error.Type
			if body.Error.Message != "" {
				ae.Message = bounded(body.Error.Message)
			}
			if c, ok := body.Error.Code.(string); ok {
				ae.Code = c
			}
		}
		if ae.Type == "invalid_request_error" {
			ae.Retry, ae.Kind = false, llm.ErrInvalidRequest
		}
		return ae
	}
	if errors.Is(err, llm.ErrInvalidRequest) {
		return &APIError{Message: err.Error(), Kind: llm.ErrInvalidRequest}
	}
	// A broken connection, a cut stream, a malformed chunk.
	return &APIError{Message: err.Error(), Retry: true, Kind: llm.ErrUnavailable}
}

func bounded(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// buildParams translates a request to chat completions: the system prompt
// as the first message, each tool result as a tool message, thinking
// dropped (no chat-completions server takes it back).
func buildParams(req *llm.Request, defaultModel string) (sdk.ChatCompletionNewParams, error) {
	var params sdk.ChatCompletionNewParams
	msgs, err := llm.Normalize(req.Messages)
	if err != nil {
		return params, err
	}
	model := req.Model
	if model == "" {
		model = defaultModel
	}
	if model == "" {
		return params, fmt.Errorf("%w: no model named (an OpenAI-compatible server needs one, e.g. --model llama3.1)", llm.ErrInvalidRequest)
	}
	params.Model = shared.ChatModel(model)
	if req.MaxTokens > 0 {
		// max_tokens, not max_completion_tokens: every compatible
		// server knows the older name.
		params.MaxTokens = sdk.Int(int64(req.MaxTokens))
	}
	params.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)}
	if sys := req.SystemText(); sys != "" {
		params.Messages = append(params.Messages, sdk.SystemMessage(sys))
	}
	for _, t := range req.Tools {
		fn := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			fn.Description = sdk.String(t.Description)
		}
		if len(t.InputSchema) > 0 {
			var schema map[string]any
			if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
				return params, fmt.Errorf("tool %s: input schema: %w", t.Name, err)
			}
			fn.Parameters = schema
		}
		params.Tools = append(params.Tools, sdk.ChatCompletionFunctionTool(fn))
	}
	for _, m := range msgs {
		switch m.Role {
		case llm.RoleUser:
			params.Messages = append(params.Messages, userMessages(m)...)
		case llm.RoleAssistant:
			if am, ok := assistantMessage(m); ok {
				params.Messages = append(params.Messages, am)
			}
		}
	}
	return params, nil
}

// userMessages turns a user turn into one tool message per tool result,
// then one user message with its text (after the results, which must
// follow the assistant's calls at once).
func userMessages(m llm.Message) []sdk.ChatCompletionMessageParamUnion {
	var out []sdk.ChatCompletionMessageParamUnion
	var texts []string
	for _, b := range m.Content {
		switch b.Type {
		case llm.BlockToolResult:
			// A tool message carries text only: its Images are left out,
			// and the text names them (llm.Block.Images).
			content := b.Content
			if b.IsError {
				content = "Error: " + content
			}
			out = append(out, sdk.ToolMessage(content, b.ToolUseID))
		case llm.BlockText:
			if b.Text != "" {
				texts = append(texts, b.Text)
			}
		}
	}
	if len(texts) > 0 {
		out = append(out, sdk.UserMessage(strings.Join(texts, "\n\n")))
	}
	return out
}

// assistantMessage turns an assistant turn into one message with its text
// and tool calls; ok is false when nothing is left (thinking only).
func assistantMessage(m llm.Message) (sdk.ChatCompletionMessageParamUnion, bool) {
	var am sdk.ChatCompletionAssistantMessageParam
	var texts []string
	for _, b := range m.Content {
		switch b.Type {
		case llm.BlockText:
			if b.Text != "" {
				texts = append(texts, b.Text)
			}
		case llm.BlockToolUse:
			args := string(b.Input)
			if len(b.Input) == 0 || !json.Valid(b.Input) {
				args = "{}"
			}
			am.ToolCalls = append(am.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
					ID:       b.ID,
					Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: b.Name, Arguments: args},
				},
			})
		}
	}
	if len(texts) > 0 {
		am.Content.OfString = sdk.String(strings.Join(texts, "\n\n"))
	}
	if len(texts) == 0 && len(am.ToolCalls) == 0 {
		return sdk.ChatCompletionMessageParamUnion{}, false
	}
	return sdk.ChatCompletionMessageParamUnion{OfAssistant: &am}, true
}
