package fakeapi

import (
	"fmt"
	"strings"
	"testing"
)

// memoServer is a server whose memo the tests feed.
func memoServer(t testing.TB) *Server {
	t.Helper()
	s, err := ParseScript([]byte("rules:\n  - agent: team-lead\n    reply: [{text: ok}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	return New(s, Options{})
}

// readBoth validates body plainly and through s's memo, and fails the
// test where the two differ: the error, or what the server reads of a
// valid request (model, stream, system, latest user text, agent, and every
// block as the prompt cache sees it). It reports whether the memo read the
// body (rather than sending it the plain way).
func readBoth(t testing.TB, s *Server, body []byte) (fast bool) {
	t.Helper()
	plain, plainErr := validate(body)
	p, raw, decodeErr := s.read(body)
	fast = p != nil
	got, err := validateDecoded(raw, decodeErr, p)
	if fmt.Sprint(err) != fmt.Sprint(plainErr) {
		t.Fatalf("body %.300s\nmemo error %v\nplain error %v", body, err, plainErr)
	}
	if err != nil {
		return fast
	}
	if got.model != plain.model || got.stream != plain.stream || got.system != plain.system || got.lastUser != plain.lastUser {
		t.Fatalf("body %.300s\nmemo read %+v\nplain read %+v", body, got, plain)
	}
	if p != nil && p.sys != nil {
		obj := raw.(map[string]any)
		if a := s.agentIn(obj["system"]); p.sys.agent != a {
			t.Fatalf("memo agent %q, plain %q", p.sys.agent, a)
		}
	}
	if len(got.blocks) != len(plain.blocks) {
		t.Fatalf("memo has %d blocks, plain %d", len(got.blocks), len(plain.blocks))
	}
	for i := range got.blocks {
		g, w := got.blocks[i], plain.blocks[i]
		w.digestWith(nil)
		if !g.digested {
			g.digestWith(nil)
		}
		if g.path() != w.path() || g.section != w.section || g.role != w.role || g.ttl != w.ttl || g.digest != w.digest || g.size != w.size {
			t.Fatalf("block %d: memo %s %q %s %x %d, plain %s %q %s %x %d", i,
				g.path(), g.role, g.ttl, g.digest[:4], g.size, w.path(), w.role, w.ttl, w.digest[:4], w.size)
		}
	}
	want := prefixes(plain.model, plain.blocks)
	if got := prefixes(got.model, got.blocks); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("prefixes differ:\nmemo  %v\nplain %v", got, want)
	}
	if p != nil {
		// As the server bills it: resumed from the chain of the body it
		// was split against.
		var prev *chain
		if p.from != nil {
			prev = p.from.chain.Load()
		}
		resumed, next := chainPrefixes(got.model, got.blocks, prev)
		if fmt.Sprint(resumed) != fmt.Sprint(want) {
			t.Fatalf("prefixes resumed from a chain of %d blocks differ:\nresumed %v\nplain   %v", len(prev.links), resumed, want)
		}
		if next != nil {
			p.split.chain.Store(next)
		}
	}
	return fast
}

// conversation is an agent's request after turns rounds of a tool call.
func conversation(turns int, extra ...string) string {
	msgs := []string{`{"role":"user","content":"Start."}`}
	for i := 1; i <= turns; i++ {
		msgs = append(msgs,
			fmt.Sprintf(`{"role":"assistant","content":[{"type":"text","text":"Turn %d."},{"type":"tool_use","id":"t%d","name":"bash","input":{"command":"echo %d"}}]}`, i, i, i),
			fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":"%d\n"}]}`, i, i))
	}
	fields := append([]string{
		`"model":"claude-sonnet-4-5"`, `"max_tokens":64`, `"stream":true`,
		`"messages":[` + strings.Join(msgs, ",") + `]`,
		`"system":[{"type":"text","text":"You are 'team-lead', an agent."},{"type":"text","text":"Rules.","cache_control":{"type":"ephemeral","ttl":"1h"}}]`,
		`"tools":[{"name":"bash","input_schema":{"type":"object"}},{"name":"read","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}]`,
	}, extra...)
	return "{" + strings.Join(fields, ",") + "}"
}

// agentCall is a valid request of an agent after turns rounds of a tool
// call, marked for the cache as troupe marks it: the tools, the system
// prompt and the last message, which moves on every call.
func agentCall(turns int) string {
	msgs := []string{`{"role":"user","content":[{"type":"text","text":"Start.","cache_control":{"type":"ephemeral"}}]}`}
	for i := 1; i <= turns; i++ {
		cc := ""
		if i == turns {
			msgs[0] = `{"role":"user","content":"Start."}`
			cc = `,"cache_control":{"type":"ephemeral"}`
		}
		msgs = append(msgs,
			fmt.Sprintf(`{"role":"assistant","content":[{"type":"text","text":"Turn %d."},{"type":"tool_use","id":"t%d","name":"bash","input":{"command":"echo %d"}}]}`, i, i, i),
			fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":"%d\n"%s}]}`, i, i, cc))
	}
	return `{"max_tokens":64,"messages":[` + strings.Join(msgs, ",") + `],"model":"claude-sonnet-4-5","stream":true,` +
		`"system":[{"type":"text","text":"You are 'team-lead', an agent."},{"type":"text","text":"Rules.","cache_control":{"type":"ephemeral"}}],` +
		`"tools":[{"name":"bash","input_schema":{"type":"object"}},{"name":"read","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}]}`
}

// TestMemoReadsAnAgentsCalls: an agent's growing conversation reads the
// same through the memo as plainly, and the memo keeps one part per
// distinct message, tools list and system prompt.
func TestMemoReadsAnAgentsCalls(t *testing.T) {
	s := memoServer(t)
	const turns = 30
	for i := 0; i <= turns; i++ {
		if !readBoth(t, s, []byte(conversation(i))) {
			t.Fatalf("call %d was not read through the memo", i)
		}
	}
	s.memo.mu.Lock()
	defer s.memo.mu.Unlock()
	if n := len(s.memo.messages.cur) + len(s.memo.messages.old); n != 1+2*turns {
		t.Errorf("the memo holds %d messages, want %d", n, 1+2*turns)
	}
	if len(s.memo.tools.cur) != 1 || len(s.memo.system.cur) != 1 {
		t.Errorf("the memo holds %d tools lists and %d system prompts, want 1 and 1", len(s.memo.tools.cur), len(s.memo.system.cur))
	}
}

// TestMemoErrorsAsPlain: requests whose fault lies across messages the
// memo has already checked alone are refused with the plain error.
func TestMemoErrorsAsPlain(t *testing.T) {
	s := memoServer(t)
	readBoth(t, s, []byte(conversation(3)))
	cc := func(n int) string {
		var b []string
		for i := range n {
			b = append(b, fmt.Sprintf(`{"type":"text","text":"b%d","cache_control":{"type":"ephemeral"}}`, i))
		}
		return strings.Join(b, ",")
	}
	user := `{"role":"user","content":"Start."}`
	a1 := `{"role":"assistant","content":[{"type":"text","text":"Turn 1."},{"type":"tool_use","id":"t1","name":"bash","input":{"command":"echo 1"}}]}`
	r1 := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"1\n"}]}`
	for _, msgs := range []string{
		user + "," + a1 + "," + r1 + "," + a1 + "," + r1, // t1 twice: each message passed alone
		user + "," + r1,              // a result with no call before it
		a1 + "," + r1,                // starts with the assistant
		user + "," + a1,              // ends with the assistant
		user + "," + user,            // two users in a row
		user + "," + a1 + "," + user, // the call never answered
		`{"role":"user","content":[` + cc(3) + `]},{"role":"assistant","content":"x"},{"role":"user","content":[` + cc(2) + `]}`, // five cache_control in all
		`{"role":"user","content":[{"type":"text","text":"x","cache_control":{"type":"bogus"}}]}`,
		`{"role":"user","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}]},{"role":"assistant","content":"y"},{"role":"user","content":[{"type":"text","text":"z","cache_control":{"type":"ephemeral","ttl":"1h"}}]}`,
		`{"role":"user","content":"x"},"not a message",{"role":"user","content":"y"}`,
		`{"role":"robot","content":"x"}`,
	} {
		for range 2 { // the second time, every part is in the memo
			readBoth(t, s, []byte(`{"model":"m","max_tokens":5,"messages":[`+msgs+`]}`))
		}
	}
	// A tools list checked once counts its cache_control with the rest.
	tool := func(name, cc string) string {
		return `{"name":"` + name + `","input_schema":{"type":"object"}` + cc + `}`
	}
	on := `,"cache_control":{"type":"ephemeral"}`
	for _, tools := range []string{
		tool("a", on) + "," + tool("b", on), // with three in the messages: five in all
		tool("a", `,"cache_control":{"type":"bogus"}`),
		tool("a", "") + "," + tool("a", ""), // a name twice
		tool("a b", ""),
	} {
		for range 2 {
			readBoth(t, s, []byte(`{"model":"m","max_tokens":5,"tools":[`+tools+`],"messages":[{"role":"user","content":[`+cc(3)+`]}]}`))
		}
	}
}

