package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-dev/troupe/internal/shell"
)

// Defaults, as Claude Code's: MCP_TIMEOUT bounds a server's start,
// MCP_TOOL_TIMEOUT one tool call (both in milliseconds).
const (
	DefaultStartTimeout = 30 * time.Second
	DefaultToolTimeout  = 100_000_000 * time.Millisecond
	// stderrCap is how much of a stdio server's stderr is kept for the
	// message that reports its crash.
	stderrCap = 4 << 10
	// terminateWait is how long a stdio server has to exit after its stdin
	// is closed before it is signalled.
	terminateWait = 2 * time.Second
)

// Server states, as `troupe mcp list` shows them.
const (
	StateIdle      = "not started"
	StateConnected = "connected"
	StateFailed    = "failed"
	StateClosed    = "closed"
)

// Options configure a Manager.
type Options struct {
	// ToolTimeout bounds one tool call; zero: MCP_TOOL_TIMEOUT from Lookup,
	// else DefaultToolTimeout.
	ToolTimeout time.Duration
	// StartTimeout bounds connecting to a server; zero: MCP_TIMEOUT from
	// Lookup, else DefaultStartTimeout.
	StartTimeout time.Duration
	// Dir is the working directory of stdio servers (the workspace).
	Dir string
	// Environ is the base environment of stdio servers (os.Environ() form);
	// nil: os.Environ(). It is scrubbed (shell.Environ) and the server's
	// own env is added on top.
	Environ []string
	// Lookup reads the timeout variables; nil: os.LookupEnv.
	Lookup func(string) (string, bool)
	// HTTPClient carries http and sse servers' requests; nil: a client of
	// its own.
	HTTPClient *http.Client
	// Logger receives what happens to servers; nil: discarded.
	Logger *slog.Logger
	// Lazy offers a server's tools from ToolCache, the directory where
	// each server's last tool list is kept, without starting it: it starts
	// at the first call (see lazy.go). Without a cached list it starts with
	// the session. ToolCache alone only writes the lists.
	Lazy      bool
	ToolCache string
}

// Manager runs the configured servers: one client session per server,
// shared by every in-process agent of a team and safe for concurrent
// calls. A server starts on first use (or in Start); a server whose
// connection ends during a call is restarted once; Close stops them all.
type Manager struct {
	opts    Options
	servers []*conn // config order
	client  *sdk.Client

	mu     sync.Mutex
	closed bool
	base   context.Context // ends on Close: bounds every start
	stop   context.CancelFunc
}

// conn is one server's session. mu is held across a start, so that
// concurrent first calls wait for one process rather than start several.
type conn struct {
	srv Server
	m   *Manager

	mu       sync.Mutex
	sess     *sdk.ClientSession
	done     chan struct{} // closed when sess's connection ends
	cancel   context.CancelFunc
	cmd      *exec.Cmd
	stderr   *shell.Buffer
	tools    []*sdk.Tool
	state    string
	err      error
	restarts int
}

