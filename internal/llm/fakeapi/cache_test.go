package fakeapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
)

// clock is a settable clock for the server's cache.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// cacheControl is a cache_control value: "" for none, "5m" for the default, "1h".
func cacheControl(ttl string) any {
	switch ttl {
	case "":
		return nil
	case "5m":
		return map[string]any{"type": "ephemeral"}
	}
	return map[string]any{"type": "ephemeral", "ttl": ttl}
}

// text is a text block, with a breakpoint when ttl is not "".
func text(s, ttl string) map[string]any {
	b := map[string]any{"type": "text", "text": s}
	if c := cacheControl(ttl); c != nil {
		b["cache_control"] = c
	}
	return b
}

// cacheReq is a request body: system blocks, then user/assistant turns
// alternating from user, each one text block.
type cacheReq struct {
	model  string
	tools  int    // how many tools; the last gets toolTTL
	tool   string // its breakpoint ttl
	system []map[string]any
	turns  []map[string]any
}

func (r cacheReq) body() string {
	model := r.model
	if model == "" {
		model = "claude-sonnet-4-5"
	}
	body := map[string]any{"model": model, "max_tokens": 100}
	var tools []any
	for i := range r.tools {
		t := map[string]any{"name": "tool_" + string(rune('a'+i)), "description": strings.Repeat("does things. ", 40),
			"input_schema": map[string]any{"type": "object"}}
		if i == r.tools-1 && r.tool != "" {
			t["cache_control"] = cacheControl(r.tool)
		}
		tools = append(tools, t)
	}
	if tools != nil {
		body["tools"] = tools
	}
	if r.system != nil {
		body["system"] = r.system
	}
	var msgs []any
	for i, b := range r.turns {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, map[string]any{"role": role, "content": []any{b}})
	}
	body["messages"] = msgs
	data, _ := json.Marshal(body)
	return string(data)
}

// got is the usage an answer reported.
type got struct {
	In, Read, Write, W5m, W1h int
}