// TestMemoSplitter: bodies the splitter cannot read plainly go the plain
// way, and read the same.
func TestMemoSplitter(t *testing.T) {
	s := memoServer(t)
	m := `"messages":[{"role":"user","content":"hi \"there\" \\"}]`
	for _, tc := range []struct {
		body string
		fast bool
	}{
		{`{"model":"m","max_tokens":5,` + m + `}`, true},
		{" \n{ \"model\" : \"m\" , \"max_tokens\" : 5 , " + m + " } \t", true},
		{`{"model":"m","max_tokens":5,` + m + `,"model":"n"}`, true}, // the last of a repeated key, as encoding/json
		{`{"mod\u0065l":"m","max_tokens":5,` + m + `}`, false},       // an escaped key
		{`{"model":"m","max_tokens":5,` + m + `}x`, false},
		{`{"model":"m","max_tokens":5,` + m + `,}`, false},
		{`{"model":"m","max_tokens":5 5,` + m + `}`, false},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"} {"role":"user"}]}`, false},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"]}]}`, false},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x}]}`, false},
		{`{"model":"m","max_tokens":5,"messages":{"role":"user"}}`, true},
		{`{"model":"m","max_tokens":tru,` + m + `}`, false},
		{`{}`, true},
		{`[]`, false},
		{``, false},
	} {
		if fast := readBoth(t, s, []byte(tc.body)); fast != tc.fast {
			t.Errorf("%s: read through the memo %v, want %v", tc.body, fast, tc.fast)
		}
	}
}

