package cli

import (
	"context"
	"fmt"
	"sync"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/text"
)

// leadAsker puts the lead's own permission questions to the human in the
// terminal UI, as the teammates' are: a request in the approvals list,
// answered with y or n. The lead waits for the answer (or for its turn to
// be interrupted, which is a denial).
type leadAsker struct {
	show func(store.Message)

	mu      sync.Mutex
	n       int
	pending map[string]chan bool
}

func newLeadAsker(show func(store.Message)) *leadAsker {
	return &leadAsker{show: show, pending: map[string]chan bool{}}
}

// ask is team.Config.AskHuman.
func (a *leadAsker) ask(ctx context.Context, call agent.Call, reason string) agent.Decision {
	a.mu.Lock()
	a.n++
	id := fmt.Sprintf("perm-%s-%d", store.LeadName, a.n)
	ch := make(chan bool, 1)
	a.pending[id] = ch
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.pending, id)
		a.mu.Unlock()
	}()
	a.show(store.Message{Type: store.TypePermissionRequest, From: store.LeadName, To: store.HumanName, RequestID: id,
		ToolName: call.Name, ToolInput: call.Input, Summary: "permission for " + call.Name,
		Content: fmt.Sprintf("%s asks to run %s %s (%s)", store.LeadName, call.Name, text.OneLine(string(call.Input), 300), reason)})
	select {
	case ok := <-ch:
		if ok {
			return agent.Decision{Allow: true}
		}
		return agent.Decision{Reason: "the human denied permission"}
	case <-ctx.Done():
		return agent.Decision{Reason: "interrupted while waiting for the human's permission"}
	}
}

// answer gives the human's answer to one of the lead's questions; false
// when id is not one (it is then a teammate's request).
func (a *leadAsker) answer(id string, approve bool) bool {
	a.mu.Lock()
	ch, ok := a.pending[id]
	delete(a.pending, id)
	a.mu.Unlock()
	if ok {
		ch <- approve
	}
	return ok
}
