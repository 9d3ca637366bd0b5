package fakeapi

import (
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// The prompt cache, simulated as the Messages API documents it:
//
//   - The request is read as one sequence of blocks: tools, then system
//     blocks, then the content blocks of each message. A block carrying
//     cache_control is a breakpoint; the prefix up to and including it is
//     what gets cached, per model.
//   - An entry lives 5 minutes ("ttl": "5m", the default) or an hour
//     ("ttl": "1h") from its last use: every read refreshes it.
//   - A request reads the longest cached prefix found at one of its
//     breakpoints or at a block boundary up to lookback blocks before one;
//     each breakpoint past that prefix writes a new entry, billed for the
//     tokens between the previous cached point and itself at its own ttl,
//     if the whole prefix reaches the model's minimum cacheable length.
//   - input_tokens is the rest: the tokens after the last cached point.
//
// Tokens are the fake's usual estimate, four bytes of JSON a token, so the
// three figures add up to the input_tokens the fake reports with caching
// off.

// Cache lifetimes.
const (
	TTL5m = 5 * time.Minute
	TTL1h = time.Hour
)

// lookback is how many blocks before a breakpoint are also checked for a
// hit (the API documents "about 20").
const lookback = 20

// minCacheable lists the minimum cacheable prefix of model families, by
// model name prefix; the longest matching prefix wins and other models
// take defaultMinCacheable.
var minCacheable = map[string]int{
	"claude-opus-4-5":  4096,
	"claude-opus-4-6":  4096,
	"claude-haiku-4-5": 4096,
	"claude-3-5-haiku": 2048,
	"claude-3-haiku":   2048,
}

const defaultMinCacheable = 1024

// MinCacheableTokens returns the minimum cacheable prefix of model, in
// tokens: shorter prefixes are never cached.
func MinCacheableTokens(model string) int {
	best, n := "", defaultMinCacheable
	for prefix, tokens := range minCacheable {
		if strings.HasPrefix(model, prefix) && len(prefix) > len(best) {
			best, n = prefix, tokens
		}
	}
	return n
}

// cacheTTL reads one cache_control value.
func cacheTTL(cc any) (time.Duration, error) {
	m, ok := cc.(map[string]any)
	if !ok {
		return 0, errors.New("cache_control: Input should be a valid dictionary")
	}
	if m["type"] != "ephemeral" {
		return 0, fmt.Errorf("cache_control.type: Input should be 'ephemeral', got %s", jsonText(m["type"]))
	}
	switch t := m["ttl"].(type) {
	case nil:
		return TTL5m, nil
	case string:
		switch t {
		case "5m":
			return TTL5m, nil
		case "1h":
			return TTL1h, nil
		}
	}
	return 0, fmt.Errorf("cache_control.ttl: Input should be '5m' or '1h', got %s", jsonText(m["ttl"]))
}

// checkTTLOrder refuses a 1-hour breakpoint after a 5-minute one: the API
// requires longer lifetimes first.
func checkTTLOrder(blocks []cacheBlock) error {
	var prev time.Duration
	for _, b := range blocks {
		if b.ttl == 0 {
			continue
		}
		if b.ttl > prev && prev != 0 {
			return fmt.Errorf("%s: a cache_control with ttl '1h' must not come after one with ttl '5m' (longer lifetimes first: tools, then system, then messages)", b.path())
		}
		prev = b.ttl
	}
	return nil
}

// cacheBlock is one block of the request in cache order.
type cacheBlock struct {
	section string         // "tools", "system" or "messages"
	i, j    int            // its place in the section: "tools.2", "system.0", "messages.3.content.1"; -1 where the path stops
	role    string         // a message's role, on the first block of each message
	value   any            // the block as decoded
	ttl     time.Duration  // 0: not a breakpoint
	owner   map[string]any // the object holding cache_control, nil for a string
	// digest is the SHA-256 of its canonical JSON, of size bytes, when
	// made beforehand (digested).
	digest   [sha256.Size]byte
	size     int
	digested bool
}

// path names the block as the API's errors do.
func (b cacheBlock) path() string {
	switch {
	case b.i < 0:
		return b.section
	case b.section != "messages":
		return fmt.Sprintf("%s.%d", b.section, b.i)
	case b.j < 0:
		return fmt.Sprintf("messages.%d.content", b.i)
	}
	return fmt.Sprintf("messages.%d.content.%d", b.i, b.j)
}

// canonicalOn asks the block lists below to digest each block's canonical
// JSON as they list it.
const canonicalOn = true

// newBlock is the cache's view of one block.
func newBlock(section string, i, j int, role string, v any, canon bool) cacheBlock {
	b := cacheBlock{section: section, i: i, j: j, role: role, value: v}
	if m, ok := v.(map[string]any); ok {
		b.owner = m
		if cc, ok := m["cache_control"]; ok && cc != nil {
			b.ttl, _ = cacheTTL(cc)
		}
	}
	if canon {
		b.digestWith(nil)
	}
	return b
}

// blocksOf lists a valid request's blocks in the order the cache reads
// them.
func blocksOf(body map[string]any) []cacheBlock {
	out := toolBlocks(body["tools"], false)
	out = append(out, systemBlocks(body["system"], false)...)
	msgs, _ := body["messages"].([]any)
	for i, e := range msgs {
		m, _ := e.(map[string]any)
		out = append(out, messageBlocks(i, m, false)...)
	}
	return out
}

func toolBlocks(tools any, canon bool) []cacheBlock {
	list, _ := tools.([]any)
	out := make([]cacheBlock, 0, len(list))
	for i, t := range list {
		out = append(out, newBlock("tools", i, -1, "", t, canon))
	}
	return out
}

func systemBlocks(system any, canon bool) []cacheBlock {
	switch sys := system.(type) {
	case string:
		return []cacheBlock{newBlock("system", -1, -1, "", sys, canon)}
	case []any:
		out := make([]cacheBlock, 0, len(sys))
		for i, b := range sys {
			out = append(out, newBlock("system", i, -1, "", b, canon))
		}
		return out
	}
	return nil
}

// messageBlocks lists the blocks of message i.
func messageBlocks(i int, m map[string]any, canon bool) []cacheBlock {
	role, _ := m["role"].(string)
	switch c := m["content"].(type) {
	case string:
		return []cacheBlock{newBlock("messages", i, -1, role, c, canon)}
	case []any:
		out := make([]cacheBlock, 0, len(c))
		for j, b := range c {
			r := ""
			if j == 0 {
				r = role
			}
			out = append(out, newBlock("messages", i, j, r, b, canon))
		}
		return out
	}
	return nil
}

// prefixPoint is the cache's view of the prefix ending at one block.
type prefixPoint struct {
	key    string // model + hash of the prefix, cache_control left out
	tokens int    // estimated tokens of the prefix
	ttl    time.Duration
}

// digestWith digests the block's canonical JSON, made in buf, and returns
// buf for reuse.
func (b *cacheBlock) digestWith(buf []byte) []byte {
	buf = canonicalTo(buf[:0], *b)
	b.digest = sha256.Sum256(buf)
	b.size = len(buf)
	b.digested = true
	return buf
}

// prefixes hashes every prefix of blocks: the hash of a prefix is that of
// the model and of each block's digest in turn, with its section and, on
// a message's first block, its role. A block's digest is of its canonical
// JSON, cache_control left out, so moving a breakpoint does not change
// what it marks; a block read through the memo comes digested, so the
// work per call is 32 bytes a block rather than the history's bytes. Only
// the prefixes a lookup can ask for (up to lookback blocks before a
// breakpoint) get a key; the others are counted for their tokens alone.
func prefixes(model string, blocks []cacheBlock) []prefixPoint {
	pts, _ := chainPrefixes(model, blocks, nil)
	return pts
}

// chain is what prefixes learned of one call's blocks, for a later call
// whose blocks start with the same ones: an agent's next call, with the
// breakpoint moved to its new last message (the digests leave
// cache_control out, so the old blocks still match). Its hashes are
// resumed after them instead of run again over every block.
type chain struct {
	model  string
	links  []chainLink
	points []prefixPoint // keys where the call needed one, and on its last lookback blocks
	size   int           // bytes of the blocks' canonical JSON
	state  []byte        // the hash after the last block (sha256's MarshalBinary)
}

// chainLink is what of a block goes into the hash.
type chainLink struct {
	section, role string
	digest        [sha256.Size]byte
}

// chainPrefixes is prefixes, resumed after prev's blocks when blocks
// start with them, and the chain of this call.
func chainPrefixes(model string, blocks []cacheBlock, prev *chain) ([]prefixPoint, *chain) {
	keyed := make([]bool, len(blocks))
	for i, b := range blocks {
		if b.ttl > 0 {
			for j := max(0, i-lookback); j <= i; j++ {
				keyed[j] = true
			}
		}
	}
	// The next call's last breakpoint looks back into this call's last
	// blocks: they are keyed in the chain.
	kept := func(i int) bool { return keyed[i] || i >= len(blocks)-lookback }
	h := sha256.New()
	out := make([]prefixPoint, len(blocks))
	next := &chain{model: model, links: make([]chainLink, len(blocks)), points: make([]prefixPoint, len(blocks))}
	n := resumable(model, blocks, keyed, prev)
	if n > 0 {
		if u, ok := h.(encoding.BinaryUnmarshaler); !ok || u.UnmarshalBinary(prev.state) != nil {
			n = 0
			h.Reset()
		}
	}
	if n > 0 {
		copy(next.links, prev.links)
		copy(next.points, prev.points)
		for i := range n {
			out[i] = prefixPoint{tokens: prev.points[i].tokens, ttl: blocks[i].ttl}
			if keyed[i] {
				out[i].key = prev.points[i].key
			}
			next.points[i].ttl = blocks[i].ttl
		}
		next.size = prev.size
	} else {
		h.Write([]byte(model))
	}
	var buf, sum, link []byte
	for i := n; i < len(blocks); i++ {
		b := blocks[i]
		if !b.digested {
			buf = b.digestWith(buf)
		}
		next.size += b.size
		link = link[:0]
		if b.role != "" {
			link = append(append(link, "\x00message:"...), b.role...)
		}
		link = append(append(append(link, 0), b.section...), 0)
		link = append(link, b.digest[:]...)
		h.Write(link)
		out[i] = prefixPoint{tokens: next.size / 4, ttl: b.ttl}
		next.links[i] = chainLink{section: b.section, role: b.role, digest: b.digest}
		next.points[i] = out[i]
		if kept(i) {
			sum = h.Sum(sum[:0])
			next.points[i].key = hex.EncodeToString(sum)
			if keyed[i] {
				out[i].key = next.points[i].key
			}
		}
	}
	if m, ok := h.(encoding.BinaryMarshaler); ok {
		if st, err := m.MarshalBinary(); err == nil {
			next.state = st
			return out, next
		}
	}
	return out, nil
}

// resumable is how many of blocks' first blocks are prev's, all of them,
// or 0: every key this call needs among them must be in prev's chain.
func resumable(model string, blocks []cacheBlock, keyed []bool, prev *chain) int {
	if prev == nil || prev.model != model || len(prev.links) == 0 || len(prev.links) > len(blocks) {
		return 0
	}
	for i := range prev.links {
		b, l := &blocks[i], &prev.links[i]
		if !b.digested || b.digest != l.digest || b.section != l.section || b.role != l.role {
			return 0
		}
		if keyed[i] && prev.points[i].key == "" {
			return 0
		}
	}
	return len(prev.links)
}

// canonicalTo appends a block's JSON without its cache_control, keys
// sorted, to buf.
func canonicalTo(buf []byte, b cacheBlock) []byte {
	if b.owner != nil {
		return appendCanonical(buf, b.owner, "cache_control")
	}
	return appendCanonical(buf, b.value, "")
}

// CachePoint is what one breakpoint of a call did in the simulated cache.
type CachePoint struct {
	// Key identifies the prefix (model and bytes up to the breakpoint):
	// two calls with the same key share one cache entry.
	Key string
	// Path is the breakpoint's block: "tools.3", "system.0",
	// "messages.2.content.1".
	Path   string
	Tokens int           // tokens of the whole prefix
	TTL    time.Duration // what the breakpoint asked for
	Read   bool          // the prefix was read from the cache
	Write  bool          // the call wrote it to the cache
}

// CacheUsage is how a call was billed by the simulated cache.
type CacheUsage struct {
	Input   int // tokens after the last cached point
	Read    int // tokens read from the cache
	Write5m int // tokens written with a 5-minute lifetime
	Write1h int // tokens written with a 1-hour lifetime
	Points  []CachePoint
}

// CacheEntry is one live entry of the simulated cache.
type CacheEntry struct {
	Key     string
	Model   string
	Tokens  int
	TTL     time.Duration
	Expires time.Time // on the simulated clock
	Writes  int       // times the prefix was written (the first time, and again after each expiry)
	Reads   int       // calls that read it
	Agents  []string  // agents whose calls wrote or read it, sorted
}

// promptCache is the server's simulated cache.
type promptCache struct {
	mu      sync.Mutex
	entries map[string]*cacheEntry
}

type cacheEntry struct {
	CacheEntry
	agents map[string]bool
}

// use bills a call at simulated time now and updates the cache: total is
// the input the call would cost uncached. prev is the chain of a call
// whose blocks this one's may start with (nil: none); the chain returned
// is this call's, for the next.
func (c *promptCache) use(model, agent string, blocks []cacheBlock, total int, now time.Time, prev *chain) (CacheUsage, *chain) {
	pts, next := chainPrefixes(model, blocks, prev)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]*cacheEntry{}
	}
	// An expired entry stays in the map, as absent, so that a prefix
	// written again keeps its counts.
	live := func(key string) *cacheEntry {
		e := c.entries[key]
		if e == nil || !now.Before(e.Expires) {
			return nil
		}
		return e
	}
	var bps []int
	for i, p := range pts {
		if p.ttl > 0 {
			bps = append(bps, i)
		}
	}
	// The longest cached prefix at or shortly before a breakpoint.
	hit := -1
	for _, bp := range bps {
		for j := bp; j >= 0 && j >= bp-lookback && j > hit; j-- {
			if live(pts[j].key) != nil {
				hit = j
				break
			}
		}
	}
	var u CacheUsage
	covered := 0
	refresh := func(e *cacheEntry, ttl time.Duration) {
		// Every read restarts the lifetime; a longer one asked for now is
		// kept from now on.
		e.TTL = max(e.TTL, ttl)
		e.Expires = now.Add(e.TTL)
		e.Reads++
		e.agents[agent] = true
	}
	if hit >= 0 {
		covered = pts[hit].tokens
		u.Read = covered
		refresh(c.entries[pts[hit].key], pts[hit].ttl)
	}
	minTokens := MinCacheableTokens(model)
	for _, bp := range bps {
		p := pts[bp]
		cp := CachePoint{Key: p.key, Path: blocks[bp].path(), Tokens: p.tokens, TTL: p.ttl}
		switch {
		case bp <= hit:
			cp.Read = true
			if e := live(p.key); e != nil && bp < hit {
				refresh(e, p.ttl)
			}
		case p.tokens <= covered:
			// Nothing new before it (empty blocks): nothing to write.
		case p.tokens < minTokens:
			// Too short to cache: billed as input, or as part of a later
			// breakpoint's write.
		default:
			seg := p.tokens - covered
			if p.ttl >= TTL1h {
				u.Write1h += seg
			} else {
				u.Write5m += seg
			}
			covered = p.tokens
			cp.Write = true
			e := c.entries[p.key]
			if e == nil {
				e = &cacheEntry{CacheEntry: CacheEntry{Key: p.key, Model: model, Tokens: p.tokens}, agents: map[string]bool{}}
				c.entries[p.key] = e
			}
			e.TTL, e.Expires = p.ttl, now.Add(p.ttl)
			e.Writes++
			e.agents[agent] = true
		}
		u.Points = append(u.Points, cp)
	}
	u.Input = max(0, total-u.Read-u.Write5m-u.Write1h)
	return u, next
}

// snapshot lists the live entries at now, longest prefix first.
func (c *promptCache) snapshot(now time.Time) []CacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []CacheEntry
	for _, e := range c.entries {
		if !now.Before(e.Expires) {
			continue
		}
		ce := e.CacheEntry
		ce.Agents = nil
		for a := range e.agents {
			ce.Agents = append(ce.Agents, a)
		}
		sort.Strings(ce.Agents)
		out = append(out, ce)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Tokens != out[j].Tokens {
			return out[i].Tokens > out[j].Tokens
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// simClock is the server's clock for the cache: the real (or injected)
// clock, sped up by scale from the server's start.
type simClock struct {
	now   func() time.Time
	scale float64
	start time.Time
}

func (k simClock) at() time.Time {
	t := k.now()
	if k.scale == 1 {
		return t
	}
	return k.start.Add(time.Duration(float64(t.Sub(k.start)) * k.scale))
}
