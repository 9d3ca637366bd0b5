package team

import (
	"context"
	"encoding/json"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/text"
)

// observeTools journals what a teammate does to the workspace (the files
// it writes or edits, the commands it runs) and the tools that fail, so a
// timeline shows a teammate in its own process as it shows one in the
// lead's (whose agent events it sees too). Only the member's own calls:
// its subagents' are its business.
func (m *Member) observeTools(next func(agent.Event)) func(agent.Event) {
	return func(ev agent.Event) {
		if ev.Agent == m.name && ev.Call != nil {
			if te, ok := toolEvent(ev); ok {
				m.emit(context.Background(), te)
			}
		}
		if next != nil {
			next(ev)
		}
	}
}

// toolEvent is the journal line of a tool call or result worth one: a
// call that changes the workspace, or any result that is an error.
func toolEvent(ev agent.Event) (teamevent.Tool, bool) {
	switch {
	case ev.Type == agent.EventToolCall:
		var in struct {
			Path    string `json:"path"`
			Command string `json:"command"`
		}
		_ = json.Unmarshal(ev.Call.Input, &in)
		switch ev.Call.Name {
		case "write_file", "edit_file":
			return teamevent.Tool{Tool: ev.Call.Name, Path: in.Path}, true
		case "bash":
			return teamevent.Tool{Tool: ev.Call.Name, Command: text.OneLine(in.Command, 500)}, true
		}
	case ev.Type == agent.EventToolResult && ev.Result != nil && ev.Result.IsError:
		return teamevent.Tool{Tool: ev.Call.Name, Error: text.OneLine(ev.Result.Content, 500)}, true
	}
	return teamevent.Tool{}, false
}
