package shell

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Session is one long-lived bash that runs an agent's commands one after
// another, as Claude Code's Bash tool keeps its working directory from one
// call to the next. Starting bash costs more than most commands an agent
// runs; a session pays it once.
//
// Each command is written to a file the session's bash sources, with its
// standard input from /dev/null (a command reading stdin cannot eat the
// session's own input) and its output to the session's pipe, followed by a
// fresh random marker and the exit status (one write, without a newline
// before it: a reader woken once per command). A command that
// ends bash (exit, exec) or is killed (timeout, cancel: the whole process
// group goes, as with Run) leaves the session to start a new bash for the
// next command, in the directory the last one left.
//
// What differs from Run: the working directory and shell variables carry
// over; what a command leaves running in the background is not killed
// when it ends, only when a later command is killed or the session closes;
// no cgroup and no sandbox (callers use Run for sandboxed commands).
type Session struct {
	env []string

	mu     sync.Mutex             // one command at a time
	home   string                 // where the session began
	dir    atomic.Pointer[string] // where the next bash starts; read while a command runs
	tmp    string                 // private directory of the command files
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *os.File
	chunks chan []byte   // output read from the pipe; closed at EOF
	stop   chan struct{} // closed to end the reader
	exited <-chan struct{}
	closed bool
}

// NewSession returns a session whose bash starts in dir with env (nil:
// Environ of this process's environment, without the provider keys).
// Nothing starts before the first command.
func NewSession(dir string, env []string) *Session {
	if env == nil {
		env = Environ(os.Environ(), nil)
	}
	s := &Session{home: dir, env: env}
	s.dir.Store(&dir)
	return s
}

// ErrSessionBusy is returned by Session.Run while another command runs.
var ErrSessionBusy = errors.New("shell session busy")

// Dir is the directory the session's commands start in.
func (s *Session) Dir() string { return *s.dir.Load() }

