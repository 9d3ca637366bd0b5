package team

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
)

// Interactive drives a session with a human at the keyboard (the terminal
// UI). The human's lines go to the lead; each lead turn runs under its own
// context, so Interrupt stops the turn and the conversation stays as it was
// up to that point. Between turns the lead is woken by its inbox as in a
// headless run, with one difference: a team that is done or stalled does
// not end the session, the human decides what comes next.
//
// Permission and plan requests reach the human through
// Config.HumanRequests, set when the session is made; Answer replies to
// them.
type Interactive struct {
	s        *Session
	onUpdate func(Update)
	wake     chan struct{}

	mu          sync.Mutex
	queue       []command
	cancel      context.CancelFunc // of the lead's turn in progress
	interrupted bool               // the turn in progress was interrupted

	// Touched by Run's goroutine only.
	waker    *leadWaker
	noteStop bool    // tell the lead its last turn was interrupted
	reported string  // the team state last reported
	resumed  bool    // Resume brought a team back before Run
	first    *wakeup // what the resumed lead must be told at once
}

// command is something the human asked of the lead.
type command struct {
	text    string
	compact bool
}

// UpdateKind names an Update.
type UpdateKind string

// What an Interactive reports, beyond the agents' and the team's events.
const (
	UpdateTurnStart UpdateKind = "turn_start" // the lead starts a turn (Why)
	UpdateTurnEnd   UpdateKind = "turn_end"   // the lead's turn ended (Text, Err, Interrupted)
	UpdateToLead    UpdateKind = "to_lead"    // inbox messages handed to the lead, verbatim (Messages)
	UpdateCompacted UpdateKind = "compacted"  // /compact finished (Err, Interrupted)
	UpdateTeam      UpdateKind = "team"       // the team is done or stalled (Text; "" when it is busy again)
	UpdateWarning   UpdateKind = "warning"    // something the human should review (Text), e.g. a settings file changed during the run
)

// Update is a change an Interactive reports to its UI.
type Update struct {
	Kind        UpdateKind
	Why         string
	Text        string
	Err         error
	Interrupted bool
	Messages    []store.Message
}

// NewInteractive returns a driver for s. onUpdate (may be nil) is called
// from Run's goroutine; it must not block for long.
func NewInteractive(s *Session, onUpdate func(Update)) *Interactive {
	if onUpdate == nil {
		onUpdate = func(Update) {}
	}
	return &Interactive{s: s, onUpdate: onUpdate, wake: make(chan struct{}, 1), waker: newLeadWaker(s)}
}

// Submit queues text for the lead; it is given to the lead as soon as the
// lead is not in a turn.
func (i *Interactive) Submit(text string) { i.push(command{text: text}) }

// Compact queues a compaction of the lead's conversation (/compact); focus
// says what the summary should dwell on.
func (i *Interactive) Compact(focus string) { i.push(command{text: focus, compact: true}) }

func (i *Interactive) push(c command) {
	i.mu.Lock()
	i.queue = append(i.queue, c)
	i.mu.Unlock()
	select {
	case i.wake <- struct{}{}:
	default:
	}
}

func (i *Interactive) take() (command, bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if len(i.queue) == 0 {
		return command{}, false
	}
	c := i.queue[0]
	i.queue = i.queue[1:]
	return c, true
}

// Interrupt stops the lead's turn in progress (or a compaction), keeping
// the conversation. It reports whether there was one to stop.
func (i *Interactive) Interrupt() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.cancel == nil {
		return false
	}
	i.interrupted = true
	i.cancel()
	return true
}

// Busy reports whether the lead is in a turn.
func (i *Interactive) Busy() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.cancel != nil
}

// Send sends text from the human to a member (`@alice text`). A message to
// the lead is queued like Submit.
func (i *Interactive) Send(ctx context.Context, to, text string) error {
	name, err := store.NormalizeName(to)
	if err != nil {
		return err
	}
	if name == store.LeadName {
		i.Submit(text)
		return nil
	}
	if _, err := i.s.Team(); err != nil {
		return fmt.Errorf("no team yet, so there is no %s to message: ask the lead to create one", name)
	}
	return i.s.SendAsHuman(ctx, name, text)
}

// Answer answers a permission or plan approval request as the human.
func (i *Interactive) Answer(ctx context.Context, requestID string, approve bool, feedback string) error {
	return i.s.AnswerAsHuman(ctx, requestID, approve, feedback)
}

// Running returns the names of the teammates whose runtime is up.
func (i *Interactive) Running() []string { return i.s.running() }

// Run drives the lead until ctx ends, and returns ctx's error. A failed
// lead turn does not end it: the failure is reported and the human goes on.
func (i *Interactive) Run(ctx context.Context) error {
	err := i.run(ctx)
	if ctx.Err() != nil {
		// Whatever was reading the store when the context ended says so in
		// its own words; the caller asked for the end, and gets its cause.
		return ctx.Err()
	}
	return err
}

