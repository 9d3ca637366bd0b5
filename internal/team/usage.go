package team

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// Kinds of model calls in the usage journal.
const (
	UsageCoordination = teamevent.UsageCoordination // the lead's turns, teammates talking and answering protocols
	UsageWork         = teamevent.UsageWork         // a teammate's calls while it holds a task
)

// usageEvent is the journal line of one model call.
func usageEvent(ev agent.Event, model, task, kind string) teamevent.Usage {
	u := ev.Usage
	if ev.Model != "" {
		// What answered, with the provider prefix the agent was given.
		if prefix, _, ok := strings.Cut(model, ":"); ok && (prefix == "openai" || prefix == "anthropic") {
			model = prefix + ":" + ev.Model
		} else {
			model = ev.Model
		}
	}
	return teamevent.Usage{AgentName: ev.Agent, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens, CacheWrite1hTokens: u.CacheWrite1hTokens,
		Model: model, Kind: kind, Task: task}
}

// leadUsage journals the lead's (and its subagents') model calls; calls
// made before the team exists are kept and journaled when it is created.
type leadUsage struct {
	s       *Session
	mu      sync.Mutex
	pending []teamevent.Usage
	gov     *governor // made on first use, from the session's rules
}

// governor is the session's coordination governor.
func (l *leadUsage) governor() *governor {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gov == nil {
		share := 0.0
		if r := l.s.cfg.Rules; r != nil {
			share = r.MaxCoordinationShare
		}
		l.gov = newGovernor(share)
	}
	return l.gov
}

func (l *leadUsage) observe(next func(agent.Event)) func(agent.Event) {
	return func(ev agent.Event) {
		if ev.Type == agent.EventUsage && ev.Usage != nil {
			f := usageEvent(ev, l.s.cfg.Model, "", UsageCoordination)
			if t, err := l.s.Team(); err == nil {
				l.s.emit(context.Background(), t, f)
			} else {
				l.mu.Lock()
				l.pending = append(l.pending, f)
				l.mu.Unlock()
			}
		}
		if next != nil {
			next(ev)
		}
	}
}

// flush journals the calls made before the team existed.
func (l *leadUsage) flush(ctx context.Context, t store.Team) {
	l.mu.Lock()
	p := l.pending
	l.pending = nil
	l.mu.Unlock()
	for _, f := range p {
		l.s.emit(ctx, t, f)
	}
}

// flushArchive appends the lead's calls made after its team was deleted
// (its last turn) to the archived journal, so the accounting is complete.
func (l *leadUsage) flushArchive(dir, team string) error {
	l.mu.Lock()
	p := l.pending
	l.pending = nil
	l.mu.Unlock()
	if dir == "" || len(p) == 0 {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(dir, "events.jsonl"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("record the lead's last usage: %w", err)
	}
	defer f.Close()
	var buf []byte
	for _, u := range p {
		e, err := teamevent.Encode(store.LeadName, u)
		if err != nil {
			return err
		}
		e.TS, e.Team = time.Now().UTC(), team
		line, err := json.Marshal(e)
		if err != nil {
			return err
		}
		buf = append(append(buf, line...), '\n')
	}
	if _, err := f.Write(buf); err != nil {
		return fmt.Errorf("record the lead's last usage: %w", err)
	}
	return f.Sync()
}

// observeUsage journals a teammate's model calls, as work on its task when
// it holds one.
func (m *Member) observeUsage(next func(agent.Event)) func(agent.Event) {
	return func(ev agent.Event) {
		if ev.Type == agent.EventUsage && ev.Usage != nil {
			task := m.st.task()
			kind := UsageCoordination
			if task != "" {
				kind = UsageWork
			}
			f := usageEvent(ev, m.agent.Config().Model, task, kind)
			f.CacheTTL = string(m.cache.used(ev.Usage, ev.Model))
			m.emitDeferred(context.Background(), f)
		}
		if next != nil {
			next(ev)
		}
	}
}
