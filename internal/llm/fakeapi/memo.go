package fakeapi

import (
	"bytes"
	"encoding/json"
	"sync"
)

// An agent's calls repeat the call before them and add a round: the same
// tools, the same system prompt and the same messages, byte for byte, and
// one or two messages more. Decoding and checking every body whole made
// the fake server's cost per call grow with the history (1.3 ms at 65 KB),
// and that cost was charged to troupe in every bench. The server now
// splits a body into its top-level members and the messages into their
// elements, and remembers what it learned from each tools list, system
// prompt and message it has seen, keyed by their exact bytes: the decoded
// value, what checking it alone found, and its blocks as the prompt cache
// reads them. Only new parts are decoded. Anything the splitter does not
// read plainly, or a part that fails to decode, sends the whole body the
// old way, so errors are worded as before; FuzzParsedMatchesPlain holds
// the two ways to one answer.

// memoBytes bounds the bytes of parts one generation of the memo holds.
const memoBytes = 8 << 20

// generations is a map of parts that forgets what has not been used for a
// while: a part found in the old generation moves to the current one, and
// when the current one is full it becomes the old one.
type generations[T any] struct {
	cur, old map[string]T
	size     int
}

func (g *generations[T]) get(key []byte) (T, bool) {
	if v, ok := g.cur[string(key)]; ok {
		return v, true
	}
	v, ok := g.old[string(key)]
	if ok {
		g.put(key, v)
	}
	return v, ok
}

func (g *generations[T]) put(key []byte, v T) {
	if g.size+len(key) > memoBytes {
		g.old, g.cur, g.size = g.cur, nil, 0
	}
	if g.cur == nil {
		g.cur = map[string]T{}
	}
	g.cur[string(key)] = v
	g.size += len(key)
}

// memo holds the parts of bodies the server has seen.
type memo struct {
	mu       sync.Mutex
	messages generations[*msgPart]
	tools    generations[*listPart]
	system   generations[*listPart]
}

// msgPart is one message of the messages list, read once.
type msgPart struct {
	value any // as decode makes it; shared, never changed
	// alone is what checking the message by itself found (nil when the
	// message is not a well-formed user or assistant message: such a
	// message is checked in place, with its index, every time).
	alone  *msgFacts
	blocks []cacheBlock // its blocks for the prompt cache; i is set per call
}

// msgFacts is what a message checked by itself contributes to the checks
// of the whole conversation.
type msgFacts struct {
	role          string
	uses          []toolUse // its tool_use blocks
	results       []toolResult
	cacheControls int
	cacheErr      error
	text          string // userText
}

type toolUse struct {
	index int // the block's index in content
	id    string
}

// listPart is a tools list or a system prompt, read once.
type listPart struct {
	value  any
	blocks []cacheBlock
	agent  string // system: the agent it names
	// tools: what checking the list found, which depends on nothing
	// else in the request (its cache_control counted apart).
	checked validator
	err     error
}

// parsed is a request body decoded through the memo.
type parsed struct {
	obj   map[string]any
	msgs  []*msgPart // the parts of obj["messages"], in order; nil if it was decoded whole
	tools *listPart  // the part of obj["tools"], if any
	sys   *listPart  // the part of obj["system"], if any
	// split is this body's split, kept among the recent ones; from is
	// the one it was read against, if any.
	split, from *split
}

// parse decodes body, reading the parts it has seen from the memo. ok is
// false when body must be decoded whole.
func (s *Server) parse(body []byte) (p *parsed, ok bool) {
	sk := s.recent.against(body)
	members, ok := splitObject(sk)
	if !ok {
		return nil, false
	}
	p = &parsed{obj: make(map[string]any, len(members))}
	for mi := range members {
		m := &members[mi]
		v := &sk.members[m.index]
		raw := body[v.start:v.end]
		var err error
		switch m.key {
		case "messages":
			p.msgs = nil
			if raw[0] != '[' {
				break
			}
			elems := sk.elems[m.elemLo:m.elemHi]
			list := make([]any, len(elems))
			p.msgs = make([]*msgPart, len(elems))
			for i := range elems {
				e := &elems[i]
				if e.msg == nil {
					if e.msg, err = s.messagePart(body[e.start:e.end]); err != nil {
						return nil, false
					}
				}
				p.msgs[i] = e.msg
				list[i] = e.msg.value
			}
			p.obj[m.key] = list
			continue
		case "tools", "system":
			if v.list == nil {
				if v.list, err = s.listPart(m.key, raw); err != nil {
					return nil, false
				}
			}
			lp := v.list
			if m.key == "tools" {
				p.tools = lp
			} else {
				p.sys = lp
			}
			p.obj[m.key] = lp.value
			continue
		}
		if v, ok := plainScalar(raw); ok {
			p.obj[m.key] = v
		} else if p.obj[m.key], err = decode(raw); err != nil {
			return nil, false
		}
	}
	p.split, p.from = s.recent.keep(sk), sk.from
	return p, true
}

