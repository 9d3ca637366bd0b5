package team

import (
	"context"
	"reflect"
	"sync"

	"github.com/troupe-dev/troupe/internal/store"
)

// boardWaker watches one team's board for the idle members of this
// process: it reads the board once per change and wakes only the members
// who could act on it (a claimable task that fits them, or a task of their
// own in progress), instead of every idle member reading the whole board
// after every change to find, mostly, nothing.
type boardWaker struct {
	team    store.Team
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	waiters map[*boardWaiter]bool
}

// boardWaiter is one idle member waiting on the board.
type boardWaiter struct {
	wants func([]store.Task) bool // whether the member would act on this board
	ch    chan struct{}
}

// boardWakers shares a waker among the members of a team that hold the
// same store.Team (the in-process members of a session).
var boardWakers struct {
	mu sync.Mutex
	m  map[store.Team]*boardWaker
}

// watchBoard returns a channel that receives a value (coalesced) after a
// change to t's board for which wants is true, and the function that stops
// it. wants runs on the waker's goroutine. The watch is in place when
// watchBoard returns: a change made after it is never missed.
func watchBoard(t store.Team, wants func([]store.Task) bool) (<-chan struct{}, func(), error) {
	w := &boardWaiter{wants: wants, ch: make(chan struct{}, 1)}
	shared := reflect.TypeOf(t).Comparable()
	boardWakers.mu.Lock()
	defer boardWakers.mu.Unlock()
	var bw *boardWaker
	if shared {
		bw = boardWakers.m[t]
	}
	if bw == nil {
		var err error
		if bw, err = startBoardWaker(t); err != nil {
			return nil, nil, err
		}
		if shared {
			if boardWakers.m == nil {
				boardWakers.m = make(map[store.Team]*boardWaker)
			}
			boardWakers.m[t] = bw
		}
	}
	bw.mu.Lock()
	bw.waiters[w] = true
	bw.mu.Unlock()
	stop := func() {
		boardWakers.mu.Lock()
		bw.mu.Lock()
		delete(bw.waiters, w)
		last := len(bw.waiters) == 0
		bw.mu.Unlock()
		if last && shared && boardWakers.m[t] == bw {
			delete(boardWakers.m, t)
		}
		boardWakers.mu.Unlock()
		if last {
			bw.cancel()
			<-bw.done
		}
	}
	return w.ch, stop, nil
}

func startBoardWaker(t store.Team) (*boardWaker, error) {
	ctx, cancel := context.WithCancel(context.Background())
	changed, err := t.Tasks().Watch(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	bw := &boardWaker{team: t, cancel: cancel, done: make(chan struct{}), waiters: map[*boardWaiter]bool{}}
	go bw.run(ctx, changed)
	return bw, nil
}

// run reads the board after each change and wakes whoever could act on
// it; a board it cannot read wakes everyone, to see the error.
func (bw *boardWaker) run(ctx context.Context, changed <-chan struct{}) {
	defer close(bw.done)
	var ws []*boardWaiter
	for range changed {
		tasks, err := store.ListShared(ctx, bw.team.Tasks()) // only read
		if ctx.Err() != nil {
			return
		}
		bw.mu.Lock()
		ws = ws[:0]
		for w := range bw.waiters {
			ws = append(ws, w)
		}
		bw.mu.Unlock()
		for _, w := range ws {
			if err != nil || w.wants(tasks) {
				select {
				case w.ch <- struct{}{}:
				default:
				}
			}
		}
	}
}

// couldAct reports whether member me, idle, would find work on a board of
// tasks: a task of its own in progress, or one it may claim.
func couldAct(tasks []store.Task, me store.Member) bool {
	for _, t := range tasks {
		if t.Owner == me.Name && t.Status == store.TaskInProgress {
			return true
		}
		if t.Claimable() == nil && roleFits(t, me) && !handedBackBy(t, me.Name) {
			return true
		}
	}
	return false
}
