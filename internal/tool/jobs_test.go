package tool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func intp(i int) *int { return &i }

func TestJobsEndStates(t *testing.T) {
	tests := []struct {
		name string
		run  func(ctx context.Context, out io.Writer) error
		want JobStatus
	}{
		{"completed", func(_ context.Context, out io.Writer) error { fmt.Fprint(out, "hi"); return nil },
			JobStatus{State: JobCompleted, Output: "hi"}},
		{"exit zero", func(context.Context, io.Writer) error { return ExitStatus(0) },
			JobStatus{State: JobCompleted, ExitCode: intp(0)}},
		{"exit code", func(context.Context, io.Writer) error { return ExitStatus(2) },
			JobStatus{State: JobFailed, ExitCode: intp(2)}},
		{"error", func(context.Context, io.Writer) error { return errors.New("boom") },
			JobStatus{State: JobFailed, Error: "boom"}},
		{"panic", func(context.Context, io.Writer) error { panic("oops") },
			JobStatus{State: JobFailed, Error: "job panicked: oops"}},
		{"capped", func(_ context.Context, out io.Writer) error {
			fmt.Fprint(out, strings.Repeat("x", JobOutputCap+10))
			return nil
		},
			JobStatus{State: JobCompleted, Output: strings.Repeat("x", JobOutputCap/2) + "\n\n[... 10 bytes of output cut ...]\n\n" + strings.Repeat("x", JobOutputCap/2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := NewJobs()
			defer j.StopAll()
			id := j.Start("test", tt.name, tt.run)
			got, err := j.Output(t.Context(), id, true, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			want.ID, want.Kind, want.Description = "bg_1", "test", tt.name
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// waitCtx is a job that runs until it is stopped.
func waitCtx(ctx context.Context, out io.Writer) error {
	fmt.Fprintln(out, "started")
	<-ctx.Done()
	return ctx.Err()
}

func TestJobsStop(t *testing.T) {
	j := NewJobs()
	defer j.StopAll()
	id := j.Start("test", "forever", waitCtx)
	// A blocking read that times out reports the job running.
	got, err := j.Output(t.Context(), id, true, 10*time.Millisecond)
	if err != nil || got.State != JobRunning {
		t.Fatalf("Output = %+v, %v; want running", got, err)
	}
	// A blocking read whose context ends returns the context's error.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := j.Output(ctx, id, true, time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("Output with a cancelled context: %v", err)
	}
	if err := j.Stop(id); err != nil {
		t.Fatal(err)
	}
	got, _ = j.Output(t.Context(), id, false, 0)
	want := JobStatus{ID: id, Kind: "test", Description: "forever", State: JobStopped, Error: "", Output: "started\n"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := j.Stop(id); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := j.Stop("bg_7"); !errors.Is(err, ErrNoJob) || err.Error() != `no such background job "bg_7"; the jobs are: bg_1` {
		t.Errorf("Stop(bg_7) = %v", err)
	}
}

func TestJobsStopAll(t *testing.T) {
	j := NewJobs()
	for range 3 {
		j.Start("test", "forever", waitCtx)
	}
	done := j.Start("test", "quick", func(context.Context, io.Writer) error { return nil })
	if _, err := j.Output(t.Context(), done, true, time.Minute); err != nil {
		t.Fatal(err)
	}
	j.StopAll()
	var states []JobState
	for _, st := range j.List() {
		states = append(states, st.State)
	}
	if diff := cmp.Diff([]JobState{JobStopped, JobStopped, JobStopped, JobCompleted}, states); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}
}

func TestJobsTakeFinished(t *testing.T) {
	j := NewJobs()
	defer j.StopAll()
	release := make(chan struct{})
	blocked := func(ctx context.Context, out io.Writer) error { <-release; return nil }
	a := j.Start("test", "a", blocked)
	b := j.Start("test", "b", blocked)
	c := j.Start("test", "c", waitCtx)
	if got := j.TakeFinished(); len(got) != 0 {
		t.Fatalf("TakeFinished before any end: %+v", got)
	}
	close(release)
	for _, id := range []string{a, b} {
		// Wait for the end without reading it: a read would announce it.
		j.mu.Lock()
		jb := j.jobs[id]
		j.mu.Unlock()
		<-jb.done
	}
	got := j.TakeFinished()
	ignore := cmpopts.IgnoreFields(JobStatus{}, "Output")
	want := []JobStatus{{ID: a, Kind: "test", Description: "a", State: JobCompleted}, {ID: b, Kind: "test", Description: "b", State: JobCompleted}}
	if diff := cmp.Diff(want, got, ignore, cmpopts.SortSlices(func(x, y JobStatus) bool { return x.ID < y.ID })); diff != "" {
		t.Errorf("TakeFinished (-want +got):\n%s", diff)
	}
	if got := j.TakeFinished(); len(got) != 0 {
		t.Errorf("second TakeFinished: %+v", got)
	}
	// A job whose end the model read through Output is not announced.
	if err := j.Stop(c); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Output(t.Context(), c, false, 0); err != nil {
		t.Fatal(err)
	}
	if got := j.TakeFinished(); len(got) != 0 {
		t.Errorf("TakeFinished after Output read the end: %+v", got)
	}
	// Without a read, a stopped job is announced once.
	d := j.Start("test", "d", waitCtx)
	j.Stop(d)
	if got := j.TakeFinished(); len(got) != 1 || got[0].ID != d || got[0].State != JobStopped {
		t.Errorf("TakeFinished after Stop: %+v", got)
	}
}

func TestJobIDs(t *testing.T) {
	j := NewJobs()
	defer j.StopAll()
	var ids []string
	for range 3 {
		ids = append(ids, j.Start("test", "", func(context.Context, io.Writer) error { return nil }))
	}
	if diff := cmp.Diff([]string{"bg_1", "bg_2", "bg_3"}, ids); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestJobsPacing: a job's end is applied only when the Settle hook says
// so, and every wait for jobs goes through the Block hook.
func TestJobsPacing(t *testing.T) {
	j := NewJobs()
	release := make(chan struct{})
	var settled []string
	var blocks atomic.Int32
	j.SetPacing(JobPacing{
		Settle: func(id string, apply func()) {
			<-release
			settled = append(settled, id)
			apply()
		},
		Block: func(f func()) { blocks.Add(1); f() },
	})
	ran := make(chan struct{})
	id := j.Start("shell", "quick", func(ctx context.Context, out io.Writer) error {
		close(ran)
		return nil
	})
	<-ran
	st, err := j.Output(context.Background(), id, false, 0)
	if err != nil || st.State != JobRunning {
		t.Fatalf("before it settles the job must still run: %+v, %v", st, err)
	}
	if got := j.TakeFinished(); len(got) != 0 {
		t.Fatalf("announced before it settled: %v", got)
	}
	close(release)
	st, err = j.Output(context.Background(), id, true, time.Minute)
	if err != nil || st.State != JobCompleted || len(settled) != 1 || settled[0] != id {
		t.Fatalf("after it settled: %+v, %v, settled %v", st, err, settled)
	}
	if err := j.Stop(id); err != nil {
		t.Fatal(err)
	}
	j.StopAll()
	if n := blocks.Load(); n != 3 {
		t.Fatalf("%d waits went through Block, want 3 (Output with block, Stop, StopAll)", n)
	}
}
