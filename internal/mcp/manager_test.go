package mcp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/tool"
)

func newManager(t *testing.T, opts Options, servers ...Server) *Manager {
	t.Helper()
	if opts.Environ == nil {
		opts.Environ = append(os.Environ(), "ANTHROPIC_API_KEY=sk-must-not-leak")
	}
	m := NewManager(servers, opts)
	t.Cleanup(func() { m.Close() })
	return m
}

func names(tools []tool.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Spec().Name)
	}
	return out
}

func find(t *testing.T, tools []tool.Tool, name string) tool.Tool {
	t.Helper()
	for _, x := range tools {
		if x.Spec().Name == name {
			return x
		}
	}
	t.Fatalf("no tool %s in %v", name, names(tools))
	return nil
}

func run(t *testing.T, tl tool.Tool, input string) tool.Result {
	t.Helper()
	return tl.Run(context.Background(), &tool.Env{}, []byte(input))
}

// httpServers serves the test server over streamable HTTP and SSE on
// loopback, and checks the configured header arrives.
func httpServers(t *testing.T) (streamURL, sseURL string) {
	t.Helper()
	srv := testServer("http")
	check := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Api-Key") != "k123" {
				http.Error(w, "bad key", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	st := httptest.NewServer(check(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)))
	t.Cleanup(st.Close)
	ss := httptest.NewServer(check(sdk.NewSSEHandler(func(*http.Request) *sdk.Server { return srv }, nil)))
	t.Cleanup(ss.Close)
	return st.URL, ss.URL
}

// TestTransports lists and calls the same tools over stdio, streamable
// HTTP and SSE.
func TestTransports(t *testing.T) {
	t.Parallel()
	streamURL, sseURL := httpServers(t)
	hdr := map[string]string{"X-Api-Key": "k123"}
	servers := []Server{
		helperServer(t, "local", "basic"),
		{Name: "remote", Type: TypeHTTP, URL: streamURL, Headers: hdr},
		{Name: "old", Type: TypeSSE, URL: sseURL, Headers: hdr},
	}
	m := newManager(t, Options{}, servers...)
	tools, probs := m.Tools(context.Background(), nil)
	if len(probs) != 0 {
		t.Fatalf("problems: %v", probs)
	}
	for _, s := range []string{"local", "old", "remote"} {
		res := run(t, find(t, tools, "mcp__"+s+"__echo"), `{"text":"hi `+s+`"}`)
		if diff := cmp.Diff(tool.Result{Content: "echo: hi " + s}, tool.Result{Content: res.Content, IsError: res.IsError}); diff != "" {
			t.Errorf("%s echo (-want +got):\n%s", s, diff)
		}
	}
	echo := find(t, tools, "mcp__local__echo")
	if !echo.ReadOnly() {
		t.Error("echo has readOnlyHint but ReadOnly() is false")
	}
	if find(t, tools, "mcp__local__env").ReadOnly() {
		t.Error("env has no readOnlyHint but ReadOnly() is true")
	}
	// The server's own env arrives; the provider key does not.
	res := run(t, find(t, tools, "mcp__local__env"), `{}`)
	if res.Content != "hello from local; key=false" {
		t.Errorf("env = %q", res.Content)
	}
	// A wrong header is a start failure of that server only.
	bad := newManager(t, Options{}, Server{Name: "nokey", Type: TypeHTTP, URL: streamURL}, helperServer(t, "good", "basic"))
	tools, probs = bad.Tools(context.Background(), nil)
	if len(probs) != 1 || probs[0].Server != "nokey" {
		t.Fatalf("problems = %v, want one for nokey", probs)
	}
	if res := run(t, find(t, tools, "mcp__good__echo"), `{"text":"x"}`); res.IsError {
		t.Errorf("good server failed: %s", res.Content)
	}
}