// NewManager returns a manager of servers, none started.
func NewManager(servers []Server, opts Options) *Manager {
	lookup := opts.Lookup
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if opts.ToolTimeout <= 0 {
		opts.ToolTimeout = envMillis(lookup, "MCP_TOOL_TIMEOUT", DefaultToolTimeout)
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = envMillis(lookup, "MCP_TIMEOUT", DefaultStartTimeout)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Manager{opts: opts, client: sdk.NewClient(&sdk.Implementation{Name: "troupe", Version: "1"}, nil)}
	m.base, m.stop = context.WithCancel(context.Background())
	for _, s := range servers {
		m.servers = append(m.servers, &conn{srv: s, m: m, state: StateIdle})
	}
	return m
}

func envMillis(lookup func(string) (string, bool), name string, def time.Duration) time.Duration {
	v, ok := lookup(name)
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n <= 0 {
		return def
	}
	return time.Duration(n) * time.Millisecond
}

// ToolTimeout is the bound on one call.
func (m *Manager) ToolTimeout() time.Duration { return m.opts.ToolTimeout }

// Servers returns the configured servers.
func (m *Manager) Servers() []Server {
	out := make([]Server, len(m.servers))
	for i, c := range m.servers {
		out[i] = c.srv
	}
	return out
}

func (m *Manager) conn(name string) (*conn, error) {
	for _, c := range m.servers {
		if c.srv.Name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownServer, name)
}

// Status is one server's state for display.
type Status struct {
	Server Server
	State  string
	Err    error
	Tools  []*sdk.Tool
}

// Status returns every server's state, starting none.
func (m *Manager) Status() []Status {
	out := make([]Status, len(m.servers))
	for i, c := range m.servers {
		c.mu.Lock()
		out[i] = Status{Server: c.srv, State: c.state, Err: c.err, Tools: c.tools}
		c.mu.Unlock()
	}
	return out
}

// Start connects every server at once (the eager setting) and returns
// the errors of those that failed; the others are ready.
func (m *Manager) Start(ctx context.Context) []error {
	var wg sync.WaitGroup
	errs := make([]error, len(m.servers))
	for i, c := range m.servers {
		wg.Go(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			errs[i] = c.ensure(ctx)
		})
	}
	wg.Wait()
	var out []error
	for _, e := range errs {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// ListTools returns server's tools, starting it if needed.
func (m *Manager) ListTools(ctx context.Context, server string) ([]*sdk.Tool, error) {
	c, err := m.conn(server)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ensure(ctx); err != nil {
		return nil, err
	}
	return c.tools, nil
}

// ensure starts c unless it runs. c.mu is held.
func (c *conn) ensure(ctx context.Context) error {
	if c.sess != nil {
		select {
		case <-c.done:
			// Ended between calls: the restart (once) is all the next
			// caller needs to know nothing of.
			if err := c.crashed(); c.sess == nil {
				return err
			}
			return nil
		default:
			return nil
		}
	}
	if c.state == StateFailed && c.err != nil && c.restarts > 1 {
		return c.err
	}
	return c.start(ctx)
}

// crashed reaps a session whose connection ended, restarts the server if
// it has not been restarted yet, and returns the error the caller reports.
// c.mu is held.
func (c *conn) crashed() error {
	c.teardown()
	why := c.exitNote()
	c.restarts++
	if c.restarts > 1 {
		c.state, c.err = StateFailed, fmt.Errorf("%w: %s stopped again%s; it was restarted once already and is not restarted again", ErrCrashed, c.srv.Name, why)
		return c.err
	}
	c.m.opts.Logger.Warn("mcp server crashed; restarting", "server", c.srv.Name, "why", why)
	if err := c.start(context.Background()); err != nil {
		return fmt.Errorf("%w: %s stopped%s; restarting it failed: %v", ErrCrashed, c.srv.Name, why, err)
	}
	return fmt.Errorf("%w: %s stopped%s; it has been restarted: call the tool again", ErrCrashed, c.srv.Name, why)
}

func (c *conn) exitNote() string {
	var parts []string
	if c.cmd != nil && c.cmd.ProcessState != nil {
		parts = append(parts, c.cmd.ProcessState.String())
	}
	if c.stderr != nil {
		if s := strings.TrimSpace(c.stderr.String()); s != "" {
			parts = append(parts, "stderr: "+s)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// start connects to the server and lists its tools. c.mu is held.
func (c *conn) start(ctx context.Context) error {
	m := c.m
	m.mu.Lock()
	closed, base := m.closed, m.base
	m.mu.Unlock()
	if closed {
		return ErrClosed
	}
	// The session lives in sctx until teardown: an SSE stream is bound to
	// the context it was opened with. The start timeout and the caller's
	// ctx may end it only while the start is under way.
	sctx, cancel := context.WithCancel(base)
	c.cancel = cancel
	var timedOut atomic.Bool
	timer := time.AfterFunc(m.opts.StartTimeout, func() { timedOut.Store(true); cancel() })
	stopLink := context.AfterFunc(ctx, cancel)
	defer func() {
		timer.Stop()
		stopLink()
	}()

	fail := func(err error) error {
		timer.Stop()
		if timedOut.Load() {
			err = fmt.Errorf("no answer within %s (MCP_TIMEOUT): %v", m.opts.StartTimeout, err)
		}
		c.teardown()
		var syn *json.SyntaxError
		hint := ""
		if errors.As(err, &syn) || strings.Contains(err.Error(), "invalid character") {
			hint = "; it printed something that is not JSON-RPC on its stdout: is the command an MCP server?"
		}
		from := ""
		if c.srv.Source != "" {
			from = " (" + c.srv.Source + ")"
		}
		c.state, c.err = StateFailed, fmt.Errorf("start MCP server %s%s: %v%s%s", c.srv.Name, from, err, c.exitNote(), hint)
		return c.err
	}
	tr, err := c.transport()
	if err != nil {
		return fail(err)
	}
	sess, err := m.client.Connect(sctx, tr, nil)
	if err != nil {
		return fail(err)
	}
	c.sess = sess
	c.done = make(chan struct{})
	done := c.done
	go func() {
		_ = sess.Wait()
		close(done)
	}()
	var tools []*sdk.Tool
	for t, err := range sess.Tools(sctx, nil) {
		if err != nil {
			return fail(fmt.Errorf("list tools: %v", err))
		}
		tools = append(tools, t)
	}
	if !timer.Stop() {
		return fail(sctx.Err())
	}
	c.tools, c.state, c.err = tools, StateConnected, nil
	m.remember(c.srv, tools)
	m.opts.Logger.Info("mcp server started", "server", c.srv.Name, "tools", len(tools))
	return nil
}

func (c *conn) transport() (sdk.Transport, error) {
	m := c.m
	switch c.srv.Type {
	case TypeStdio:
		cmd := exec.Command(c.srv.Command, c.srv.Args...)
		cmd.Dir = m.opts.Dir
		base := m.opts.Environ
		if base == nil {
			base = os.Environ()
		}
		cmd.Env = shell.Environ(base, c.srv.Env)
		c.stderr = shell.NewBuffer(stderrCap)
		cmd.Stderr = c.stderr
		setGroup(cmd)
		c.cmd = cmd
		return &sdk.CommandTransport{Command: cmd, TerminateDuration: terminateWait}, nil
	case TypeHTTP, TypeSSE:
		hc := m.opts.HTTPClient
		if hc == nil {
			hc = &http.Client{}
		}
		if len(c.srv.Headers) > 0 {
			rt := hc.Transport
			if rt == nil {
				rt = http.DefaultTransport
			}
			h := *hc
			h.Transport = headerTransport{base: rt, headers: c.srv.Headers}
			hc = &h
		}
		if c.srv.Type == TypeSSE {
			return &sdk.SSEClientTransport{Endpoint: c.srv.URL, HTTPClient: hc}, nil
		}
		return &sdk.StreamableClientTransport{Endpoint: c.srv.URL, HTTPClient: hc, MaxRetries: -1}, nil
	}
	return nil, fmt.Errorf("unknown type %q", c.srv.Type)
}

// headerTransport adds a server's configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

// teardown closes c's session and kills what is left of its process
// group. c.mu is held.
func (c *conn) teardown() {
	if c.sess != nil {
		_ = c.sess.Close()
		<-c.done
	}
	if c.cmd != nil && c.cmd.Process != nil {
		killGroup(c.cmd.Process.Pid)
	}
	if c.cancel != nil {
		c.cancel()
	}
	c.sess, c.done, c.tools, c.cancel = nil, nil, nil, nil
}

// Call runs tool of server with the JSON arguments input, within the tool
// timeout. A Go error means the call could not be made or did not finish
// (unknown server, start failure, crash, timeout); a tool's own failure is
// a result with IsError.
func (m *Manager) Call(ctx context.Context, server, tool string, input json.RawMessage) (*sdk.CallToolResult, error) {
	c, err := m.conn(server)
	if err != nil {
		return nil, err
	}
	var args any
	if len(strings.TrimSpace(string(input))) > 0 {
		if err := json.Unmarshal(input, &args); err != nil {
			return nil, fmt.Errorf("arguments of %s are not JSON: %v", tool, err)
		}
	}
	c.mu.Lock()
	if err := c.ensure(ctx); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	sess, done := c.sess, c.done
	c.mu.Unlock()

	cctx, cancel := context.WithTimeout(ctx, m.opts.ToolTimeout)
	defer cancel()
	res, err := sess.CallTool(cctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err == nil {
		return res, nil
	}
	var wire *jsonrpc.Error
	if errors.As(err, &wire) {
		// The server answered with an error: it runs.
		return nil, fmt.Errorf("%s of %s: %v", tool, server, err)
	}
	ended := errors.Is(err, sdk.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
	select {
	case <-done:
		ended = true
	default:
	}
	c.m.opts.Logger.Debug("mcp call failed", "server", server, "tool", tool, "err", err, "ended", ended)
	if ended && ctx.Err() == nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.sess != sess {
			// Another call saw the crash first and restarted the server.
			return nil, fmt.Errorf("%w: %s stopped during the call; it has been restarted: call the tool again", ErrCrashed, server)
		}
		return nil, c.crashed()
	}
	if cctx.Err() != nil && ctx.Err() == nil {
		return nil, fmt.Errorf("%w: %s of %s gave no answer within %s (MCP_TOOL_TIMEOUT)", ErrTimeout, tool, server, m.opts.ToolTimeout)
	}
	return nil, fmt.Errorf("%s of %s: %v", tool, server, err)
}

// Close stops every server and waits for them; calls made after it fail
// with ErrClosed.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.stop()
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range m.servers {
		wg.Go(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.teardown()
			c.state, c.err = StateClosed, nil
		})
	}
	wg.Wait()
	return nil
}
