// Package pace makes a concurrent team run reproducible. Agents of a team
// share state (inboxes, the task board, the roster) and what each of them
// sees depends on the order in which the others changed it. A Pacer gives
// the agents one turn to share: an agent holds the turn whenever it runs,
// and gives it up only while it waits for a model response or for an
// event. Model calls, the slow part, still overlap; everything that reads
// or changes team state happens one agent at a time.
//
// Recording, every taking of the turn is written down in order (a Step).
// Replaying, each agent takes the turn only when the recording says it is
// its turn, so every agent meets the state it met when the run was
// recorded, whatever the timing. An agent that wants the turn for another
// reason than the recorded one (it returned from a model call where the
// recording has it woken by an event, say) has diverged; so has a replay
// that stops moving while agents wait for a turn the recording gives to an
// agent that never asks.
//
// A nil *Pacer paces nothing: every method is then a plain pass-through,
// which is how troupe runs unless it records or replays.
//
// It must never depend on agents, tools, teams or the store.
package pace

import (
	"context"
	"fmt"
	"iter"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/llm"
)

// Kinds of step.
const (
	// KindStart is an agent's first turn: its runtime started.
	KindStart = "start"
	// KindCall is the turn an agent takes back when model call N (the
	// agent's own count, from 1) answered.
	KindCall = "call"
	// KindWake is the turn an agent takes back after waiting; N is which
	// of the things it waited for woke it.
	KindWake = "wake"
)

// Step is one taking of the turn.
type Step struct {
	Agent string `json:"agent"`
	Kind  string `json:"kind"`
	N     int    `json:"n,omitempty"`
}

func (s Step) String() string {
	switch s.Kind {
	case KindCall:
		return fmt.Sprintf("%s back from model call %d", s.Agent, s.N)
	case KindWake:
		return fmt.Sprintf("%s woken (event %d)", s.Agent, s.N)
	case KindStart:
		return s.Agent + " starting"
	}
	return s.Agent + " " + s.Kind
}

// Divergence is a replay that no longer follows its recording.
type Divergence struct {
	// Index is the 0-based position in the recorded schedule.
	Index int
	Want  string // what the recording has there
	Got   string // what the replay did
}

func (d *Divergence) Error() string {
	return fmt.Sprintf("replay diverged at step %d of the schedule: the recording has %s, the replay %s", d.Index+1, d.Want, d.Got)
}

// Options configure a Pacer.
type Options struct {
	// Record receives each step in order while the taker holds the turn
	// (recording).
	Record func(Step)
	// Stall is how long a replay may stand still, nobody holding the turn
	// and the next recorded taker absent, before it is reported as a
	// divergence (default 10s).
	Stall time.Duration
	// OnDiverge is called once, with the first divergence (replaying).
	OnDiverge func(error)
}

// Pacer shares one turn between a team's agents. Its methods are safe for
// concurrent use; each agent must use it from one goroutine at a time.
type Pacer struct {
	opts   Options
	replay bool
	steps  []Step // replay: the recorded schedule

	mu      sync.Mutex
	holder  string // who holds the turn; "" nobody
	next    int    // replay: index of the next recorded step
	changed chan struct{}
	waiting map[string]Step // replay: who waits for a turn, for what
	busy    map[string]int  // replay: who is away doing real work (Block, a job)
	free    bool            // replay gave up pacing (diverged or closed)
	div     error
	calls   map[string]int
	moved   time.Time
	stop    chan struct{}
	sem     chan struct{} // recording: the turn
}

// NewRecorder returns a Pacer that records the order in which agents take
// the turn.
func NewRecorder(opts Options) *Pacer {
	p := newPacer(opts)
	p.sem = make(chan struct{}, 1)
	return p
}

// NewReplayer returns a Pacer that gives the turn in the order of steps.
func NewReplayer(steps []Step, opts Options) *Pacer {
	p := newPacer(opts)
	p.replay, p.steps = true, steps
	p.moved = time.Now()
	if p.opts.Stall <= 0 {
		p.opts.Stall = 10 * time.Second
	}
	go p.watch()
	return p
}