// remembered returns g's part for raw, made by build from its decoded
// value the first time raw is seen.
func remembered[T any](m *memo, g *generations[T], raw []byte, build func(v any) T) (T, error) {
	m.mu.Lock()
	p, ok := g.get(raw)
	m.mu.Unlock()
	if ok {
		return p, nil
	}
	v, err := decode(raw)
	if err != nil {
		var zero T
		return zero, err
	}
	p = build(v)
	m.mu.Lock()
	g.put(raw, p)
	m.mu.Unlock()
	return p, nil
}

// messagePart is the memo's part for one raw message.
func (s *Server) messagePart(raw []byte) (*msgPart, error) {
	return remembered(&s.memo, &s.memo.messages, raw, func(v any) *msgPart {
		mp := &msgPart{value: v}
		m, ok := v.(map[string]any)
		if !ok {
			return mp
		}
		role, _ := m["role"].(string)
		if role != "user" && role != "assistant" {
			return mp
		}
		var val validator
		val.toolUseIDs = map[string]bool{}
		if uses, results, err := val.content(0, role, m["content"]); err == nil {
			mp.alone = &msgFacts{role: role, uses: uses, results: results,
				cacheControls: val.cacheControls, cacheErr: val.cacheErr, text: userText(m)}
			mp.blocks = messageBlocks(0, m, canonicalOn)
		}
		return mp
	})
}

// listPart is the memo's part for a raw tools list or system prompt.
func (s *Server) listPart(key string, raw []byte) (*listPart, error) {
	if key == "system" {
		return remembered(&s.memo, &s.memo.system, raw, func(v any) *listPart {
			return &listPart{value: v, blocks: systemBlocks(v, canonicalOn), agent: s.agentIn(v)}
		})
	}
	return remembered(&s.memo, &s.memo.tools, raw, func(v any) *listPart {
		lp := &listPart{value: v, blocks: toolBlocks(v, canonicalOn)}
		lp.err = lp.checked.tools(v)
		return lp
	})
}

// read decodes a request body: through the memo when it can (p), else
// whole (p nil); raw is the decoded body either way.
func (s *Server) read(body []byte) (p *parsed, raw any, decodeErr error) {
	if p, ok := s.parse(body); ok {
		return p, p.obj, nil
	}
	raw, decodeErr = decode(body)
	return nil, raw, decodeErr
}

// blocks lists the request's blocks in cache order from its parts, or from
// the decoded body where it has none.
func (p *parsed) blocks() []cacheBlock {
	if p.msgs == nil {
		return blocksOf(p.obj)
	}
	n := 0
	for _, lp := range []*listPart{p.tools, p.sys} {
		if lp != nil {
			n += len(lp.blocks)
		}
	}
	for _, mp := range p.msgs {
		n += max(len(mp.blocks), 1)
	}
	out := make([]cacheBlock, 0, n)
	if p.tools != nil {
		out = append(out, p.tools.blocks...)
	} else {
		out = append(out, toolBlocks(p.obj["tools"], false)...)
	}
	if p.sys != nil {
		out = append(out, p.sys.blocks...)
	} else {
		out = append(out, systemBlocks(p.obj["system"], false)...)
	}
	for i, mp := range p.msgs {
		if mp.alone == nil {
			m, _ := mp.value.(map[string]any)
			out = append(out, messageBlocks(i, m, false)...)
			continue
		}
		for _, b := range mp.blocks {
			b.i = i
			out = append(out, b)
		}
	}
	return out
}

// The splitter reads the skeleton of a body: an object's members and an
// array's elements, as raw bytes. It checks the structure between them
// (whitespace, quotes, commas, colons, brackets); the values themselves
// are checked by decode, when first seen.

