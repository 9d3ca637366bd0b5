package team

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// Liveness: every process that runs members writes their heartbeat_at every
// HeartbeatEvery; a member not shut down whose heartbeat is older than Lease
// is dead. "dead" is never stored: it is derived.
const (
	HeartbeatEvery = 10 * time.Second
	Lease          = 30 * time.Second
)

// Dead reports whether m is on the roster as running but has stopped
// beating.
func Dead(m store.Member, now time.Time) bool {
	return m.Status != store.StatusShutdown && !m.HeartbeatAt.IsZero() && now.Sub(m.HeartbeatAt) > Lease
}

// beat keeps the heartbeat of the members names() returns fresh until ctx
// ends: one roster update per beat for all of them.
//
// Each caller beats at its own phase of the period, drawn at random: the
// processes of a team start together, and beating in step they made one
// burst of CPU and disk every HeartbeatEvery instead of a trickle.
func beat(ctx context.Context, t store.Team, names func() []string, onErr func(error)) {
	phase := time.NewTimer(rand.N(HeartbeatEvery))
	select {
	case <-ctx.Done():
		phase.Stop()
		return
	case <-phase.C:
	}
	tick := time.NewTicker(HeartbeatEvery)
	defer tick.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
		ns := names()
		if len(ns) == 0 {
			continue
		}
		now := time.Now().UTC()
		beating := make(map[string]bool, len(ns))
		for _, n := range ns {
			beating[n] = true
		}
		_, err := t.UpdateRoster(ctx, func(r *store.Roster) error {
			for i := range r.Members {
				if m := &r.Members[i]; beating[m.Name] && m.Status != store.StatusShutdown {
					m.HeartbeatAt = now
				}
			}
			return nil
		})
		if err != nil && ctx.Err() == nil && onErr != nil {
			onErr(err)
		}
	}
}

// startHeartbeat beats for the in-process members of the session's team.
func (sv *supervisor) startHeartbeat(t store.Team) {
	if sv.cfg.TeammateMode == ModeProcess {
		return // each process beats for itself
	}
	ctx, cancel := context.WithCancel(context.Background())
	sv.mu.Lock()
	if sv.stopBeat != nil {
		sv.stopBeat()
	}
	sv.stopBeat = cancel
	sv.mu.Unlock()
	sv.wg.Go(func() {
		beat(ctx, t, sv.running, func(err error) { sv.cfg.Logger.Warn("heartbeat", "err", err) })
	})
}

// reapDead finds members that stopped beating, gives their in-progress
// tasks back to the board, and returns a notice for the lead (empty when
// nobody died since the last look).
func (sv *supervisor) reapDead(ctx context.Context, t store.Team) (llm.Block, bool) {
	r, err := t.ReadRoster(ctx)
	if err != nil {
		return llm.Block{}, false
	}
	now := time.Now()
	local := map[string]bool{}
	for _, n := range sv.running() {
		local[n] = true
	}
	var notes []string
	for _, m := range r.Members {
		if !Dead(m, now) || local[m.Name] {
			continue
		}
		sv.mu.Lock()
		seen := sv.reaped[m.Name+"@"+m.HeartbeatAt.String()]
		sv.reaped[m.Name+"@"+m.HeartbeatAt.String()] = true
		sv.mu.Unlock()
		if seen {
			continue
		}
		freed := freeTasks(ctx, t, m.Name)
		sv.em.emit(ctx, t, teamevent.Dead{Member: m.Name, HeartbeatAt: m.HeartbeatAt, FreedTasks: freed})
		note := fmt.Sprintf("%s is dead (no heartbeat since %s)", m.Name, m.HeartbeatAt.Format(time.RFC3339))
		if len(freed) > 0 {
			note += fmt.Sprintf("; its tasks #%s went back to the board", strings.Join(freed, ", #"))
		}
		notes = append(notes, note+". Spawn it again, or leave its work to the others.")
	}
	if len(notes) == 0 {
		return llm.Block{}, false
	}
	sort.Strings(notes)
	return llm.TextBlock("<team-notice>" + strings.Join(notes, "\n") + "</team-notice>"), true
}

// freeTasks puts the in-progress tasks of member back on the board.
func freeTasks(ctx context.Context, t store.Team, member string) []string {
	tasks, err := t.Tasks().List(ctx)
	if err != nil {
		return nil
	}
	var freed []string
	for _, task := range tasks {
		if task.Owner != member || task.Status != store.TaskInProgress {
			continue
		}
		_, err := t.Tasks().Update(ctx, task.ID, func(x *store.Task) error {
			if x.Owner == member && x.Status == store.TaskInProgress {
				x.Owner, x.Status = "", store.TaskPending
			}
			return nil
		})
		if err == nil {
			freed = append(freed, task.ID)
		}
	}
	return freed
}