func newPacer(opts Options) *Pacer {
	return &Pacer{opts: opts, changed: make(chan struct{}), waiting: map[string]Step{}, busy: map[string]int{}, calls: map[string]int{}, stop: make(chan struct{})}
}

// Close ends pacing: every waiter goes on unpaced. It is safe to call more
// than once.
func (p *Pacer) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.free {
		p.free = true
		close(p.stop)
		p.broadcast()
	}
}

// Err returns the first divergence of a replay, or nil.
func (p *Pacer) Err() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.div
}

// Remaining is how many recorded steps a replay has not taken yet.
func (p *Pacer) Remaining() int {
	if p == nil || !p.replay {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.steps) - p.next
}

// Enter takes the turn for an agent whose runtime starts.
func (p *Pacer) Enter(ctx context.Context, agent string) {
	if p == nil {
		return
	}
	_, _ = p.acquire(ctx, Step{Agent: agent, Kind: KindStart})
}

// Leave gives the turn up for good: the agent's runtime ends.
func (p *Pacer) Leave(agent string) {
	if p == nil {
		return
	}
	p.release(agent)
}

// Wait gives the turn up while wait blocks, and takes it back when wait
// returns which of the things it waited for happened (0, 1, …; a negative
// value means ctx ended). Replaying, wait is not called: the agent sleeps
// until the recording says it woke, and gets the recorded answer, so it
// must re-examine the state it waits on rather than trust the event. A
// ctx that ends returns its error with the turn not taken back.
func (p *Pacer) Wait(ctx context.Context, agent string, wait func(context.Context) int) (int, error) {
	if p == nil || !p.held(agent) {
		return p.unpaced(ctx, wait)
	}
	p.release(agent)
	if p.replaying() {
		return p.acquire(ctx, Step{Agent: agent, Kind: KindWake})
	}
	i := wait(ctx)
	if i < 0 || ctx.Err() != nil {
		return -1, context.Cause(ctx)
	}
	return p.acquire(ctx, Step{Agent: agent, Kind: KindWake, N: i})
}

// Block gives the turn up while wait blocks on something that happens
// whatever the schedule (other agents' runtimes ending), and takes it back
// afterwards. Unlike Wait, wait is called when replaying too.
func (p *Pacer) Block(ctx context.Context, agent string, wait func(context.Context)) {
	if p == nil || !p.held(agent) {
		wait(ctx)
		return
	}
	p.release(agent)
	done := p.Busy(agent)
	wait(ctx)
	done()
	_, _ = p.acquire(ctx, Step{Agent: agent, Kind: KindWake})
}

// Busy says that name is away doing real work that takes the time it takes
// (a command, a job), until done is called: a replay that waits for name
// meanwhile is not standing still.
func (p *Pacer) Busy(name string) (done func()) {
	if p == nil {
		return func() {}
	}
	p.mu.Lock()
	p.busy[name]++
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			if p.busy[name]--; p.busy[name] <= 0 {
				delete(p.busy, name)
			}
			p.moved = time.Now()
			p.mu.Unlock()
		})
	}
}

func (p *Pacer) unpaced(ctx context.Context, wait func(context.Context) int) (int, error) {
	i := wait(ctx)
	if i < 0 {
		if err := context.Cause(ctx); err != nil {
			return -1, err
		}
		return -1, context.Canceled
	}
	return i, nil
}

// Provider wraps the provider of one agent so that the agent gives the
// turn up for each model call and takes it back when the answer is in.
// With a nil Pacer it returns inner.
func (p *Pacer) Provider(inner llm.Provider, agent string) llm.Provider {
	if p == nil {
		return inner
	}
	return &paced{inner: inner, p: p, agent: agent}
}

type paced struct {
	inner llm.Provider
	p     *Pacer
	agent string
}

func (c *paced) Name() string { return c.inner.Name() }

