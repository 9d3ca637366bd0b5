package team

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// supervisor owns the session's teammate runtimes: the goroutines and the
// processes it starts (placed by Config.Placement), their restarts, the
// heartbeat it writes for in-process members, the reaping of members that
// stopped beating, and the journal follower for members in other
// processes. Close (stopAll) ends them all.
type supervisor struct {
	cfg   *Config
	place Placement
	em    emitter
	key   func() []byte // the team's key, handed to processes by descriptor

	mu       sync.Mutex
	members  map[string]*handle
	stopBeat context.CancelFunc
	reaped   map[string]bool // dead members already reported, by name@heartbeat
	follower *follower

	wg sync.WaitGroup
}

func newSupervisor(cfg *Config, em emitter, key func() []byte) *supervisor {
	return &supervisor{cfg: cfg, place: placement(*cfg), em: em, key: key, members: map[string]*handle{}, reaped: map[string]bool{}}
}

// handle is a running teammate.
type handle struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}
	member *Member // in-process

	mu  sync.Mutex
	cmd *exec.Cmd // process mode: the current process
}

func (h *handle) setCmd(c *exec.Cmd) {
	h.mu.Lock()
	h.cmd = c
	h.mu.Unlock()
}

// pid is the member's current process id, or 0.
func (h *handle) pid() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cmd != nil && h.cmd.Process != nil {
		return h.cmd.Process.Pid
	}
	return 0
}

// signal sends sig to the member's current process, if any.
func (h *handle) signal(sig os.Signal) {
	h.mu.Lock()
	c := h.cmd
	h.mu.Unlock()
	if c != nil && c.Process != nil {
		_ = c.Process.Signal(sig)
	}
}

// maxRestarts bounds how often the lead restarts a teammate process that
// died without being shut down.
const maxRestarts = 5

// envOf places member name of team t.
func (sv *supervisor) envOf(ctx context.Context, t store.Team, name string) (Env, error) {
	env, err := sv.place.Place(ctx, t.Name(), name)
	if err != nil {
		return Env{}, fmt.Errorf("place teammate %s: %w", name, err)
	}
	if env.Workspace == nil {
		return Env{}, fmt.Errorf("place teammate %s: no workspace", name)
	}
	if sv.cfg.TeammateMode == ModeProcess && len(env.Command) == 0 {
		return Env{}, fmt.Errorf("place teammate %s: process mode needs a command to launch it", name)
	}
	return env, nil
}

// start runs a roster member placed in env: as a process in process mode,
// else as a goroutine.
func (sv *supervisor) start(t store.Team, name string, env Env) error {
	return sv.startAfter(t, name, env, nil)
}

// startAfter is start with the member's runtime held back until ready is
// closed (nil: not held); the member is made meanwhile.
func (sv *supervisor) startAfter(t store.Team, name string, env Env, ready <-chan struct{}) error {
	ctx, cancel := context.WithCancel(context.Background())
	h := &handle{name: name, cancel: cancel, done: make(chan struct{})}
	if sv.cfg.TeammateMode == ModeProcess {
		if ready != nil {
			<-ready
		}
		cmd, err := sv.startProcess(t, name, env)
		if err != nil {
			cancel()
			return err
		}
		h.setCmd(cmd)
		sv.add(h)
		sv.wg.Go(func() {
			defer close(h.done)
			sv.superviseProcess(ctx, t, h, env, cmd)
		})
		return nil
	}
	c := sv.cfg
	m, err := NewMember(MemberConfig{
		Team: t, Name: name, Provider: c.Provider, Pacer: c.Pacer, Workspace: env.Workspace,
		Sections: c.Sections, Rules: env.Rules, Tools: mcpSelect(c.Tools, sv.mcpServersOf(t, name)),
		MemberLimits: MemberLimits{DefaultModel: c.TeammateModel, IdleTimeout: c.IdleTimeout, MaxTurns: c.MaxTurns},
		Observers:    c.Observers,
	})
	if err != nil {
		cancel()
		return err
	}
	h.member = m
	sv.add(h)
	if ready != nil {
		<-ready
	}
	sv.wg.Go(func() {
		defer close(h.done)
		if err := m.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			c.Logger.Warn("teammate stopped", "name", name, "err", err)
		}
	})
	return nil
}

// mcpServersOf returns the MCP servers the roster limits member name to
// (nil: all). A roster that cannot be read also gives nil: the selection
// narrows what a teammate is offered, it grants nothing, and the member's
// permission rules still judge every call.
func (sv *supervisor) mcpServersOf(t store.Team, name string) []string {
	if m, ok, err := t.ReadMember(context.Background(), name); err == nil && ok {
		return m.MCPServers
	}
	return nil
}