// TestMemoGenerations: a full generation becomes the old one; a part found
// there moves back to the current one, and the one before is forgotten.
func TestMemoGenerations(t *testing.T) {
	var g generations[int]
	key := func(c byte) []byte { return []byte(strings.Repeat(string(c), memoBytes/2)) }
	g.put(key('a'), 1)
	g.put(key('b'), 2)
	g.put(key('c'), 3) // a and b are now old
	if v, ok := g.get(key('a')); !ok || v != 1 {
		t.Fatalf("a: %d %v", v, ok)
	}
	g.put(key('d'), 4) // c and a are now old; b is gone
	if _, ok := g.get(key('b')); ok {
		t.Error("b outlived two generations")
	}
	for c, want := range map[byte]int{'a': 1, 'c': 3, 'd': 4} {
		if v, ok := g.get(key(c)); !ok || v != want {
			t.Errorf("%c: %d %v", c, v, ok)
		}
	}
}

// FuzzParsedMatchesPlain: whatever the body, and whatever the memo already
// holds, reading through the memo gives what the plain way gives.
func FuzzParsedMatchesPlain(f *testing.F) {
	for _, s := range []string{
		conversation(2),
		conversation(1, `"metadata":{"user_id":"u"}`),
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x"}]}]}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}],"system":"s"}`,
		`{"model":1,"max_tokens":1e400}`, `null`, `{"messages":[null,1,"x"]}`,
	} {
		f.Add([]byte(s))
	}
	warm := [][]byte{[]byte(conversation(3)), []byte(conversation(4))}
	f.Fuzz(func(t *testing.T, body []byte) {
		s := memoServer(t)
		for _, w := range warm {
			readBoth(t, s, w)
		}
		readBoth(t, s, body)
		readBoth(t, s, body)
	})
}

