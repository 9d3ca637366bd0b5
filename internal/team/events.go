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

// emitter journals as one agent of one session.
type emitter struct {
	agent   string
	onEvent func(store.Event)
	log     *slog.Logger
}

func (e emitter) emit(ctx context.Context, t store.Team, ev teamevent.Event) {
	emit(ctx, t, e.agent, ev, e.onEvent, e.log)
}
