package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/troupe-dev/troupe/internal/llm"
)

// A conversation grows by two messages a turn while everything before them
// stays as it was, yet encoding the request through the SDK's params costs
// time in proportion to the whole history (1.2 ms at 38 KB). The encoder
// keeps each message's JSON (made by the SDK's own marshaller, so the bytes
// are the SDK's) and splices the cached pieces into the body, encoding only
// what is new. The tools and the system prompt are cached the same way.
//
// A cached piece is reused only when its source is equal to the message
// now sent, compared field by field. Go compares equal strings that share
// their bytes without reading them, so a history kept in memory and
// appended to is checked in time proportional to its number of blocks, not
// its bytes.

// maxConversations bounds the conversations whose encodings are kept (each
// holds about its history's size again); past it the least recently used
// is dropped, and its next request, if any, is encoded whole.
const maxConversations = 1024

// maxToolSets bounds the tool lists kept encoded (one per role, typically).
const maxToolSets = 16

// encoder builds request bodies from cached pieces. Safe for concurrent use.
type encoder struct {
	mu     sync.Mutex
	clock  int64
	convs  map[string]*conversation // by llm.Request.Agent
	tools  []*toolSet
	system []*systemEnc
}

// conversation holds the encoded messages of one agent's last request.
type conversation struct {
	used   int64 // the encoder's clock at its last request; under encoder.mu
	mu     sync.Mutex
	ttl    llm.CacheTTL
	msgs   []encMsg
	system *systemEnc // the system prompt of its last request
}

// encMsg is one message as last sent, and its JSON without and with a cache
// breakpoint on its last block (each made when first needed), after a
// comma unless it is the first message.
type encMsg struct {
	role   llm.Role
	blocks []llm.Block // a private copy: Input is copied, strings are immutable
	plain  []byte
	marked []byte
}

type toolSet struct {
	ttl   llm.CacheTTL
	specs []llm.ToolSpec // private copy
	json  []byte         // the elements of the tools array, comma-joined
}

type systemEnc struct {
	ttl        llm.CacheTTL
	head, tail string
	json       []byte // the elements of the system array, comma-joined
}

func newEncoder() *encoder {
	return &encoder{convs: map[string]*conversation{}}
}

// body returns the request body for req: the bytes the SDK's NewStreaming
// would send for the same request, built from cached pieces. It marks the
// cache breakpoints in the order the cache reads a request (tools, system,
// messages):
//   - the last tool: the tools alone, shared by every agent offered them;
//   - the system prompt (req.System): tools and system, shared byte for
//     byte by the agents of one role; req.SystemTail (who the agent is)
//     follows as a second block, outside that prefix;
//   - the last block of the user turn before the last reply: where the
//     previous call's conversation ended, read back directly;
//   - the last block of the latest turn: the whole conversation so far,
//     which the next call reads and extends.
//
// With req.CacheTTL 1h every breakpoint asks for the hour: the API wants
// longer lifetimes before shorter ones, and a shared prefix kept an hour
// costs its one writer the same.
func (e *encoder) body(req *llm.Request) (*reqBody, error) {
	msgs := req.Messages
	if !normalized(msgs) {
		var err error
		if msgs, err = llm.Normalize(msgs); err != nil {
			return nil, err
		}
	}
	cache, err := cacheParam(req.CacheTTL)
	if err != nil {
		return nil, err
	}
	model, maxTokens := requestDefaults(req)
	modelJSON, err := json.Marshal(model)
	if err != nil {
		return nil, fmt.Errorf("model %q: %w", model, err)
	}
	tools, err := e.toolsJSON(req.Tools, req.CacheTTL, cache)
	if err != nil {
		return nil, err
	}
	c := e.conversation(req.Agent)
	c.mu.Lock()
	defer c.mu.Unlock()
	// Each agent's system prompt is its own (SystemTail names it): kept
	// with its conversation, not in the encoder's short list, which a
	// team of more agents than the list holds emptied at every call.
	sys := c.system
	if sys == nil || sys.ttl != req.CacheTTL || sys.head != req.System || sys.tail != req.SystemTail {
		j, err := e.systemJSON(req.System, req.SystemTail, req.CacheTTL, cache)
		if err != nil {
			return nil, err
		}
		sys = &systemEnc{ttl: req.CacheTTL, head: req.System, tail: req.SystemTail, json: j}
		c.system = sys
	}
	system := sys.json
	if c.ttl != req.CacheTTL {
		c.ttl, c.msgs = req.CacheTTL, nil
	}
	keep := 0
	for keep < len(c.msgs) && keep < len(msgs) && c.msgs[keep].same(msgs[keep]) {
		keep++
	}
	clear(c.msgs[keep:])
	c.msgs = c.msgs[:keep]
	for _, m := range msgs[keep:] {
		c.msgs = append(c.msgs, encMsg{role: m.Role, blocks: copyBlocks(m.Content)})
	}
	// The breakpoints of buildParams: the last message, and the one
	// before the last reply.
	n := len(c.msgs)
	rb := &reqBody{pieces: make([][]byte, 0, n+12)}
	rb.add(strconv.AppendInt([]byte(`{"max_tokens":`), int64(maxTokens), 10), []byte(`,"messages":[`))
	for i := range c.msgs {
		p, err := c.msgs[i].encoded(i, i == n-1 || (n >= 3 && i == n-3), cache)
		if err != nil {
			c.msgs = c.msgs[:i] // never keep a message that failed
			return nil, err
		}
		rb.add(p)
	}
	rb.add([]byte(`],"model":`), modelJSON)
	if len(system) > 0 {
		rb.add([]byte(`,"system":[`), system, []byte(`]`))
	}
	if len(tools) > 0 {
		rb.add([]byte(`,"tools":[`), tools, []byte(`]`))
	}
	// Last, where the SDK's NewStreaming puts it.
	rb.add([]byte(`,"stream":true}`))
	return rb, nil
}

