package agent

import (
	"context"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/todo"
)

// TodoReminder is the boundary that reminds the model of its todo list once
// the list has open items and has gone stale (todo.List.AfterRound). l must
// be the list the agent's TodoWrite tool writes.
func TodoReminder(l *todo.List) Boundary {
	return func(_ context.Context, names []string) []llm.Block {
		if r := l.AfterRound(names); r != "" {
			return []llm.Block{llm.TextBlock(r)}
		}
		return nil
	}
}
