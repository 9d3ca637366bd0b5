// Package shell runs bash commands for agents, each in its own process
// group, so that a timeout, a cancelled context or a stopped background job
// takes every process the command started with it, grandchildren included,
// and never hangs on a pipe a stray grandchild keeps open.
//
// It must never depend on tools, agents or teams.
package shell

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
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
	// Env is the environment; nil inherits the caller's.
	Env []string
	// Grace is the time between SIGTERM and SIGKILL; zero means
	// DefaultGrace.
	Grace time.Duration
	// Stream, when set, also receives the output as it is produced.
	Stream io.Writer
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
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start command: %w", err)
	}
	cmd := exec.Command(bash, "-c", opts.Command)
	cmd.Args[0] = "bash" // messages read "bash: ...", not the full path
	cmd.Dir = opts.Dir
	cmd.Env = opts.Env
	// Our own pipe rather than exec's copying goroutine: Wait must not
	// wait for grandchildren that inherited the write end.
	cmd.Stdout = pw
	cmd.Stderr = pw
	setGroup(cmd)
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("start command: %w", err)
	}
	pw.Close()

	p := &Process{pid: cmd.Process.Pid, done: make(chan struct{}), stopReq: make(chan struct{})}
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
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		cmd.Wait()
	}()
	go p.supervise(ctx, opts, cmd, pr, buf, copied, exited)
	return p, nil
}

// supervise waits for the end of the command, kills its group and records
// the result. It owns the two goroutines Start began and waits for both.
func (p *Process) supervise(ctx context.Context, opts Options, cmd *exec.Cmd, pr *os.File, buf *Buffer, copied, exited chan struct{}) {
	defer close(p.done)
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
	// foreground command's orphans would have no owner to stop them.
	signalGroup(p.pid, sigKill)
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