// normalized reports whether llm.Normalize would return msgs unchanged,
// which a history the agent keeps is; checking costs no copy.
func normalized(msgs []llm.Message) bool {
	if len(msgs) == 0 || msgs[0].Role != llm.RoleUser || msgs[len(msgs)-1].Role != llm.RoleUser {
		return false
	}
	for i, m := range msgs {
		if len(m.Content) == 0 || (m.Role != llm.RoleUser && m.Role != llm.RoleAssistant) || (i > 0 && msgs[i-1].Role == m.Role) {
			return false
		}
	}
	return true
}

// inlineBody is the largest body joined into one slice to be sent: what
// fits the connection's write buffer (llm.WriteBufferSize) beside the
// headers. Joining costs no more than the buffer net/http would otherwise
// make to copy it.
const inlineBody = llm.WriteBufferSize - 4<<10

// reqBody is a request body as the pieces it is made of, copied into one
// only when small (inlineBody): joining a long history would cost time in
// proportion to it.
// The pieces are never changed once made, so a reader may still hold them
// after the call.
type reqBody struct {
	pieces [][]byte
	size   int
}

func (b *reqBody) add(ps ...[]byte) {
	for _, p := range ps {
		b.pieces = append(b.pieces, p)
		b.size += len(p)
	}
}

// bytes joins the pieces (for tests and logs).
func (b *reqBody) bytes() []byte {
	return bytes.Join(b.pieces, nil)
}

// middleware puts the body on the request the SDK is about to send, which
// has none of its own.
func (b *reqBody) middleware(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	r.Header.Set("Content-Type", "application/json")
	r.ContentLength = int64(b.size)
	r.GetBody = func() (io.ReadCloser, error) { return &pieceReader{pieces: b.pieces}, nil }
	if b.size <= inlineBody {
		// net/http writes a body it knows is in memory (a bytes.Reader)
		// with the headers, through the connection's buffer; any other it
		// writes after them, through a buffer made for each request.
		joined := b.bytes()
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(joined)), nil }
	}
	r.Body, _ = r.GetBody()
	return next(r)
}

// pieceReader reads a reqBody; WriteTo hands each piece to the writer as
// it is.
type pieceReader struct {
	pieces [][]byte
	off    int // into pieces[0]
}

func (r *pieceReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && len(r.pieces) > 0 {
		c := copy(p[n:], r.pieces[0][r.off:])
		n += c
		r.off += c
		if r.off == len(r.pieces[0]) {
			r.pieces, r.off = r.pieces[1:], 0
		}
	}
	if n == 0 && len(r.pieces) == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (r *pieceReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for len(r.pieces) > 0 {
		n, err := w.Write(r.pieces[0][r.off:])
		total += int64(n)
		if err != nil {
			r.off += n
			return total, err
		}
		r.pieces, r.off = r.pieces[1:], 0
	}
	return total, nil
}

func (r *pieceReader) Close() error { return nil }

func (e *encoder) conversation(agent string) *conversation {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.clock++
	c := e.convs[agent]
	if c == nil {
		if len(e.convs) >= maxConversations {
			var oldest string
			first := true
			for k, o := range e.convs {
				if first || o.used < e.convs[oldest].used {
					oldest, first = k, false
				}
			}
			delete(e.convs, oldest)
		}
		c = &conversation{}
		e.convs[agent] = c
	}
	c.used = e.clock
	return c
}

// encoded returns the message's JSON, with a cache breakpoint on its last
// block when marked.
func (m *encMsg) encoded(i int, marked bool, cache sdk.CacheControlEphemeralParam) ([]byte, error) {
	slot := &m.plain
	if marked {
		slot = &m.marked
	}
	if *slot != nil {
		return *slot, nil
	}
	mp, err := messageParam(i, llm.Message{Role: m.role, Content: m.blocks})
	if err != nil {
		return nil, err
	}
	if marked {
		setCache(&mp.Content[len(mp.Content)-1], cache)
	}
	b, err := mp.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("message %d: %w", i, err)
	}
	if i > 0 {
		b = append([]byte(","), b...)
	}
	*slot = b
	return b, nil
}