func call(t *testing.T, srv *fakeapi.Server, r cacheReq) got {
	t.Helper()
	status, _, data := post(t, srv, "/v1/messages", apiHeaders, r.body())
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, data)
	}
	var msg struct {
		Usage struct {
			In            int `json:"input_tokens"`
			Read          int `json:"cache_read_input_tokens"`
			Write         int `json:"cache_creation_input_tokens"`
			CacheCreation struct {
				W5m int `json:"ephemeral_5m_input_tokens"`
				W1h int `json:"ephemeral_1h_input_tokens"`
			} `json:"cache_creation"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(data, &msg); err != nil {
		t.Fatal(err)
	}
	u := msg.Usage
	return got{In: u.In, Read: u.Read, Write: u.Write, W5m: u.CacheCreation.W5m, W1h: u.CacheCreation.W1h}
}

// big is a system text of about n tokens (four bytes a token).
func big(n int) string { return strings.Repeat("abc ", n) }

const okScript = `rules: [{times: 0, reply: [{text: ok}]}]`

// step is one call of a cache scenario, after waiting wait on the clock.
type step struct {
	wait time.Duration
	req  cacheReq
	want func(g got) string // "" when g is right, else what is wrong
}

func hitAll(g got) string {
	if g.Read == 0 || g.Write != 0 {
		return "want a read and no write"
	}
	return ""
}

func missAll(g got) string {
	if g.Read != 0 || g.Write == 0 {
		return "want a write and no read"
	}
	return ""
}

func readThenWrite(g got) string {
	if g.Read == 0 || g.Write == 0 {
		return "want a read of the old prefix and a write of the new part"
	}
	return ""
}

func nothingCached(g got) string {
	if g.Read != 0 || g.Write != 0 {
		return "want no cache read or write"
	}
	return ""
}

func TestPromptCache(t *testing.T) {
	sys := big(2000)
	conv := func(ttl string, turns ...string) cacheReq {
		// Longer lifetimes first: the system breakpoint has the same.
		r := cacheReq{system: []map[string]any{text(sys, ttl)}}
		for i, s := range turns {
			b := text(s, "")
			if i == len(turns)-1 {
				b = text(s, ttl)
			}
			r.turns = append(r.turns, b)
		}
		return r
	}
	only := func(ttl string) cacheReq {
		return cacheReq{system: []map[string]any{text(sys, ttl)}, turns: []map[string]any{text("hi", "")}}
	}
	tests := []struct {
		name  string
		opt   fakeapi.Options
		steps []step
	}{
		{"hit", fakeapi.Options{}, []step{
			{0, only("5m"), missAll},
			{time.Minute, only("5m"), hitAll},
		}},
		{"miss on a changed prefix", fakeapi.Options{}, []step{
			{0, only("5m"), missAll},
			{0, cacheReq{system: []map[string]any{text(sys+"x", "5m")}, turns: []map[string]any{text("hi", "")}}, missAll},
		}},
		{"conversation grows: read the old prefix, write the new turn", fakeapi.Options{}, []step{
			{0, conv("5m", "first question"), missAll},
			{0, conv("5m", "first question", "an answer", "second question"), readThenWrite},
		}},
		{"expiry after 5 minutes", fakeapi.Options{}, []step{
			{0, only("5m"), missAll},
			{5*time.Minute + time.Second, only("5m"), missAll},
		}},
		{"every read refreshes the lifetime", fakeapi.Options{}, []step{
			{0, only("5m"), missAll},
			{4 * time.Minute, only("5m"), hitAll},
			{4 * time.Minute, only("5m"), hitAll},
		}},
		{"expiry on the scaled clock", fakeapi.Options{CacheClockScale: 60}, []step{
			{0, only("5m"), missAll},
			{4 * time.Second, only("5m"), hitAll}, // 4 simulated minutes
			{6 * time.Second, only("5m"), missAll},
		}},
		{"idle 10 minutes: a 5-minute entry is gone", fakeapi.Options{}, []step{
			{0, conv("5m", "work"), missAll},
			{10 * time.Minute, conv("5m", "work"), missAll},
		}},
		{"idle 10 minutes: a 1-hour entry is still there", fakeapi.Options{}, []step{
			{0, conv("1h", "work"), func(g got) string {
				if g.W1h == 0 || g.W1h+g.W5m != g.Write {
					return "want a 1-hour write, and the split adding up"
				}
				return ""
			}},
			{10 * time.Minute, conv("1h", "work"), hitAll},
			{59 * time.Minute, conv("1h", "work"), hitAll},
			{61 * time.Minute, conv("1h", "work"), missAll},
		}},
		{"below the minimum nothing is cached", fakeapi.Options{}, []step{
			{0, cacheReq{system: []map[string]any{text(big(900), "5m")}, turns: []map[string]any{text("hi", "")}}, nothingCached},
		}},
		{"the minimum depends on the model", fakeapi.Options{}, []step{
			{0, cacheReq{model: "claude-haiku-4-5", system: []map[string]any{text(sys, "5m")}, turns: []map[string]any{text("hi", "")}}, nothingCached},
			{0, cacheReq{model: "claude-sonnet-4-5", system: []map[string]any{text(sys, "5m")}, turns: []map[string]any{text("hi", "")}}, missAll},
		}},
		{"entries are per model", fakeapi.Options{}, []step{
			{0, cacheReq{model: "claude-sonnet-4-5", system: []map[string]any{text(sys, "5m")}, turns: []map[string]any{text("hi", "")}}, missAll},
			{0, cacheReq{model: "claude-opus-4-1", system: []map[string]any{text(sys, "5m")}, turns: []map[string]any{text("hi", "")}}, missAll},
		}},
		{"disabled", fakeapi.Options{NoPromptCache: true}, []step{
			{0, only("5m"), nothingCached},
			{0, only("5m"), nothingCached},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			tt.opt.Clock = clk.now
			srv := start(t, okScript, tt.opt)
			for i, s := range tt.steps {
				clk.advance(s.wait)
				g := call(t, srv, s.req)
				if msg := s.want(g); msg != "" {
					t.Errorf("call %d: %s; got %+v", i+1, msg, g)
				}
				if g.W5m+g.W1h != g.Write {
					t.Errorf("call %d: cache_creation split %d+%d does not add up to %d", i+1, g.W5m, g.W1h, g.Write)
				}
			}
		})
	}
}

// TestCacheFiguresAddUp: read + write + input is what the call costs with
// the simulation off, so the two runs can be compared by price alone.
func TestCacheFiguresAddUp(t *testing.T) {
	r := cacheReq{tools: 3, tool: "5m", system: []map[string]any{text(big(1500), "5m"), text("You are teammate 'a'.", "")},
		turns: []map[string]any{text("one", ""), text("two", ""), text(big(300), "5m")}}
	off := call(t, start(t, okScript, fakeapi.Options{NoPromptCache: true}), r)
	srv := start(t, okScript, fakeapi.Options{})
	first := call(t, srv, r)
	second := call(t, srv, r)
	for _, g := range []got{first, second} {
		if sum := g.In + g.Read + g.Write; sum != off.In {
			t.Errorf("input %d + read %d + write %d = %d, want %d (the uncached input)", g.In, g.Read, g.Write, sum, off.In)
		}
	}
	if first.Read != 0 || second.Write != 0 || second.Read != first.Write {
		t.Errorf("first %+v, second %+v: want the second to read all the first wrote", first, second)
	}
}

// TestFourBreakpoints: each breakpoint past the cached prefix writes its
// own segment; a shared head is read by a request that differs after it.
func TestFourBreakpoints(t *testing.T) {
	clk := newClock()
	srv := start(t, okScript, fakeapi.Options{Clock: clk.now})
	four := cacheReq{tools: 4, tool: "5m",
		system: []map[string]any{text(big(1200), "5m"), text("You are teammate 'a'.", "")},
		turns:  []map[string]any{text(big(200), "5m"), text("an answer", ""), text("more", "5m")}}
	g := call(t, srv, four)
	if g.Read != 0 || g.Write == 0 {
		t.Fatalf("first call %+v: want everything written", g)
	}
	var points [][]bool
	for _, p := range srv.Requests()[0].Cache {
		points = append(points, []bool{p.Read, p.Write})
	}
	// The tools alone are below the minimum; the system breakpoint writes
	// tools and system; each message breakpoint writes its segment.
	if diff := cmp.Diff([][]bool{{false, false}, {false, true}, {false, true}, {false, true}}, points); diff != "" {
		t.Errorf("breakpoints [read, write] (-want +got):\n%s", diff)
	}
	// Another teammate: same tools and system block, its own identity and
	// conversation. It reads the shared head and writes the rest.
	other := four
	other.system = []map[string]any{text(big(1200), "5m"), text("You are teammate 'b'.", "")}
	other.turns = []map[string]any{text("b's own work", "5m")}
	g2 := call(t, srv, other)
	head := srv.Requests()[0].Cache[1].Tokens
	if g2.Read != head || g2.Write == 0 {
		t.Errorf("second teammate %+v: want the shared head (%d tokens) read and its own part written", g2, head)
	}
	entries := srv.CacheEntries()
	var shared *fakeapi.CacheEntry
	for i := range entries {
		if entries[i].Tokens == head {
			shared = &entries[i]
		}
	}
	if shared == nil || shared.Writes != 1 || shared.Reads != 1 {
		t.Errorf("shared entry %+v: want written once, read once", shared)
	}

	// A fifth breakpoint is refused.
	five := four
	five.turns = []map[string]any{text("a", "5m"), text("b", "5m"), text("c", "5m")}
	status, _, data := post(t, srv, "/v1/messages", apiHeaders, five.body())
	if status != http.StatusBadRequest || !strings.Contains(string(data), "A maximum of 4 blocks with cache_control") {
		t.Errorf("five breakpoints: %d %s", status, data)
	}
}

func TestCacheControlChecked(t *testing.T) {
	srv := start(t, okScript, fakeapi.Options{})
	tests := []struct {
		name string
		req  cacheReq
		want string
	}{
		{"1h after 5m", cacheReq{system: []map[string]any{text("s", "5m")}, turns: []map[string]any{text("u", "1h")}}, "must not come after one with ttl '5m'"},
		{"unknown ttl", cacheReq{system: []map[string]any{text("s", "10m")}, turns: []map[string]any{text("u", "")}}, "cache_control.ttl: Input should be '5m' or '1h'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, data := post(t, srv, "/v1/messages", apiHeaders, tt.req.body())
			if status != http.StatusBadRequest || !strings.Contains(string(data), tt.want) {
				t.Errorf("got %d %s, want 400 with %q", status, data, tt.want)
			}
		})
	}
	// 1h before 5m is fine.
	ok := cacheReq{system: []map[string]any{text("s", "1h")}, turns: []map[string]any{text("u", "5m")}}
	if status, _, data := post(t, srv, "/v1/messages", apiHeaders, ok.body()); status != http.StatusOK {
		t.Errorf("1h then 5m: %d %s", status, data)
	}
}

// TestScriptUsageWins: a rule that fixes usage keeps its figures even when
// the cache would say otherwise.
func TestScriptUsageWins(t *testing.T) {
	srv := start(t, `rules: [{times: 0, usage: {input_tokens: 7}, reply: [{text: ok}]}]`, fakeapi.Options{})
	r := cacheReq{system: []map[string]any{text(big(2000), "5m")}, turns: []map[string]any{text("hi", "")}}
	for i := range 2 {
		if g := call(t, srv, r); g != (got{In: 7}) {
			t.Errorf("call %d: %+v, want the script's input_tokens 7 and no cache figures", i+1, g)
		}
	}
}

// TestCacheEntries: an entry counts its writes (again after it expired),
// its reads and the agents that used it; expired entries are not listed.
func TestCacheEntries(t *testing.T) {
	clk := newClock()
	srv := start(t, okScript, fakeapi.Options{Clock: clk.now})
	req := func(agent string) cacheReq {
		return cacheReq{system: []map[string]any{text(big(2000), "5m"), text("You are teammate '"+agent+"'.", "")},
			turns: []map[string]any{text("hi", "")}}
	}
	call(t, srv, req("a"))
	clk.advance(6 * time.Minute)
	if n := len(srv.CacheEntries()); n != 0 {
		t.Errorf("%d entries listed after expiry, want 0", n)
	}
	call(t, srv, req("a"))
	call(t, srv, req("b"))
	got := srv.CacheEntries()
	if len(got) != 1 {
		t.Fatalf("entries %+v, want one", got)
	}
	e := got[0]
	want := fakeapi.CacheEntry{Key: e.Key, Model: "claude-sonnet-4-5", Tokens: e.Tokens, TTL: fakeapi.TTL5m,
		Expires: clk.now().Add(fakeapi.TTL5m), Writes: 2, Reads: 1, Agents: []string{"a", "b"}}
	if diff := cmp.Diff(want, e); diff != "" {
		t.Errorf("entry (-want +got):\n%s", diff)
	}
}
