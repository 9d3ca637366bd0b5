package tool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/shell"
)

// JobOutputCap bounds the output a job keeps (its head and its tail).
const JobOutputCap = 50_000

// JobState is where a background job is in its life.
type JobState string

const (
	JobRunning   JobState = "running"
	JobCompleted JobState = "completed"
	JobFailed    JobState = "failed"
	JobStopped   JobState = "stopped"
)

// JobStatus is a snapshot of one job.
type JobStatus struct {
	ID          string   `json:"id"`
	Kind        string   `json:"kind"`
	Description string   `json:"description"`
	State       JobState `json:"state"`
	// ExitCode is set for jobs whose run function reported one (shell
	// commands); see ExitStatus.
	ExitCode *int `json:"exit_code,omitempty"`
	// Error is why a failed job failed, when that is not only an exit code.
	Error string `json:"error,omitempty"`
	// Output is what the job wrote, capped at JobOutputCap.
	Output string `json:"output"`
}

// ExitStatus is an error a job's run function returns to report an exit
// code; code 0 is a success. Any error with an ExitCode() int method
// works the same way.
type ExitStatus int

func (e ExitStatus) Error() string { return "exit code " + strconv.Itoa(int(e)) }

// ExitCode is the reported exit code.
func (e ExitStatus) ExitCode() int { return int(e) }

// Jobs tracks one agent's background work: shell commands started with
// run_in_background and, later, background subagents. Jobs owns each job's
// goroutine; Stop and StopAll wait for them. It is safe for concurrent use.
type Jobs struct {
	mu      sync.Mutex
	next    int
	jobs    map[string]*job
	pending []string // finished, not yet taken nor read
	pacing  JobPacing
	wg      sync.WaitGroup
}

// JobPacing lets a run that orders its agents' turns (package pace) order
// the ends of their jobs too, so that when a job is seen to end does not
// depend on timing. Both hooks are optional.
type JobPacing struct {
	// Start is told of each job as it starts, and returns what is called
	// once the job has ended, just before Settle.
	Start func(id string) (ended func())
	// Settle applies the end of job id (apply) when the run allows it.
	Settle func(id string, apply func())
	// Block runs f, a wait for jobs to end, letting the run go on
	// meanwhile (a job that has to settle must not wait for its waiter).
	Block func(f func())
}

// SetPacing sets the hooks that order this agent's jobs with the run.
func (j *Jobs) SetPacing(p JobPacing) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.pacing = p
}

// block runs f through the Block hook, if any.
func (j *Jobs) block(f func()) {
	j.mu.Lock()
	b := j.pacing.Block
	j.mu.Unlock()
	if b == nil {
		f()
		return
	}
	b(f)
}

type job struct {
	id, kind, desc string
	cancel         context.CancelFunc
	done           chan struct{}
	out            *shell.Buffer

	// Guarded by Jobs.mu.
	state    JobState
	exitCode *int
	errText  string
	stopping bool
}

// NewJobs returns an empty set of jobs.
func NewJobs() *Jobs { return &Jobs{jobs: map[string]*job{}} }

// Start runs run in the background and returns the job's id ("bg_1",
// "bg_2", ...). run must return when ctx is done; what it writes to out is
// kept, capped. A nil error completes the job; an error with an exit code
// (ExitStatus) completes it when the code is 0 and fails it otherwise; any
// other error fails it. A job cancelled through Stop ends as stopped.
func (j *Jobs) Start(kind, description string, run func(ctx context.Context, out io.Writer) error) string {
	ctx, cancel := context.WithCancel(context.Background())
	j.mu.Lock()
	j.next++
	jb := &job{
		id:     "bg_" + strconv.Itoa(j.next),
		kind:   kind,
		desc:   description,
		cancel: cancel,
		done:   make(chan struct{}),
		out:    shell.NewBuffer(JobOutputCap),
		state:  JobRunning,
	}
	j.jobs[jb.id] = jb
	j.wg.Add(1)
	start := j.pacing.Start
	j.mu.Unlock()
	ended := func() {}
	if start != nil {
		ended = start(jb.id)
	}

	go func() {
		defer j.wg.Done()
		defer close(jb.done)
		defer cancel()
		err := runJob(ctx, jb.out, run)
		ended()
		j.mu.Lock()
		settle := j.pacing.Settle
		j.mu.Unlock()
		if settle == nil {
			j.finish(jb, err)
			return
		}
		settle(jb.id, func() { j.finish(jb, err) })
	}()
	return jb.id
}

