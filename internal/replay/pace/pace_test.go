package pace

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/llm"
)

// instant is a provider that answers at once, after an optional hook.
type instant struct{ before func() error }

func (instant) Name() string { return "instant" }

func (p instant) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		if p.before != nil {
			if err := p.before(); err != nil {
				yield(llm.Event{}, err)
				return
			}
		}
		yield(llm.Event{Type: llm.EventDone, Response: &llm.Response{Message: llm.Message{Role: llm.RoleAssistant}}}, nil)
	}
}

func call(t *testing.T, p llm.Provider) {
	t.Helper()
	if _, err := llm.Collect(p.Stream(context.Background(), &llm.Request{}), nil); err != nil {
		t.Error(err)
	}
}

// jitter lets the scheduler run others for a random while, so that runs
// interleave differently.
func jitter() {
	for range rand.IntN(200) {
		runtime.Gosched()
	}
}

// team runs agents that each take turns: in each turn they append to a
// shared log what they saw of it (its length) and who they are, then either
// wait or make a model call. It returns the log.
func team(t *testing.T, p *Pacer, agents, rounds int) []string {
	t.Helper()
	var (
		mu     sync.Mutex
		log    []string
		inside atomic.Int32
		wg     sync.WaitGroup
	)
	step := func(name string, r int) {
		if n := inside.Add(1); n != 1 && p != nil {
			t.Errorf("%d agents hold the turn at once", n)
		}
		jitter()
		mu.Lock()
		log = append(log, fmt.Sprintf("%s/%d saw %d", name, r, len(log)))
		mu.Unlock()
		inside.Add(-1)
	}
	for a := range agents {
		name := fmt.Sprintf("agent%d", a)
		prov := p.Provider(instant{before: func() error { jitter(); return nil }}, name)
		wg.Go(func() {
			p.Enter(context.Background(), name)
			defer p.Leave(name)
			for r := range rounds {
				step(name, r)
				if (r+a)%2 == 0 {
					call(t, prov)
					continue
				}
				if _, err := p.Wait(context.Background(), name, func(context.Context) int { jitter(); return r % 3 }); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	return log
}

func TestReplayFollowsTheRecordedOrder(t *testing.T) {
	for range 10 {
		var steps []Step
		rec := NewRecorder(Options{Record: func(s Step) { steps = append(steps, s) }})
		want := team(t, rec, 4, 12)
		if len(steps) != 4*13 {
			t.Fatalf("recorded %d steps, want %d (a start and one per round for each agent)", len(steps), 4*13)
		}
		if !slices.ContainsFunc(steps, func(s Step) bool { return s.Kind == KindCall && s.N == 6 }) ||
			!slices.ContainsFunc(steps, func(s Step) bool { return s.Kind == KindWake && s.N == 2 }) {
			t.Fatalf("steps lack numbered calls or wake events: %v", steps)
		}
		for range 3 {
			rp := NewReplayer(steps, Options{Stall: 5 * time.Second, OnDiverge: func(err error) { t.Error(err) }})
			got := team(t, rp, 4, 12)
			if err := rp.Err(); err != nil {
				t.Fatal(err)
			}
			if rp.Remaining() != 0 {
				t.Fatalf("%d steps left", rp.Remaining())
			}
			rp.Close()
			if !slices.Equal(got, want) {
				t.Fatalf("replayed order differs:\n got %v\nwant %v", got, want)
			}
		}
	}
}

func TestReplayedWakeGetsTheRecordedEvent(t *testing.T) {
	rp := NewReplayer([]Step{{Agent: "a", Kind: KindStart}, {Agent: "a", Kind: KindWake, N: 2}}, Options{})
	defer rp.Close()
	rp.Enter(context.Background(), "a")
	called := false
	i, err := rp.Wait(context.Background(), "a", func(context.Context) int { called = true; return 0 })
	if err != nil || i != 2 || called {
		t.Fatalf("Wait = %d, %v (wait called: %v); want the recorded 2 without waiting", i, err, called)
	}
}

func TestNilPacerPassesThrough(t *testing.T) {
	var p *Pacer
	p.Enter(context.Background(), "a")
	i, err := p.Wait(context.Background(), "a", func(context.Context) int { return 3 })
	if i != 3 || err != nil {
		t.Fatalf("Wait = %d, %v", i, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Wait(ctx, "a", func(context.Context) int { return -1 }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on an ended context = %v", err)
	}
	ran := false
	p.Block(context.Background(), "a", func(context.Context) { ran = true })
	inner := &instant{}
	if !ran || p.Provider(inner, "a") != llm.Provider(inner) || p.Err() != nil || p.Remaining() != 0 {
		t.Fatal("a nil pacer must not pace")
	}
	p.Leave("a")
	p.Close()
}

func TestModelCallGivesTheTurnUp(t *testing.T) {
	var steps []Step
	p := NewRecorder(Options{Record: func(s Step) { steps = append(steps, s) }})
	bDone := make(chan struct{})
	slow := p.Provider(instant{before: func() error {
		select {
		case <-bDone:
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("b never got the turn during a's model call")
		}
	}}, "a")
	p.Enter(context.Background(), "a")
	go func() {
		p.Enter(context.Background(), "b")
		p.Leave("b")
		close(bDone)
	}()
	call(t, slow)
	p.Leave("a")
	want := []Step{{Agent: "a", Kind: KindStart}, {Agent: "b", Kind: KindStart}, {Agent: "a", Kind: KindCall, N: 1}}
	if !slices.Equal(steps, want) {
		t.Fatalf("steps %v, want %v", steps, want)
	}
}

func TestReplayReportsAnotherKindOfTurn(t *testing.T) {
	var reported error
	rp := NewReplayer([]Step{{Agent: "a", Kind: KindStart}, {Agent: "a", Kind: KindCall, N: 1}},
		Options{OnDiverge: func(err error) { reported = err }})
	rp.Enter(context.Background(), "a")
	// The code changed: a waits where it used to call its model.
	if _, err := rp.Wait(context.Background(), "a", func(context.Context) int { return 0 }); err != nil {
		t.Fatal(err)
	}
	err := rp.Err()
	var d *Divergence
	if !errors.As(err, &d) || d.Index != 1 || reported != err {
		t.Fatalf("Err = %v, reported %v; want a divergence at step 2", err, reported)
	}
	if !strings.Contains(err.Error(), "a back from model call 1") || !strings.Contains(err.Error(), "a woken") {
		t.Fatalf("the divergence does not say what differs: %v", err)
	}
}

func TestReplayThatStandsStillIsReported(t *testing.T) {
	got := make(chan error, 1)
	rp := NewReplayer([]Step{{Agent: "a", Kind: KindStart}, {Agent: "b", Kind: KindStart}},
		Options{Stall: 50 * time.Millisecond, OnDiverge: func(err error) { got <- err }})
	defer rp.Close()
	rp.Enter(context.Background(), "a")
	rp.Leave("a")
	// b never comes; c, which the recording does not know, waits.
	entered := make(chan struct{})
	go func() {
		rp.Enter(context.Background(), "c")
		close(entered)
	}()
	select {
	case err := <-got:
		if !strings.Contains(err.Error(), "b starting") || !strings.Contains(err.Error(), "c starting waiting") {
			t.Fatalf("the stall report does not name who was expected and who waits: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no stall reported")
	}
	select {
	case <-entered: // pacing is off once diverged: c goes on
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting agent was not let go after the divergence")
	}
}

func TestEndedContextLetsGo(t *testing.T) {
	rp := NewReplayer([]Step{{Agent: "a", Kind: KindStart}}, Options{})
	defer rp.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		rp.Enter(ctx, "b") // not b's turn: waits until ctx ends
		close(done)
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter whose context ended still waits")
	}
	if rp.held("b") {
		t.Fatal("b took the turn without it being its turn")
	}
}

// TestBusyIsNotStandingStill: while the agent whose turn it is does real
// work (a long command, a background job), waiting for it is no stall.
func TestBusyIsNotStandingStill(t *testing.T) {
	rp := NewReplayer([]Step{{Agent: "a", Kind: KindStart}, {Agent: "a/bg_1", Kind: KindStart}}, Options{Stall: time.Hour})
	defer rp.Close()
	rp.Enter(context.Background(), "a")
	done := rp.Busy("a/bg_1") // the job runs
	rp.Leave("a")
	entered := make(chan struct{})
	go func() {
		rp.Enter(context.Background(), "c") // waits: not c's turn
		close(entered)
	}()
	for {
		rp.mu.Lock()
		_, in := rp.waiting["c"]
		rp.mu.Unlock()
		if in {
			break
		}
		runtime.Gosched()
	}
	later := time.Now().Add(2 * time.Hour)
	if d := rp.stalled(later); d != nil {
		t.Fatalf("a busy job was taken for a stall: %v", d)
	}
	done()
	d := rp.stalled(time.Now().Add(2 * time.Hour))
	if d == nil || !strings.Contains(d.Error(), "a/bg_1 starting") || !strings.Contains(d.Error(), "c starting waiting") {
		t.Fatalf("once the job is done and absent: %v", d)
	}
	rp.Close()
	<-entered
}