func (i *Interactive) run(ctx context.Context) error {
	if !i.resumed {
		i.s.sessionStart(ctx, "startup")
	}
	if w := i.first; w != nil {
		i.first = nil
		if err := i.turn(ctx, *w); err != nil {
			return err
		}
	}
	for {
		w, err := i.next(ctx)
		if err != nil {
			return err
		}
		if err := i.turn(ctx, w); err != nil {
			return err
		}
	}
}

// Resume brings team name back into the session, as Session.Resume does,
// for Run to carry on with the human: the lead speaks first in Run when it
// was cut off mid-turn or has requests to answer. Call it before Run.
func (i *Interactive) Resume(ctx context.Context, name string) error {
	input, err := i.s.restore(ctx, name)
	if err != nil {
		return err
	}
	i.resumed = true
	if input != nil {
		i.first = &wakeup{input: input, why: "resume"}
	}
	return nil
}

// wakeup is what the lead is woken with.
type wakeup struct {
	input    []llm.Block
	why      string
	idleOnly bool
	compact  bool
	focus    string
}

// turn runs one lead turn (or a compaction) under its own context.
func (i *Interactive) turn(ctx context.Context, w wakeup) error {
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	i.mu.Lock()
	i.cancel, i.interrupted = cancel, false
	i.mu.Unlock()
	var u Update
	if w.compact {
		err := i.s.lead.Compact(tctx, w.focus)
		u = Update{Kind: UpdateCompacted, Err: err}
	} else {
		i.reported = ""
		i.onUpdate(Update{Kind: UpdateTurnStart, Why: w.why})
		r, err := i.s.runLead(tctx, w.input, w.idleOnly)
		u = Update{Kind: UpdateTurnEnd, Err: err}
		if r != nil {
			u.Text = r.Text
		}
	}
	i.mu.Lock()
	i.cancel = nil
	u.Interrupted = i.interrupted
	i.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if u.Interrupted {
		if errors.Is(u.Err, context.Canceled) {
			u.Err = nil
		}
		i.noteStop = !w.compact
	}
	i.onUpdate(u)
	return nil
}

// next waits for what should wake the lead: the human first, then the team,
// decided exactly as in a headless run (leadWaker). A team that is done,
// stalled or waiting for the human does not end the session: it is
// reported, and the human decides what comes next.
func (i *Interactive) next(ctx context.Context) (wakeup, error) {
	// Notification hooks (idle_prompt) hear once when the human has left
	// the lead waiting, as Claude Code tells them after a quiet minute.
	if h := i.s.cfg.Rules.hooks(); h.Has("Notification") {
		idle := time.AfterFunc(idlePromptAfter, func() {
			h.Notification(ctx, i.s.who, "idle_prompt", "Claude is waiting for your input", "")
		})
		defer idle.Stop()
	}
	quiet := false
	for {
		var human *wakeup
		wk, err := i.waker.next(ctx, i.wake, func() (wake, bool) {
			c, ok := i.take()
			if !ok {
				return wake{}, false
			}
			w, ok := i.fromHuman(ctx, c)
			if ok {
				human = &w
			}
			return wake{}, ok
		}, quiet)
		if err != nil {
			return wakeup{}, err
		}
		if human != nil {
			return *human, nil
		}
		if wk.end != "" {
			i.report(ctx, wk)
			quiet = true // wait for the human, or for the team to change
			continue
		}
		i.report(ctx, wake{})
		quiet = false
		if len(wk.messages) > 0 {
			i.onUpdate(Update{Kind: UpdateToLead, Messages: wk.messages})
		}
		return wakeup{input: wk.input, why: wk.why, idleOnly: wk.idleOnly}, nil
	}
}

// idlePromptAfter is how long the lead waits for the human before the
// idle_prompt notification.
const idlePromptAfter = 60 * time.Second

// fromHuman turns a queued command into the lead's next input; ok is
// false when a UserPromptSubmit hook dropped the prompt.
func (i *Interactive) fromHuman(ctx context.Context, c command) (wakeup, bool) {
	if c.compact {
		return wakeup{compact: true, focus: c.text}, true
	}
	// UserPromptSubmit hooks may refuse the prompt or add to it.
	extra, err := i.s.PromptHook(ctx, c.text)
	if err != nil {
		i.onUpdate(Update{Kind: UpdateTurnEnd, Err: err})
		return wakeup{}, false
	}
	var input []llm.Block
	if i.noteStop {
		input = append(input, llm.TextBlock("(The human interrupted your previous turn.)"))
		i.noteStop = false
	}
	input = append(input, llm.TextBlock(c.text))
	input = append(input, extra...)
	t, _ := i.s.Team()
	input = append(input, i.waker.release(ctx, t)...)
	return wakeup{input: input, why: "human"}, true
}

// report tells the UI when the team's state changes between done, stalled,
// waiting for the human and busy ("").
func (i *Interactive) report(_ context.Context, wk wake) {
	text := ""
	switch wk.end {
	case EndDone:
		text = "done"
	case EndStalled:
		text = "stalled: " + wk.endWhy
	case EndWaitingHuman:
		text = "waiting for the human: " + wk.endWhy
	}
	if text != i.reported {
		i.reported = text
		i.onUpdate(Update{Kind: UpdateTeam, Text: text})
	}
}