// runJob calls run, turning a panic into a failure of the job rather than
// of the agent.
func runJob(ctx context.Context, out io.Writer, run func(context.Context, io.Writer) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("job panicked: %v", r)
		}
	}()
	return run(ctx, out)
}

func (j *Jobs) finish(jb *job, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var coded interface{ ExitCode() int }
	if errors.As(err, &coded) {
		c := coded.ExitCode()
		jb.exitCode = &c
	}
	switch {
	case jb.stopping:
		jb.state = JobStopped
	case err == nil, jb.exitCode != nil && *jb.exitCode == 0:
		jb.state = JobCompleted
	default:
		jb.state = JobFailed
		if jb.exitCode == nil {
			jb.errText = err.Error()
		}
	}
	j.pending = append(j.pending, jb.id)
}

// Output returns the status of job id. With block set and the job still
// running, it first waits until the job ends, timeout passes (the job is
// then reported running, which is not an error) or ctx is done. Reading a
// finished job counts as announcing it: TakeFinished will not return it.
func (j *Jobs) Output(ctx context.Context, id string, block bool, timeout time.Duration) (JobStatus, error) {
	j.mu.Lock()
	jb, ok := j.jobs[id]
	j.mu.Unlock()
	if !ok {
		return JobStatus{}, j.unknown(id)
	}
	if block {
		t := time.NewTimer(timeout)
		defer t.Stop()
		j.block(func() {
			select {
			case <-jb.done:
			case <-t.C:
			case <-ctx.Done():
			}
		})
		if ctx.Err() != nil {
			return JobStatus{}, ctx.Err()
		}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	st := j.status(jb)
	if st.State != JobRunning {
		j.pending = slices.DeleteFunc(j.pending, func(p string) bool { return p == id })
	}
	return st, nil
}

// status snapshots jb; j.mu must be held.
func (j *Jobs) status(jb *job) JobStatus {
	return JobStatus{
		ID:          jb.id,
		Kind:        jb.kind,
		Description: jb.desc,
		State:       jb.state,
		ExitCode:    jb.exitCode,
		Error:       jb.errText,
		Output:      jb.out.String(),
	}
}

// Stop cancels job id and waits for it to end; a shell job's process group
// is gone when Stop returns. Stopping a job that already ended does
// nothing.
func (j *Jobs) Stop(id string) error {
	j.mu.Lock()
	jb, ok := j.jobs[id]
	if ok && jb.state == JobRunning {
		jb.stopping = true
	}
	j.mu.Unlock()
	if !ok {
		return j.unknown(id)
	}
	jb.cancel()
	j.block(func() { <-jb.done })
	return nil
}

// StopAll stops every running job and waits for all of them.
func (j *Jobs) StopAll() {
	j.mu.Lock()
	for _, jb := range j.jobs {
		if jb.state == JobRunning {
			jb.stopping = true
		}
		jb.cancel()
	}
	j.mu.Unlock()
	j.block(j.wg.Wait)
}

// TakeFinished returns the jobs that ended since the last call, in the
// order they ended, each once. Jobs whose end was already read through
// Output are left out.
func (j *Jobs) TakeFinished() []JobStatus {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []JobStatus
	for _, id := range j.pending {
		out = append(out, j.status(j.jobs[id]))
	}
	j.pending = nil
	return out
}

// List returns every job's status, oldest first.
func (j *Jobs) List() []JobStatus {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]JobStatus, 0, len(j.jobs))
	for _, jb := range j.jobs {
		out = append(out, j.status(jb))
	}
	sort.Slice(out, func(a, b int) bool { return jobNum(out[a].ID) < jobNum(out[b].ID) })
	return out
}

func jobNum(id string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "bg_"))
	return n
}

func (j *Jobs) unknown(id string) error {
	j.mu.Lock()
	ids := make([]string, 0, len(j.jobs))
	for k := range j.jobs {
		ids = append(ids, k)
	}
	j.mu.Unlock()
	sort.Slice(ids, func(a, b int) bool { return jobNum(ids[a]) < jobNum(ids[b]) })
	if len(ids) == 0 {
		return fmt.Errorf("%w %q: there are no background jobs", ErrNoJob, id)
	}
	return fmt.Errorf("%w %q; the jobs are: %s", ErrNoJob, id, strings.Join(ids, ", "))
}