func (c *paced) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		p := c.p
		if !p.held(c.agent) {
			// Not a paced runtime of this agent (a nested call): as is.
			for ev, err := range c.inner.Stream(ctx, req) {
				if !yield(ev, err) {
					return
				}
			}
			return
		}
		p.mu.Lock()
		p.calls[c.agent]++
		n := p.calls[c.agent]
		p.mu.Unlock()
		p.release(c.agent)
		back := false
		takeBack := func() {
			if !back {
				back = true
				_, _ = p.acquire(ctx, Step{Agent: c.agent, Kind: KindCall, N: n})
			}
		}
		defer takeBack()
		for ev, err := range c.inner.Stream(ctx, req) {
			if err != nil || ev.Type == llm.EventDone {
				// The turn is back before the caller acts on the answer.
				takeBack()
			}
			if !yield(ev, err) {
				return
			}
		}
	}
}

func (p *Pacer) held(agent string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.holder == agent
}

func (p *Pacer) replaying() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.replay && !p.free
}

// broadcast wakes every replay waiter; p.mu is held.
func (p *Pacer) broadcast() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *Pacer) release(agent string) {
	p.mu.Lock()
	if p.holder != agent {
		p.mu.Unlock()
		return
	}
	p.holder = ""
	if p.replay {
		p.moved = time.Now()
		p.broadcast()
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	<-p.sem
}

// acquire takes the turn for s and returns s.N as recorded (a replayed wake
// gets the recorded event). An agent that already holds the turn keeps it.
// It returns an error, without the turn, when ctx ends.
func (p *Pacer) acquire(ctx context.Context, s Step) (int, error) {
	if ctx.Err() != nil {
		return -1, context.Cause(ctx)
	}
	if p.held(s.Agent) {
		return s.N, nil
	}
	if !p.replay {
		select {
		case p.sem <- struct{}{}:
		case <-ctx.Done():
			return -1, context.Cause(ctx)
		}
		p.mu.Lock()
		p.holder = s.Agent
		p.mu.Unlock()
		if p.opts.Record != nil {
			p.opts.Record(s)
		}
		return s.N, nil
	}
	for {
		p.mu.Lock()
		if p.free {
			// Diverged or closed: unpaced from now on.
			p.mu.Unlock()
			return s.N, nil
		}
		if p.holder == "" && p.next < len(p.steps) && p.steps[p.next].Agent == s.Agent {
			want := p.steps[p.next]
			if want.Kind != s.Kind || (s.Kind != KindWake && want.N != s.N) {
				d := &Divergence{Index: p.next, Want: want.String(), Got: s.String()}
				p.mu.Unlock()
				p.diverge(d)
				return s.N, nil
			}
			p.holder = s.Agent
			p.next++
			p.moved = time.Now()
			delete(p.waiting, s.Agent)
			p.mu.Unlock()
			return want.N, nil
		}
		p.waiting[s.Agent] = s
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			p.mu.Lock()
			delete(p.waiting, s.Agent)
			p.mu.Unlock()
			return -1, context.Cause(ctx)
		}
	}
}

func (p *Pacer) diverge(err error) {
	p.mu.Lock()
	first := p.div == nil && !p.free
	if first {
		p.div = err
	}
	p.mu.Unlock()
	if first {
		if p.opts.OnDiverge != nil {
			p.opts.OnDiverge(err)
		}
		p.Close()
	}
}

// watch reports a replay that stands still.
func (p *Pacer) watch() {
	tick := time.NewTicker(p.opts.Stall / 10)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		if d := p.stalled(time.Now()); d != nil {
			p.diverge(d)
		}
	}
}

// stalled returns the divergence of a replay standing still at now: nobody
// holds the turn, agents wait for one, and the agent the recording gives it
// to has not come for the Stall time, nor is it away doing real work.
func (p *Pacer) stalled(now time.Time) *Divergence {
	p.mu.Lock()
	defer p.mu.Unlock()
	away := p.next < len(p.steps) && p.busy[p.steps[p.next].Agent] > 0
	if p.free || p.holder != "" || away || len(p.waiting) == 0 || now.Sub(p.moved) < p.opts.Stall {
		return nil
	}
	var got []string
	for _, s := range p.waiting {
		got = append(got, s.String())
	}
	sort.Strings(got)
	want := "the end of the recording"
	if p.next < len(p.steps) {
		want = p.steps[p.next].String()
	}
	return &Divergence{Index: p.next, Want: want,
		Got: fmt.Sprintf("stood still for %s with %s waiting", p.opts.Stall, strings.Join(got, ", "))}
}
