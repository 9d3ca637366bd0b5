package hook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/settings"
	"github.com/troupe-dev/troupe/internal/shell"
)

const (
	// outputCap bounds what is kept of a hook's stdout and of its stderr.
	outputCap = 1 << 20
	// drainWait bounds the wait for a hook's output once its shell is
	// gone: a process that left the group (setsid) may hold a pipe open.
	drainWait = 2 * time.Second
)

// Result is what one hook command did.
type Result struct {
	Hook     settings.Hook
	PID      int // the shell's pid, which is also its process group
	ExitCode int // -1 when it did not exit on its own
	Stdout   string
	Stderr   string
	Duration time.Duration
	TimedOut bool
	// Err is a problem that did not block: a timeout, a failure to
	// start, an exit status other than 0 and 2, unreadable JSON output.
	Err error
}

// capped keeps the first max bytes written to it.
type capped struct {
	buf bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// exec runs one hook command with the event on stdin, in its own process
// group, killed with its group at its timeout. Whatever happens, it returns
// once the shell is gone and its output read or abandoned, never later
// than the timeout plus drainWait and WaitDelay.
func (r *Runner) exec(ctx context.Context, h settings.Hook, stdin []byte) Result {
	res := Result{Hook: h, ExitCode: -1}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = r.cfg.DefaultTimeout
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	outR, outW, err := os.Pipe()
	if err != nil {
		res.Err = fmt.Errorf("%s could not start: %w", describe(h), err)
		return res
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		res.Err = fmt.Errorf("%s could not start: %w", describe(h), err)
		return res
	}
	cmd := exec.CommandContext(tctx, r.cfg.Shell, "-c", h.Command)
	cmd.Dir = r.cfg.Dir
	// Hooks see what tools see: no provider key, no troupe internals; the
	// variables troupe means them to have come after.
	cmd.Env = append(shell.Environ(os.Environ(), nil), r.cfg.Env...)
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = outW, errW
	setGroup(cmd)
	cmd.Cancel = func() error {
		killGroup(cmd.Process.Pid)
		return nil
	}
	cmd.WaitDelay = drainWait // a grandchild holding stdin
	start := r.cfg.Now()
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		res.Err = fmt.Errorf("%s could not start: %w", describe(h), err)
		return res
	}
	res.PID = cmd.Process.Pid
	stdout, stderr := &capped{max: outputCap}, &capped{max: outputCap}
	var readers sync.WaitGroup
	readers.Go(func() { _, _ = io.Copy(stdout, outR) })
	readers.Go(func() { _, _ = io.Copy(stderr, errR) })

	werr := cmd.Wait()
	// Nothing a hook started outlives it: its background processes would
	// hold its pipes and run on unaccounted for.
	killGroup(res.PID)
	waitGone(res.PID)
	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainWait):
		outR.Close() // unblocks the readers
		errR.Close()
		<-drained
	}
	outR.Close()
	errR.Close()
	res.Duration = r.cfg.Now().Sub(start)
	res.Stdout, res.Stderr = stdout.buf.String(), stderr.buf.String()

	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		res.Err = fmt.Errorf("%s was stopped: %w", describe(h), ctx.Err())
	case errors.Is(tctx.Err(), context.DeadlineExceeded):
		res.TimedOut = true
		res.Err = fmt.Errorf("%s timed out after %v and was killed", describe(h), timeout)
	case werr == nil:
		res.ExitCode = 0
	case errors.As(werr, &exitErr) && exitErr.Exited():
		res.ExitCode = exitErr.ExitCode()
	default:
		res.Err = fmt.Errorf("%s failed: %w", describe(h), werr)
	}
	return res
}

// waitGone waits, boundedly, for the killed group to disappear: SIGKILL
// is delivered asynchronously and the kernel gives no event to wait on.
func waitGone(pgid int) {
	deadline := time.Now().Add(drainWait)
	for shell.GroupAlive(pgid) && time.Now().Before(deadline) {
		killGroup(pgid)
		time.Sleep(2 * time.Millisecond)
	}
}

// describe names a hook in messages: its command (shortened), event and
// file.
func describe(h settings.Hook) string {
	c := strings.Join(strings.Fields(h.Command), " ")
	if h.Type == "prompt" || h.Type == "agent" {
		c = strings.Join(strings.Fields(h.Prompt), " ")
	}
	if r := []rune(c); len(r) > 60 {
		c = string(r[:57]) + "..."
	}
	kind := "hook"
	if h.Type == "prompt" || h.Type == "agent" {
		kind = h.Type + " hook"
	}
	s := fmt.Sprintf("%s %q (%s", kind, c, h.Event)
	if h.Source.Path != "" {
		s += ", " + h.Source.Path
	}
	return s + ")"
}

func firstLine(s string, n int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if r := []rune(s); len(r) > n {
		s = string(r[:n]) + "..."
	}
	return s
}