func (m *encMsg) same(o llm.Message) bool {
	if m.role != o.Role || len(m.blocks) != len(o.Content) {
		return false
	}
	for i := range m.blocks {
		if !sameBlock(&m.blocks[i], &o.Content[i]) {
			return false
		}
	}
	return true
}

func sameBlock(a, b *llm.Block) bool {
	if a.Type != b.Type || a.Text != b.Text || a.ID != b.ID || a.Name != b.Name ||
		string(a.Input) != string(b.Input) || a.ToolUseID != b.ToolUseID || a.Content != b.Content ||
		a.IsError != b.IsError || a.Thinking != b.Thinking || a.Signature != b.Signature ||
		len(a.Images) != len(b.Images) {
		return false
	}
	for i := range a.Images {
		if a.Images[i] != b.Images[i] {
			return false
		}
	}
	return true
}

// copyBlocks copies what a caller could change in place: the slices.
func copyBlocks(in []llm.Block) []llm.Block {
	out := make([]llm.Block, len(in))
	for i, b := range in {
		if b.Input != nil {
			b.Input = bytes.Clone(b.Input)
		}
		if b.Images != nil {
			b.Images = append([]llm.Image(nil), b.Images...)
		}
		out[i] = b
	}
	return out
}

func (e *encoder) toolsJSON(specs []llm.ToolSpec, ttl llm.CacheTTL, cache sdk.CacheControlEphemeralParam) ([]byte, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	e.mu.Lock()
	for _, ts := range e.tools {
		if ts.ttl == ttl && sameSpecs(ts.specs, specs) {
			e.mu.Unlock()
			return ts.json, nil
		}
	}
	e.mu.Unlock()
	var b []byte
	for i, t := range specs {
		tp, err := toolParam(t)
		if err != nil {
			return nil, err
		}
		if i == len(specs)-1 {
			tp.CacheControl = cache
		}
		j, err := sdk.ToolUnionParam{OfTool: tp}.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", t.Name, err)
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, j...)
	}
	own := make([]llm.ToolSpec, len(specs))
	for i, s := range specs {
		s.InputSchema = bytes.Clone(s.InputSchema)
		own[i] = s
	}
	e.mu.Lock()
	if len(e.tools) >= maxToolSets {
		e.tools = e.tools[1:]
	}
	e.tools = append(e.tools, &toolSet{ttl: ttl, specs: own, json: b})
	e.mu.Unlock()
	return b, nil
}

func sameSpecs(a, b []llm.ToolSpec) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Description != b[i].Description || string(a[i].InputSchema) != string(b[i].InputSchema) {
			return false
		}
	}
	return true
}

func (e *encoder) systemJSON(head, tail string, ttl llm.CacheTTL, cache sdk.CacheControlEphemeralParam) ([]byte, error) {
	e.mu.Lock()
	for _, s := range e.system {
		if s.ttl == ttl && s.head == head && s.tail == tail {
			e.mu.Unlock()
			return s.json, nil
		}
	}
	e.mu.Unlock()
	var b []byte
	for _, tb := range systemParam(head, tail, cache) {
		j, err := tb.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("system prompt: %w", err)
		}
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = append(b, j...)
	}
	e.mu.Lock()
	if len(e.system) >= maxToolSets {
		e.system = e.system[1:]
	}
	e.system = append(e.system, &systemEnc{ttl: ttl, head: head, tail: tail, json: b})
	e.mu.Unlock()
	return b, nil
}

// systemParam is the system prompt as buildParams sends it.
func systemParam(head, tail string, cache sdk.CacheControlEphemeralParam) []sdk.TextBlockParam {
	var out []sdk.TextBlockParam
	if head != "" {
		out = append(out, sdk.TextBlockParam{Text: head, CacheControl: cache})
	}
	if strings.TrimSpace(tail) != "" {
		out = append(out, sdk.TextBlockParam{Text: tail})
	}
	return out
}

// cacheParam is the breakpoint every cache_control of a request carries.
func cacheParam(ttl llm.CacheTTL) (sdk.CacheControlEphemeralParam, error) {
	cache := sdk.NewCacheControlEphemeralParam()
	switch ttl {
	case llm.CacheTTLDefault:
	case llm.CacheTTL5m:
		cache.TTL = sdk.CacheControlEphemeralTTLTTL5m
	case llm.CacheTTL1h:
		cache.TTL = sdk.CacheControlEphemeralTTLTTL1h
	default:
		return cache, fmt.Errorf("%w: cache ttl %q (want 5m or 1h)", llm.ErrInvalidRequest, ttl)
	}
	return cache, nil
}

// messageParam is message i as the API takes it.
func messageParam(i int, m llm.Message) (sdk.MessageParam, error) {
	mp := sdk.MessageParam{Role: sdk.MessageParamRole(m.Role)}
	for _, b := range m.Content {
		cb, ok := blockParam(b)
		if !ok {
			continue
		}
		mp.Content = append(mp.Content, cb)
	}
	if len(mp.Content) == 0 {
		return mp, fmt.Errorf("%w: message %d has no content the API accepts", llm.ErrInvalidRequest, i)
	}
	return mp, nil
}