// FuzzSplitAfterAnother: a body read right after another, whose split the
// server reuses where the two share a start or an end, reads as plainly.
func FuzzSplitAfterAnother(f *testing.F) {
	for _, pair := range [][2]string{
		{agentCall(2), agentCall(3)},
		{agentCall(3), agentCall(2)},
		{agentCall(0), agentCall(1)},
		{conversation(2), conversation(3)},
		{conversation(3), conversation(2)},
		{conversation(3), conversation(3, `"metadata":{"user_id":"u"}`)},
		{conversation(1), `{"max_tokens":64,` + conversation(1)[1:]},
		{`{"messages":[{"role":"user","content":"a"}],"model":"m","max_tokens":1}`, `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}],"model":"m","max_tokens":12}`},
		{`{"max_tokens":1,"messages":[{"role":"user","content":"a"}],"model":"m"}`, `{"max_tokens":10,"messages":[{"role":"user","content":"a"}],"model":"m"}`},
	} {
		f.Add([]byte(pair[0]), []byte(pair[1]))
	}
	f.Fuzz(func(t *testing.T, prev, body []byte) {
		s := memoServer(t)
		readBoth(t, s, prev)
		readBoth(t, s, body)
		readBoth(t, s, prev)
	})
}

// TestSplitReusesRecent: an agent's next call is split from its last one:
// every message of the last call but the one that lost its breakpoint is
// taken from its split, unscanned, and so are the system prompt and tools
// after them; the prompt cache's hashes resume after the last call's.
func TestSplitReusesRecent(t *testing.T) {
	s := memoServer(t)
	for i := 0; i <= 5; i++ {
		readBoth(t, s, []byte(agentCall(i)))
	}
	body := []byte(agentCall(6))
	sk := s.recent.against(body)
	members, ok := splitObject(sk)
	if !ok {
		t.Fatal("conversation(6) was not split")
	}
	reused := 0
	for _, e := range sk.elems {
		if e.msg != nil {
			reused++
		}
	}
	// All of the last call's messages but its last, whose breakpoint
	// has moved on.
	if want := 2 * 5; reused != want {
		t.Errorf("%d of %d messages taken from the last split, want %d", reused, len(sk.elems), want)
	}
	for _, m := range members {
		if (m.key == "tools" || m.key == "system") && sk.members[m.index].list == nil {
			t.Errorf("%s was scanned again", m.key)
		}
	}
	p, ok := s.parse(body)
	if !ok || p.from == nil {
		t.Fatal("conversation(6) was not parsed against a recent split")
	}
	blocks := p.blocks()
	if n := resumable("claude-sonnet-4-5", blocks, make([]bool, len(blocks)), p.from.chain.Load()); n == 0 {
		t.Error("the prompt cache's hashes were not resumed from the last call's")
	}
	s.recent.mu.Lock()
	defer s.recent.mu.Unlock()
	if len(s.recent.list) != 1 {
		t.Errorf("%d splits kept, want 1: each call replaces the one it was split against", len(s.recent.list))
	}
}