// Run runs opts.Command in the session (opts.Dir, Env and Sandbox are
// ignored: the session has its own). It returns ErrSessionBusy at once when
// another command is running, and an error only when bash cannot start.
func (s *Session) Run(ctx context.Context, opts Options) (Result, error) {
	if !s.mu.TryLock() {
		return Result{}, ErrSessionBusy
	}
	defer s.mu.Unlock()
	if s.closed {
		return Result{}, errors.New("shell session closed")
	}
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	start := time.Now()
	if err := s.ensure(); err != nil {
		return Result{}, err
	}
	file := filepath.Join(s.tmp, "cmd")
	if err := writeCommand(file, opts.Command); err != nil {
		return Result{}, fmt.Errorf("shell session: %w", err)
	}
	var nb [8]byte
	_, _ = rand.Read(nb[:])
	id := hex.EncodeToString(nb[:])
	marker := []byte("\x1etroupe-" + id + " ")
	line := ". " + shellQuote(file) + " </dev/null >&9 2>&9; builtin printf >&9 '\\36troupe-%s %d\\n' " + id + " $?\n"
	if _, err := s.stdin.WriteString(line); err != nil {
		s.kill(opts.Grace)
		return Result{}, fmt.Errorf("shell session: %w", err)
	}

	buf := NewBuffer(opts.OutputCap)
	var out io.Writer = buf
	if opts.Stream != nil {
		out = io.MultiWriter(buf, opts.Stream)
	}
	var timeout <-chan time.Time
	if opts.Timeout > 0 {
		t := time.NewTimer(opts.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var (
		res     Result
		pending []byte // output not yet passed on: it may begin the marker
	)
	// ended is bash's end (exit, exec): what it wrote is in the pipe, its
	// status is the command's.
	ended := func() (Result, error) {
		signalGroup(s.cmd.Process.Pid, sigKill) // what it left behind
		out.Write(s.drain(pending))
		<-s.exited
		res.ExitCode = s.cmd.ProcessState.ExitCode()
		s.reap()
		return s.finish(res, buf, start), nil
	}
	for {
		select {
		case <-s.exited:
			return ended()
		case chunk, ok := <-s.chunks:
			if !ok {
				return ended()
			}
			pending = append(pending, chunk...)
			if i := bytes.Index(pending, marker); i >= 0 {
				if j := bytes.IndexByte(pending[i+len(marker):], '\n'); j >= 0 {
					out.Write(pending[:i])
					code, _ := strconv.Atoi(string(pending[i+len(marker) : i+len(marker)+j]))
					res.ExitCode = code
					if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", s.cmd.Process.Pid)); err == nil {
						s.dir.Store(&cwd)
					}
					return s.finish(res, buf, start), nil
				}
				continue
			}
			// Keep what could be the start of the marker.
			if keep := len(marker) - 1; len(pending) > keep {
				out.Write(pending[:len(pending)-keep])
				pending = append(pending[:0], pending[len(pending)-keep:]...)
			}
		case <-timeout:
			res.TimedOut = true
		case <-ctx.Done():
			res.Canceled = true
		}
		if res.TimedOut || res.Canceled {
			s.kill(opts.Grace)
			out.Write(s.drain(pending)) // what it wrote before it died
			res.ExitCode = -1
			s.reap()
			return s.finish(res, buf, start), nil
		}
	}
}

func (s *Session) finish(res Result, buf *Buffer, start time.Time) Result {
	res.Output = buf.String()
	res.Truncated = buf.Truncated()
	res.Duration = time.Since(start)
	return res
}

// ensure starts bash if none runs.
func (s *Session) ensure() error {
	if s.cmd != nil {
		return nil
	}
	if s.tmp == "" {
		tmp, err := os.MkdirTemp("", "troupe-shell-")
		if err != nil {
			return fmt.Errorf("shell session: %w", err)
		}
		s.tmp = tmp
	}
	if _, err := os.Stat(s.Dir()); err != nil {
		s.dir.Store(&s.home) // the last directory was removed
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		return fmt.Errorf("start shell session: %w", err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("start shell session: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return fmt.Errorf("start shell session: %w", err)
	}
	// bash reads its commands from the pipe a byte at a time, running
	// each line as it comes.
	cmd := &exec.Cmd{Path: bash, Args: []string{"bash", "--noprofile", "--norc", "-s"},
		Dir: s.Dir(), Env: s.env, Stdin: inR, Stdout: outW, Stderr: outW}
	setGroup(cmd)
	exited, err := launch(cmd)
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return fmt.Errorf("start shell session: %w", err)
	}
	tracked.add(Group{Pgid: cmd.Process.Pid, Start: readStart(cmd.Process.Pid), Command: "troupe shell session"}, 0)
	chunks, stop := make(chan []byte, 16), make(chan struct{})
	go func() {
		defer close(chunks)
		b := make([]byte, 32<<10)
		for {
			n, err := outR.Read(b)
			if n > 0 {
				select {
				case chunks <- bytes.Clone(b[:n]):
				case <-stop:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	s.cmd, s.stdin, s.stdout, s.chunks, s.stop, s.exited = cmd, inW, outR, chunks, stop, exited
	// fd 9 is the output pipe, kept aside: a command that redirects its
	// own output for good (exec >file) cannot hide the marker.
	if _, err := inW.WriteString("exec 9>&1\n"); err != nil {
		s.kill(DefaultGrace)
		s.reap()
		return fmt.Errorf("start shell session: %w", err)
	}
	return nil
}

// drain adds to pending what the pipe still holds, waiting at most
// pipeDrain for its end: a process outside the group may hold it open.
func (s *Session) drain(pending []byte) []byte {
	t := time.NewTimer(pipeDrain)
	defer t.Stop()
	for {
		select {
		case c, ok := <-s.chunks:
			if !ok {
				return pending
			}
			pending = append(pending, c...)
		case <-t.C:
			return pending
		}
	}
}

// kill ends bash and its process group: SIGTERM, then SIGKILL after grace.
func (s *Session) kill(grace time.Duration) {
	pid := s.cmd.Process.Pid
	signalGroup(pid, sigTerm)
	t := time.NewTimer(grace)
	select {
	case <-s.exited:
	case <-t.C:
	}
	t.Stop()
	signalGroup(pid, sigKill)
	<-s.exited
}

// reap forgets a bash that has exited, killing what it left in its group;
// the next command starts a new one.
func (s *Session) reap() {
	pid := s.cmd.Process.Pid
	signalGroup(pid, sigKill)
	s.stdin.Close()
	close(s.stop)
	s.stdout.Close()
	for range s.chunks { // the reader ends
	}
	waitGroupGone(pid, goneWait)
	tracked.remove(pid)
	s.cmd, s.stdin, s.stdout, s.chunks, s.stop, s.exited = nil, nil, nil, nil, nil, nil
}

// Close ends the session's bash and its process group and removes its
// files. The session runs nothing after.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.cmd != nil {
		s.kill(DefaultGrace)
		s.reap()
	}
	if s.tmp != "" {
		return os.RemoveAll(s.tmp)
	}
	return nil
}

// writeCommand writes command to file, over what the last command left
// there. It does not truncate the file to nothing first: ext4 flushes a
// file truncated to nothing and written again at its close (its
// auto_da_alloc), which cost more than the rest of a short command.
func writeCommand(file, command string) error {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(command)
	if err == nil {
		err = f.Truncate(int64(len(command)))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// shellQuote quotes s for bash as one word: in single quotes when that
// is enough, else with every unusual byte escaped.
func shellQuote(s string) string {
	plain := true
	for i := 0; i < len(s) && plain; i++ {
		c := s[i]
		plain = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("/-_.+,:@%", c) >= 0
	}
	if plain {
		return "'" + s + "'"
	}
	return "$'" + hexEscape(s) + "'"
}

func hexEscape(s string) string {
	var b bytes.Buffer
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == ' ' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, `\x%02x`, c)
	}
	return b.String()
}
