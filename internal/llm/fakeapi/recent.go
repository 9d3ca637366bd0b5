package fakeapi

import (
	"bytes"
	"slices"
	"sync"
	"sync/atomic"
)

// The memo saves decoding a message twice, but every call was still
// scanned whole to find its messages, and each message's bytes were
// hashed to find its part: about 70 µs of a 40 KB call, half the server's
// cost. An agent's call is its last call with a round added, so its body
// starts, byte for byte, as a body the server split a moment ago, and ends
// as it (the system prompt and tools come after the messages). The server
// keeps the splits of the last bodies it read: where each top-level value
// and each message lay, and the parts made of them. A new body is compared
// with the one it shares the longest start with; a value wholly inside
// the common start, or wholly inside the common end, is neither scanned
// again nor looked up in the memo. Only values that begin with a quote or
// a bracket are taken: their end depends on their own bytes alone, where a
// number's depends on what follows it.

// What the server keeps of recent splits.
const (
	recentBodies = 64
	recentBytes  = 32 << 20
)

// split is where the values of one body lay.
type split struct {
	body    []byte // never changed once read
	members []span // the top-level values, in order
	elems   []span // the messages, in order
	// chain is the prompt cache's hashes of the call, once billed.
	chain atomic.Pointer[chain]
}

// span is one value of a split body, with what the memo made of it.
type span struct {
	start, end int
	msg        *msgPart  // a message
	list       *listPart // a tools list or system prompt
}

// recentSplits holds the last splits, oldest first.
type recentSplits struct {
	mu    sync.Mutex
	list  []*split
	bytes int
}

// against returns a skipper for body that reuses the recent split sharing
// the longest start with it.
func (r *recentSplits) against(body []byte) *skipper {
	sk := &skipper{body: body}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.list) - 1; i >= 0; i-- {
		sp := r.list[i]
		if n := commonPrefix(body, sp.body); n > sk.same {
			sk.from, sk.same = sp, n
		}
	}
	if sk.from != nil {
		sk.tail = commonSuffix(body, sk.from.body)
		sk.members = make([]span, 0, len(sk.from.members))
		sk.elems = make([]span, 0, len(sk.from.elems)+4)
	}
	return sk
}

// keep adds the split sk recorded, in place of the one it was read against:
// that conversation has moved on.
func (r *recentSplits) keep(sk *skipper) *split {
	sp := &split{body: sk.body, members: sk.members, elems: sk.elems}
	r.mu.Lock()
	defer r.mu.Unlock()
	if i := slices.Index(r.list, sk.from); sk.from != nil && i >= 0 {
		r.bytes -= len(sk.from.body)
		r.list = slices.Delete(r.list, i, i+1)
	}
	if len(sp.body) > recentBytes/4 {
		return sp // a body this large would crowd out every other
	}
	r.list = append(r.list, sp)
	r.bytes += len(sp.body)
	for len(r.list) > recentBodies || r.bytes > recentBytes {
		r.bytes -= len(r.list[0].body)
		r.list[0] = nil
		r.list = r.list[1:]
	}
	return sp
}

// commonPrefix is the length of the longest common start of a and b.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	const chunk = 512
	i := 0
	for i+chunk <= n && bytes.Equal(a[i:i+chunk], b[i:i+chunk]) {
		i += chunk
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// commonSuffix is the length of the longest common end of a and b.
func commonSuffix(a, b []byte) int {
	n := min(len(a), len(b))
	const chunk = 512
	i := 0
	for i+chunk <= n && bytes.Equal(a[len(a)-i-chunk:len(a)-i], b[len(b)-i-chunk:len(b)-i]) {
		i += chunk
	}
	for i < n && a[len(a)-1-i] == b[len(b)-1-i] {
		i++
	}
	return i
}

// skipper finds the ends of values for the splitter, from the split it
// is read against where it can, and records the split of its body.
type skipper struct {
	body []byte
	from *split
	same int // body[:same] is from.body[:same]
	tail int // body ends as from.body does, over tail bytes
	// Cursors into from's spans: the splitter asks in order.
	km, ke int

	members, elems []span
}

// reused finds among from's messages (elems) or top-level values the span
// that starts at i of the body, wholly inside the common start or end,
// shifted to the body's offsets.
func (sk *skipper) reused(elems bool, i int) (span, bool) {
	if sk.from == nil || i >= len(sk.body) {
		return span{}, false
	}
	switch sk.body[i] {
	case '"', '{', '[':
	default:
		return span{}, false
	}
	list, k := sk.from.members, &sk.km
	if elems {
		list, k = sk.from.elems, &sk.ke
	}
	if i < sk.same {
		for *k < len(list) && list[*k].start < i {
			*k++
		}
		if *k < len(list) && list[*k].start == i && list[*k].end <= sk.same {
			return list[*k], true
		}
		return span{}, false
	}
	// Past the common start: a value of the common end sits at the same
	// distance from the end of both bodies.
	shift := len(sk.body) - len(sk.from.body)
	at := i - shift
	if at < len(sk.from.body)-sk.tail {
		return span{}, false
	}
	j, found := slices.BinarySearchFunc(list, at, func(s span, at int) int { return s.start - at })
	if !found {
		return span{}, false
	}
	s := list[j]
	s.start, s.end = i, s.end+shift
	return s, true
}

// skip returns the span of the value at i: a message (elems) or a
// top-level value.
func (sk *skipper) skip(elems bool, i int) (span, bool) {
	if s, ok := sk.reused(elems, i); ok {
		return s, true
	}
	end, ok := skipValue(sk.body, i)
	return span{start: i, end: end}, ok
}
