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
)

// Kinds of model calls in the usage journal.
const (
	UsageCoordination = "coordination" // the lead's turns, teammates talking and answering protocols
	UsageWork         = "work"         // a teammate's calls while it holds a task
)

// usageFields is the journal line of one model call.
func usageFields(ev agent.Event, model, task, kind string) map[string]any {
	u := ev.Usage
	if ev.Model != "" {
		// What answered, with the provider prefix the agent was given.
		if prefix, _, ok := strings.Cut(model, ":"); ok && (prefix == "openai" || prefix == "anthropic") {
			model = prefix + ":" + ev.Model
		} else {
			model = ev.Model
		}
	}
	f := map[string]any{
		"agent_name":                  ev.Agent,
		"input_tokens":                u.InputTokens,
		"output_tokens":               u.OutputTokens,
		"cache_read_input_tokens":     u.CacheReadTokens,
		"cache_creation_input_tokens": u.CacheWriteTokens,
		"model":                       model,
		"kind":                        kind,
	}
	if task != "" {
		f["task"] = task
	}
	return f
}

// leadUsage journals the lead's (and its subagents') model calls; calls
// made before the team exists are kept and journaled when it is created.
type leadUsage struct {
	s       *Session
	mu      sync.Mutex
	pending []map[string]any
}

func (l *leadUsage) observe(next func(agent.Event)) func(agent.Event) {
	return func(ev agent.Event) {
		if ev.Type == agent.EventUsage && ev.Usage != nil {
			f := usageFields(ev, l.s.cfg.Model, "", UsageCoordination)
			if t, err := l.s.Team(); err == nil {
				l.s.journal(context.Background(), t, "usage", f)
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
		l.s.journal(ctx, t, "usage", f)
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
	for _, fields := range p {
		line, err := json.Marshal(store.Event{TS: time.Now().UTC(), Type: "usage", Team: team, Agent: store.LeadName, Fields: fields})
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
			m.mu.Lock()
			task := m.currentTask
			m.mu.Unlock()
			kind := UsageCoordination
			if task != "" {
				kind = UsageWork
			}
			m.journal(context.Background(), "usage", usageFields(ev, m.agent.Config().Model, task, kind))
		}
		if next != nil {
			next(ev)
		}
	}
}
