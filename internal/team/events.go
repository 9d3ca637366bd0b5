package team

import (
	"context"
	"log/slog"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// emit journals a typed team event as agentName and passes it to the
// observer. The journal line is the event's JSON form (teamevent.Encode), so
// an observer in this process and a reader of the file decode the same.
func emit(ctx context.Context, t store.Team, agentName string, ev teamevent.Event, onEvent func(store.Event), log *slog.Logger) {
	e, ok := encodeEvent(t, agentName, ev, time.Now().UTC(), log)
	if !ok {
		return
	}
	if err := t.Journal().Append(context.WithoutCancel(ctx), e); err != nil && log != nil {
		log.Warn("journal", "type", ev.Type(), "err", err)
	}
	if onEvent != nil {
		onEvent(e)
	}
}

// encodeEvent is ev as team t's journal records it, made by agentName at
// ts; an event that cannot be encoded is logged and left out.
func encodeEvent(t store.Team, agentName string, ev teamevent.Event, ts time.Time, log *slog.Logger) (store.Event, bool) {
	e, err := teamevent.Encode(agentName, ev)
	if err != nil {
		if log != nil {
			log.Warn("journal", "type", ev.Type(), "err", err)
		}
		return store.Event{}, false
	}
	e.TS, e.Team = ts, t.Name()
	return e, true
}

// emitAll journals evs in order, with one write where the journal can take
// several events at once.
func emitAll(ctx context.Context, t store.Team, agentName string, evs []teamevent.Event, onEvent func(store.Event), log *slog.Logger) {
	j, ok := t.Journal().(store.JournalBatch)
	if !ok || len(evs) < 2 {
		for _, ev := range evs {
			emit(ctx, t, agentName, ev, onEvent, log)
		}
		return
	}
	appendEvents(ctx, t, agentName, evs, onEvent, log, j.AppendAll)
}

// emitDeferred journals evs in order as emitAll does, without waiting for
// their fsync where the journal can defer it (store.JournalDeferred): for
// observations of what is durable elsewhere (a model call's usage, a
// claim or a task's change, which the board holds), never for a line
// something is restored from.
func emitDeferred(ctx context.Context, t store.Team, agentName string, evs []teamevent.Event, onEvent func(store.Event), log *slog.Logger) {
	j := t.Journal()
	appendEvents(ctx, t, agentName, evs, onEvent, log, func(ctx context.Context, es []store.Event) error {
		return store.AppendEventsDeferred(ctx, j, es)
	})
}

// appendEvents encodes evs as agentName's, appends them with add, and
// passes them to onEvent.
func appendEvents(ctx context.Context, t store.Team, agentName string, evs []teamevent.Event, onEvent func(store.Event), log *slog.Logger, add func(context.Context, []store.Event) error) {
	es := make([]store.Event, 0, len(evs))
	now := time.Now().UTC()
	for _, ev := range evs {
		if e, ok := encodeEvent(t, agentName, ev, now, log); ok {
			es = append(es, e)
		}
	}
	if len(es) == 0 {
		return
	}
	if err := add(context.WithoutCancel(ctx), es); err != nil && log != nil {
		log.Warn("journal", "events", len(es), "err", err)
	}
	if onEvent != nil {
		for _, e := range es {
			onEvent(e)
		}
	}
}

// emitter journals as one agent of one session.
type emitter struct {
	agent   string
	onEvent func(store.Event)
	log     *slog.Logger
}

func (e emitter) emit(ctx context.Context, t store.Team, ev teamevent.Event) {
	emit(ctx, t, e.agent, ev, e.onEvent, e.log)
}

func (e emitter) emitAll(ctx context.Context, t store.Team, evs []teamevent.Event) {
	emitAll(ctx, t, e.agent, evs, e.onEvent, e.log)
}

// emitDeferred journals evs without waiting for their fsync (see the
// package's emitDeferred).
func (e emitter) emitDeferred(ctx context.Context, t store.Team, evs ...teamevent.Event) {
	emitDeferred(ctx, t, e.agent, evs, e.onEvent, e.log)
}