func (sv *supervisor) add(h *handle) {
	sv.mu.Lock()
	sv.members[h.name] = h
	sv.mu.Unlock()
}

// startProcess starts env's command for member name.
func (sv *supervisor) startProcess(t store.Team, name string, env Env) (*exec.Cmd, error) {
	argv := append(append([]string(nil), env.Command...), "--team", t.Name(), "--name", name, "--workspace", env.Workspace.Dir())
	if servers := sv.mcpServersOf(t, name); len(servers) > 0 {
		// The process starts only these servers of its own.
		argv = append(argv, "--mcp-servers", strings.Join(servers, ","))
	}
	// The key goes through an inherited pipe, never the environment, which
	// every tool of the teammate would inherit.
	keyR, keyArgs, err := keyPipe(sv.key())
	if err != nil {
		return nil, fmt.Errorf("start teammate process %s: %w", name, err)
	}
	if keyR != nil {
		defer keyR.Close() // the child has its own copy once started
	}
	argv = append(argv, keyArgs...)
	cmd := exec.Command(argv[0], argv[1:]...)
	if keyR != nil {
		cmd.ExtraFiles = []*os.File{keyR} // descriptor KeyFD
	}
	cmd.Env = append(os.Environ(), env.Environ...)
	cmd.Dir = env.Workspace.Dir()
	cmd.Stdout, cmd.Stderr = nil, sv.cfg.AgentStderr
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	cmd.SysProcAttr = teammateProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start teammate process %s: %w", name, err)
	}
	return cmd, nil
}

// superviseProcess waits for a teammate process and, when it dies without
// having been shut down (killed, crashed), starts it again: the new process
// restores the member's conversation from its transcript, so its tasks wait
// for it instead of going back to the board.
func (sv *supervisor) superviseProcess(ctx context.Context, t store.Team, h *handle, env Env, cmd *exec.Cmd) {
	for restarts := 0; ; restarts++ {
		err := cmd.Wait()
		if ctx.Err() != nil || restarts >= maxRestarts {
			return
		}
		m, ok, rerr := t.ReadMember(context.Background(), h.name)
		if rerr != nil || !ok || m.Status == store.StatusShutdown {
			return
		}
		sv.em.emit(context.Background(), t, teamevent.Restart{Member: h.name, Exit: fmt.Sprint(err), Restarts: restarts + 1})
		next, serr := sv.startProcess(t, h.name, env)
		if serr != nil {
			sv.cfg.Logger.Warn("restart teammate", "member", h.name, "err", serr)
			return
		}
		h.setCmd(next)
		cmd = next
	}
}

// running returns the names of members whose runtime is still up.
func (sv *supervisor) running() []string {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	var out []string
	for n, h := range sv.members {
		select {
		case <-h.done:
		default:
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// handle returns member name's handle, if this session runs it.
func (sv *supervisor) handle(name string) *handle {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.members[name]
}

// anyDone returns a channel closed when any running member's runtime ends.
func (sv *supervisor) anyDone() <-chan struct{} {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	out := make(chan struct{})
	for _, h := range sv.members {
		select {
		case <-h.done:
			continue
		default:
		}
		go func(h *handle) {
			select {
			case <-h.done:
				select {
				case <-out:
				default:
					close(out)
				}
			case <-out:
			}
		}(h)
	}
	return out
}

// stop stops the named members (all of them when names is nil).
func (sv *supervisor) stop(names []string) {
	sv.mu.Lock()
	var hs []*handle
	if names == nil {
		for _, h := range sv.members {
			hs = append(hs, h)
		}
	}
	for _, n := range names {
		if h, ok := sv.members[n]; ok {
			hs = append(hs, h)
		}
	}
	sv.mu.Unlock()
	for _, h := range hs {
		h.cancel()
		h.signal(syscall.SIGTERM)
	}
}

// release forgets every member and returns a function that waits for their
// runtimes to end (the team is being deleted).
func (sv *supervisor) release() (wait func()) {
	sv.mu.Lock()
	hs := sv.members
	sv.members = map[string]*handle{}
	sv.mu.Unlock()
	return func() {
		for _, h := range hs {
			<-h.done
		}
	}
}

// stopAll stops every member, the heartbeat and the follower, and waits for
// them.
func (sv *supervisor) stopAll() {
	sv.stop(nil)
	sv.mu.Lock()
	if sv.stopBeat != nil {
		sv.stopBeat()
	}
	sv.mu.Unlock()
	sv.wg.Wait()
	sv.stopFollowing()
}