func TestResults(t *testing.T) {
	t.Parallel()
	m := newManager(t, Options{}, helperServer(t, "s", "basic"))
	tools, _ := m.Tools(context.Background(), nil)

	res := run(t, find(t, tools, "mcp__s__fail"), `{}`)
	if !res.IsError || !strings.Contains(res.Content, "the frobnicator is broken") {
		t.Errorf("fail = %+v, want an error result with the server's message", res)
	}

	res = run(t, find(t, tools, "mcp__s__mixed"), `{}`)
	want := "here:\n[image 1: image/png, 4 bytes]\n[resource file:///notes.txt]\nthe notes"
	if diff := cmp.Diff(want, res.Content); diff != "" {
		t.Errorf("mixed (-want +got):\n%s", diff)
	}
	resp, ok := res.Response.(Response)
	if !ok || len(resp.Images) != 1 || string(resp.Images[0].Data) != "\x89PNG" || resp.Images[0].MIMEType != "image/png" {
		t.Errorf("images = %+v", res.Response)
	}
	if diff := cmp.Diff([]llm.Image{{MediaType: "image/png", Data: "iVBORw=="}}, res.Images); diff != "" {
		t.Errorf("images for the model (-want +got):\n%s", diff)
	}

	res = run(t, find(t, tools, "mcp__s__big"), `{}`)
	if len(res.Content) > tool.OutputCap+500 || !strings.HasPrefix(res.Content, "HEAD") || !strings.Contains(res.Content, "TAIL") || !strings.Contains(res.Content, "output truncated") {
		t.Errorf("big: %d bytes, head %q, tail %q", len(res.Content), res.Content[:10], res.Content[len(res.Content)-80:])
	}

	res = run(t, find(t, tools, "mcp__s__echo"), `{"text": 5}`)
	if !res.IsError {
		t.Errorf("bad arguments: %+v, want an error result", res)
	}
	res = run(t, find(t, tools, "mcp__s__echo"), `not json`)
	if !res.IsError || !strings.Contains(res.Content, "not JSON") {
		t.Errorf("non-JSON input: %+v", res)
	}
	if _, err := m.Call(context.Background(), "nope", "echo", nil); !errors.Is(err, ErrUnknownServer) {
		t.Errorf("unknown server: %v", err)
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	m := newManager(t, Options{ToolTimeout: 300 * time.Millisecond}, helperServer(t, "s", "basic"))
	tools, _ := m.Tools(context.Background(), nil)
	res := run(t, find(t, tools, "mcp__s__hang"), `{}`)
	if !res.IsError || !strings.Contains(res.Content, "no answer within 300ms") {
		t.Fatalf("hang = %+v, want a timeout error", res)
	}
	// The session survives a timed-out call.
	if res := run(t, find(t, tools, "mcp__s__echo"), `{"text":"still here"}`); res.Content != "echo: still here" {
		t.Errorf("after timeout: %+v", res)
	}
}

func TestToolTimeoutFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{"MCP_TOOL_TIMEOUT": "1500", "MCP_TIMEOUT": "bad"}
	m := NewManager(nil, Options{Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	defer m.Close()
	if m.ToolTimeout() != 1500*time.Millisecond || m.opts.StartTimeout != DefaultStartTimeout {
		t.Errorf("timeouts = %s, %s", m.ToolTimeout(), m.opts.StartTimeout)
	}
}

func TestCrashRestartsOnce(t *testing.T) {
	t.Parallel()
	m := newManager(t, Options{}, helperServer(t, "s", "basic"))
	tools, _ := m.Tools(context.Background(), nil)
	crash, echo := find(t, tools, "mcp__s__crash"), find(t, tools, "mcp__s__echo")

	res := run(t, crash, `{}`)
	if !res.IsError || !strings.Contains(res.Content, "has been restarted") || !strings.Contains(res.Content, "crashing on purpose") {
		t.Fatalf("first crash = %q, want a restart notice with the server's stderr", res.Content)
	}
	if res := run(t, echo, `{"text":"again"}`); res.Content != "echo: again" {
		t.Fatalf("after restart: %+v", res)
	}
	res = run(t, crash, `{}`)
	if !res.IsError || !strings.Contains(res.Content, "not restarted again") {
		t.Fatalf("second crash = %q", res.Content)
	}
	if res := run(t, echo, `{"text":"x"}`); !res.IsError || !strings.Contains(res.Content, "not restarted again") {
		t.Errorf("after second crash: %+v", res)
	}
}

func TestConcurrentCallsShareOneProcess(t *testing.T) {
	t.Parallel()
	m := newManager(t, Options{}, helperServer(t, "s", "basic"))
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for i := range 16 {
		wg.Go(func() {
			res, err := m.Call(context.Background(), "s", "echo", []byte(`{"text":"n"}`))
			if err != nil {
				errs <- err.Error()
				return
			}
			if got := ConvertResult(res).Content; got != "echo: n" {
				errs <- got
			}
			_ = i
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	pids := map[int]bool{}
	for _, c := range m.servers {
		if c.cmd != nil {
			pids[c.cmd.Process.Pid] = true
		}
	}
	if len(pids) != 1 {
		t.Errorf("processes started: %d, want 1", len(pids))
	}
}

func TestBadServers(t *testing.T) {
	t.Parallel()
	servers := []Server{
		helperServer(t, "garbage", "garbage"),
		helperServer(t, "loops", "refloop"),
		{Name: "gone", Type: TypeStdio, Command: "/nonexistent/mcp-server"},
		{Name: "down", Type: TypeHTTP, URL: "http://127.0.0.1:1/mcp"},
		helperServer(t, "good", "basic"),
	}
	m := newManager(t, Options{StartTimeout: 10 * time.Second}, servers...)
	tools, probs := m.Tools(context.Background(), nil)
	got := map[string]string{}
	for _, p := range probs {
		got[p.Server+"/"+p.Tool] = p.Error()
	}
	for key, want := range map[string]string{
		"garbage/":    "not JSON-RPC on its stdout",
		"gone/":       "/nonexistent/mcp-server",
		"down/":       "start MCP server down",
		"loops/loopy": "$ref loop",
	} {
		if !strings.Contains(got[key], want) {
			t.Errorf("problem %s = %q, want it to mention %q", key, got[key], want)
		}
	}
	if len(probs) != 4 {
		t.Errorf("problems: %v", probs)
	}
	// The rest keeps working: the good server, and loops' other tools.
	for _, n := range []string{"mcp__good__echo", "mcp__loops__echo"} {
		if res := run(t, find(t, tools, n), `{"text":"ok"}`); res.Content != "echo: ok" {
			t.Errorf("%s: %+v", n, res)
		}
	}
}

func TestNameClash(t *testing.T) {
	t.Parallel()
	servers := []Server{
		helperServer(t, "b.x", "basic"),
		helperServer(t, "b_x", "clash"),
	}
	m := newManager(t, Options{}, servers...)
	tools, probs := m.Tools(context.Background(), nil)
	var msgs []string
	for _, p := range probs {
		msgs = append(msgs, p.Error())
	}
	// "b.x" sorts first, so its tools keep the names; of b_x's own e.cho
	// and e_cho, the first listed keeps mcp__b_x__e_cho.
	if len(probs) == 0 {
		t.Fatal("no clash reported")
	}
	long := 0
	for _, msg := range msgs {
		switch {
		case strings.Contains(msg, "longer than 128 characters"):
			long++
		case !strings.Contains(msg, "is taken by"):
			t.Errorf("clash message %q", msg)
		}
	}
	if long != 1 {
		t.Errorf("over-long names reported %d times, want 1: %v", long, msgs)
	}
	if res := run(t, find(t, tools, "mcp__b_x__echo"), `{"text":"who"}`); res.Content != "echo: who" {
		t.Errorf("echo: %+v", res)
	}
	if res := run(t, find(t, tools, "mcp__b_x__e_cho"), `{}`); res.Content != "e.cho" {
		t.Errorf("mcp__b_x__e_cho runs %q, want the first listed (e.cho)", res.Content)
	}
	seen := map[string]bool{}
	for _, n := range names(tools) {
		if seen[n] {
			t.Errorf("%s offered twice", n)
		}
		seen[n] = true
	}
	// Deterministic: the same outcome every time.
	again, probs2 := m.Tools(context.Background(), nil)
	if diff := cmp.Diff(names(tools), names(again)); diff != "" {
		t.Errorf("second listing differs:\n%s", diff)
	}
	if len(probs2) != len(probs) {
		t.Errorf("problems differ: %v vs %v", probs, probs2)
	}
}

func TestSelectAndAllow(t *testing.T) {
	t.Parallel()
	m := newManager(t, Options{}, helperServer(t, "a", "basic"), helperServer(t, "b", "basic"))
	tools, _ := m.Tools(context.Background(), []string{"b"})
	for _, n := range names(tools) {
		if !strings.HasPrefix(n, "mcp__b__") {
			t.Errorf("tool %s offered outside the allow list", n)
		}
	}
	if st := m.Status(); st[0].State != StateIdle || st[1].State != StateConnected {
		t.Errorf("states = %s, %s; want a not started (lazy), b connected", st[0].State, st[1].State)
	}
	if got := Select(m.Servers(), []string{"a"}); len(got) != 1 || got[0].Name != "a" {
		t.Errorf("Select = %+v", got)
	}
}

func TestCloseStopsServers(t *testing.T) {
	t.Parallel()
	m := NewManager([]Server{helperServer(t, "s", "basic")}, Options{})
	if errs := m.Start(context.Background()); len(errs) != 0 {
		t.Fatal(errs)
	}
	cmd := m.servers[0].cmd
	m.Close()
	if cmd.ProcessState == nil {
		t.Errorf("server %d not reaped after Close", cmd.Process.Pid)
	}
	if _, err := m.Call(context.Background(), "s", "echo", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("call after Close: %v", err)
	}
}

func TestAddTo(t *testing.T) {
	t.Parallel()
	m := newManager(t, Options{}, helperServer(t, "s", "refloop"))
	reg := tool.NewRegistry()
	probs := m.AddTo(context.Background(), reg, nil)
	if len(probs) != 1 || probs[0].Tool != "loopy" {
		t.Errorf("problems = %v", probs)
	}
	tl, ok := reg.Get("mcp__s__echo")
	if !ok {
		t.Fatalf("registry: %v", reg.Names())
	}
	if tl.Kind() != Kind {
		t.Errorf("kind of an MCP tool: %v", tl)
	}
}

// TestCrashBetweenCalls: a server that died while nobody called it is
// restarted (once) at the next use, which goes through.
func TestCrashBetweenCalls(t *testing.T) {
	t.Parallel()
	m := newManager(t, Options{}, helperServer(t, "s", "basic"))
	if errs := m.Start(context.Background()); len(errs) != 0 {
		t.Fatal(errs)
	}
	c := m.servers[0]
	c.mu.Lock()
	proc, done := c.cmd.Process, c.done
	c.mu.Unlock()
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	<-done
	res, err := m.Call(context.Background(), "s", "echo", []byte(`{"text":"back"}`))
	if err != nil || ConvertResult(res).Content != "echo: back" {
		t.Fatalf("call after a crash between calls: %v, %+v", err, res)
	}
	if st := m.Status()[0]; st.State != StateConnected {
		t.Errorf("state = %s", st.State)
	}
}