type member struct {
	key   string
	index int // its value's span in the skipper's members
	// The messages array's elements, sk.elems[elemLo:elemHi].
	elemLo, elemHi int
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(data []byte, i int) int {
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	return i
}

// splitObject reads sk's body as one JSON object, with nothing but
// whitespace around it, recording each value in sk.
func splitObject(sk *skipper) ([]member, bool) {
	data := sk.body
	i := skipSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return nil, false
	}
	var out []member
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return out, skipSpace(data, i+1) == len(data)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return nil, false
		}
		end, ok := skipString(data, i)
		if !ok {
			return nil, false
		}
		key, ok := plainString(data[i:end])
		if !ok {
			return nil, false
		}
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return nil, false
		}
		i = skipSpace(data, i+1)
		m := member{key: key, index: len(sk.members)}
		var v span
		if key == "messages" && i < len(data) && data[i] == '[' {
			// Split in place: the array's end is found by its
			// messages, most of which the skipper knows.
			m.elemLo = len(sk.elems)
			v.start = i
			if v.end, ok = splitArray(sk, i); !ok {
				return nil, false
			}
			m.elemHi = len(sk.elems)
		} else if v, ok = sk.skip(false, i); !ok {
			return nil, false
		}
		out = append(out, m)
		sk.members = append(sk.members, v)
		var more bool
		if i, more, ok = afterValue(data, v.end, '}'); !ok {
			return nil, false
		}
		if !more {
			return out, skipSpace(data, i) == len(data)
		}
	}
}

// afterValue reads what follows a value that ends at end in an object or
// array closed by close: a comma and the next value's start (more), or the
// close and the index after it.
func afterValue(data []byte, end int, close byte) (i int, more, ok bool) {
	i = skipSpace(data, end)
	switch {
	case i >= len(data):
		return 0, false, false
	case data[i] == ',':
		return skipSpace(data, i+1), true, true
	case data[i] == close:
		return i + 1, false, true
	}
	return 0, false, false
}

// splitArray reads the JSON array of messages at sk.body[lo], a '[',
// appending each to sk.elems, and returns the index after its ']'.
func splitArray(sk *skipper, lo int) (int, bool) {
	data := sk.body
	i := skipSpace(data, lo+1)
	if i < len(data) && data[i] == ']' {
		return i + 1, true
	}
	for {
		e, ok := sk.skip(true, i)
		if !ok {
			return 0, false
		}
		sk.elems = append(sk.elems, e)
		var more bool
		if i, more, ok = afterValue(data, e.end, ']'); !ok {
			return 0, false
		}
		if !more {
			return i, true
		}
	}
}

// skipValue returns the end of the value starting at data[i]: a string,
// an object or array (brackets matched outside strings), or a run of
// other bytes up to a delimiter.
func skipValue(data []byte, i int) (int, bool) {
	if i >= len(data) {
		return 0, false
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end, ok := skipString(data, j)
				if !ok {
					return 0, false
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	}
	j := i
	for j < len(data) && !isSpace(data[j]) && data[j] != ',' && data[j] != '}' && data[j] != ']' {
		j++
	}
	return j, j > i
}

// skipString returns the end of the string whose quote is data[i]: the
// next quote not escaped by the backslashes before it. What is between is
// left to decode.
func skipString(data []byte, i int) (int, bool) {
	for j := i + 1; ; {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return 0, false
		}
		j += k
		n := 0
		for data[j-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			return j + 1, true
		}
		j++
	}
}

// plainScalar is what decode makes of raw, a plain string, an integer
// (as a json.Number, decode keeping numbers as written), true, false or
// null; ok is false for anything else, which is left to decode.
func plainScalar(raw []byte) (v any, ok bool) {
	switch {
	case len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"':
		return plainString(raw)
	case string(raw) == "true":
		return true, true
	case string(raw) == "false":
		return false, true
	case string(raw) == "null":
		return nil, true
	}
	digits := raw
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || (digits[0] == '0' && len(digits) > 1) {
		return nil, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return nil, false
		}
	}
	return json.Number(raw), true
}

// plainString is the value of a quoted string with no escapes and only
// printable ASCII in it; anything else is left to decode (a control
// character makes the string, and the body, invalid JSON).
func plainString(q []byte) (string, bool) {
	s := q[1 : len(q)-1]
	for _, c := range s {
		if c == '\\' || c >= 0x80 || c < 0x20 {
			return "", false
		}
	}
	return string(s), true
}
