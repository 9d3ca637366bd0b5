// Package shell runs bash commands for agents, each in its own process
// group, so that a timeout, a cancelled context or a stopped background job
// takes every process the command started with it, grandchildren included,
// and never hangs on a pipe a stray grandchild keeps open.
//
// Nothing a command starts outlives troupe: bash gets a parent-death
// signal, a watchdog process kills the recorded groups when troupe dies,
// each command runs in a cgroup of its own where the cgroup v2 hierarchy
// allows it (catching setsid escapes), and the groups are recorded on disk
// for KillLeftovers. Commands see the environment Environ builds, without
// the provider keys, and may run in a bubblewrap Sandbox.
//
// It must never depend on tools, agents or teams.
package shell

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"time"
)

// Defaults for Options fields left zero.
const (
	// DefaultGrace is how long a command has between SIGTERM and SIGKILL.
	DefaultGrace = 2 * time.Second
	// pipeDrain bounds the wait for output after the group was killed: a
	// process that left the group (setsid) may hold the pipe forever.
	pipeDrain = 2 * time.Second
	// goneWait bounds the wait for the killed group to disappear.
	goneWait = 5 * time.Second
)

// Options describe one command.
type Options struct {
	// Dir is the working directory.
	Dir string
	// Command is the bash source, run with bash -c.
	Command string
	// Timeout, when positive, kills the command after that long.
	Timeout time.Duration
	// OutputCap, when positive, bounds the kept output (head and tail).
	OutputCap int
	// Env is the environment, used as given; nil means Environ of the
	// caller's environment, which keeps the provider keys and troupe's
	// own variables out.
	Env []string
	// Grace is the time between SIGTERM and SIGKILL; zero means
	// DefaultGrace.
	Grace time.Duration
	// Stream, when set, also receives the output as it is produced.
	Stream io.Writer
	// Sandbox, when set, runs the command inside it; Start fails with
	// ErrNoSandbox when it cannot be had, never runs the command without.
	Sandbox *Sandbox
}

// Result is what a finished command left.
type Result struct {
	// Output is stdout and stderr interleaved as written, capped.
	Output string
	// ExitCode is the exit status, or -1 when a signal ended the command.
	ExitCode int
	// TimedOut reports that Timeout expired and the command was killed.
	TimedOut bool
	// Canceled reports that the context ended and the command was killed.
	Canceled bool
	// Truncated reports that output was cut to OutputCap.
	Truncated bool
	// Duration is the wall time from start to the end of the group.
	Duration time.Duration
}

// Process is a started command.
type Process struct {
	pid     int
	cgroup  string // the command's own cgroup, "" when it has none
	done    chan struct{}
	result  Result
	stopReq chan struct{}
	stopOne sync.Once
}

// Run runs a command to its end and returns what it left. The error is
// only for a command that could not be started; a failing command is a
// Result with a non-zero ExitCode.
func Run(ctx context.Context, opts Options) (Result, error) {
	p, err := Start(ctx, opts)
	if err != nil {
		return Result{}, err
	}
	return p.Wait(), nil
}

