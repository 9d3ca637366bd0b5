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
	e, err := teamevent.Encode(agentName, ev)
	if err != nil {
		if log != nil {
			log.Warn("journal", "type", ev.Type(), "err", err)
		}
		return
	}
	e.TS, e.Team = time.Now().UTC(), t.Name()
	if err := t.Journal().Append(context.WithoutCancel(ctx), e); err != nil && log != nil {
		log.Warn("journal", "type", ev.Type(), "err", err)
	}
	if onEvent != nil {
		onEvent(e)
	}
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
	es := make([]store.Event, 0, len(evs))
	now := time.Now().UTC()
	for _, ev := range evs {
		e, err := teamevent.Encode(agentName, ev)
		if err != nil {
			if log != nil {
				log.Warn("journal", "type", ev.Type(), "err", err)
			}
			continue
		}
		e.TS, e.Team = now, t.Name()
		es = append(es, e)
	}
	if err := j.AppendAll(context.WithoutCancel(ctx), es); err != nil && log != nil {
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