// Start starts a command and returns at once. The command runs until it
// ends, its Timeout expires, ctx is done or Stop is called; in each case
// its whole process group is gone by the time Wait returns.
func Start(ctx context.Context, opts Options) (*Process, error) {
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		return nil, fmt.Errorf("start command: %w", err)
	}
	argv := []string{"bash", "-c", opts.Command} // messages read "bash: ...", not the full path
	path := bash
	if opts.Sandbox != nil {
		if err := CheckSandbox(ctx, opts.Sandbox); err != nil {
			return nil, fmt.Errorf("start command: %w", err)
		}
		if path, err = opts.Sandbox.binary(); err != nil {
			return nil, fmt.Errorf("start command: %w", err)
		}
		argv = opts.Sandbox.argv(path, opts.Dir, opts.Command)
	}
	env := opts.Env
	if env == nil {
		env = Environ(os.Environ(), nil)
	}
	var extra []*os.File
	if opts.Sandbox != nil {
		empty, err := emptyFD()
		if err != nil {
			return nil, fmt.Errorf("start command: %w", err)
		}
		defer empty.Close()
		extra = []*os.File{empty}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start command: %w", err)
	}
	newCmd := func() *exec.Cmd {
		cmd := &exec.Cmd{Path: path, Args: argv, Dir: opts.Dir, Env: env, ExtraFiles: extra}
		// Our own pipe rather than exec's copying goroutine: Wait must
		// not wait for grandchildren that inherited the write end.
		cmd.Stdout = pw
		cmd.Stderr = pw
		setGroup(cmd)
		return cmd
	}
	cmd := newCmd()
	cg, cgDir, inCgroup := newCgroup()
	reserved := 0
	if inCgroup {
		intoCgroup(cmd, cgDir)
		reserved = tracked.reserve(cg)
	}
	exited, err := launch(cmd)
	if inCgroup {
		cgDir.Close()
		if err != nil {
			// The hierarchy refused the command; run it without.
			tracked.release(reserved)
			reserved = 0
			cgroupRemove(cg)
			disableCgroups()
			cg = ""
			cmd = newCmd()
			exited, err = launch(cmd)
		}
	}
	if err != nil {
		tracked.release(reserved)
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("start command: %w", err)
	}
	pw.Close()
	if testHookStarted != nil {
		testHookStarted()
	}

	p := &Process{pid: cmd.Process.Pid, cgroup: cg, done: make(chan struct{}), stopReq: make(chan struct{})}
	tracked.add(Group{Pgid: p.pid, Start: readStart(p.pid), Cgroup: cg, Command: describeCommand(opts.Command)}, reserved)
	buf := NewBuffer(opts.OutputCap)
	var out io.Writer = buf
	if opts.Stream != nil {
		out = io.MultiWriter(buf, opts.Stream)
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(out, pr)
	}()
	go p.supervise(ctx, opts, cmd, pr, buf, copied, exited)
	return p, nil
}

// testHookStarted, when a test sets it, runs between a command's start and
// its record: the window reserve covers.
var testHookStarted func()

// launch starts cmd and waits for it in a goroutine locked to its OS
// thread until the command has exited: the parent-death signal is tied
// to the thread that forked, which must therefore outlive the command.
// The returned channel is closed once the command has exited and been
// reaped.
func launch(cmd *exec.Cmd) (<-chan struct{}, error) {
	started := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
	}()
	if err := <-started; err != nil {
		<-exited
		return nil, err
	}
	return exited, nil
}

// supervise waits for the end of the command, kills its group and records
// the result. It owns the two goroutines Start began and waits for both.
func (p *Process) supervise(ctx context.Context, opts Options, cmd *exec.Cmd, pr *os.File, buf *Buffer, copied chan struct{}, exited <-chan struct{}) {
	defer close(p.done)
	defer tracked.remove(p.pid)
	start := time.Now()
	var timeout <-chan time.Time
	if opts.Timeout > 0 {
		t := time.NewTimer(opts.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var res Result
	select {
	case <-exited:
	case <-timeout:
		res.TimedOut = true
	case <-ctx.Done():
		res.Canceled = true
	case <-p.stopReq:
		res.Canceled = true
	}
	if res.TimedOut || res.Canceled {
		signalGroup(p.pid, sigTerm)
		grace := time.NewTimer(opts.Grace)
		select {
		case <-exited:
		case <-grace.C:
		}
		grace.Stop()
	}
	// Whatever the command left behind in its group goes with it: a
	// foreground command's orphans would have no owner to stop them. Its
	// cgroup, when it has one, also holds what left the group.
	signalGroup(p.pid, sigKill)
	if p.cgroup != "" {
		cgroupKill(p.cgroup)
	}
	<-exited
	drain := time.NewTimer(pipeDrain)
	select {
	case <-copied:
	case <-drain.C:
		pr.Close() // unblocks the copy; a process outside the group holds the pipe
		<-copied
	}
	drain.Stop()
	pr.Close()
	waitGroupGone(p.pid, goneWait)
	if p.cgroup != "" {
		cgroupRemove(p.cgroup)
	}

	res.Output = buf.String()
	res.Truncated = buf.Truncated()
	res.ExitCode = cmd.ProcessState.ExitCode()
	res.Duration = time.Since(start)
	p.result = res
}

// Pid is the process id of the command's bash, which is also its process
// group id.
func (p *Process) Pid() int { return p.pid }

// Done is closed when the command and its group are gone.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stop kills the command's process group (SIGTERM, then SIGKILL after the
// grace period) and waits until it is gone.
func (p *Process) Stop() Result {
	p.stopOne.Do(func() { close(p.stopReq) })
	return p.Wait()
}

// Wait waits for the command and its group to be gone and returns the
// result.
func (p *Process) Wait() Result {
	<-p.done
	return p.result
}
