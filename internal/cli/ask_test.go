package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/store"
)

func TestLeadAsker(t *testing.T) {
	t.Parallel()
	shown := make(chan store.Message, 1)
	a := newLeadAsker(func(m store.Message) { shown <- m })
	call := agent.Call{Name: "bash", Input: json.RawMessage(`{"command":"make"}`)}

	got := make(chan agent.Decision, 1)
	go func() { got <- a.ask(context.Background(), call, "bash needs approval") }()
	req := <-shown
	if req.From != store.LeadName || req.Type != store.TypePermissionRequest || req.ToolName != "bash" || !strings.Contains(req.Content, `{"command":"make"}`) {
		t.Fatalf("request shown: %+v", req)
	}
	if a.answer("perm-alice-1", true) {
		t.Fatal("a teammate's request id was taken as the lead's")
	}
	if !a.answer(req.RequestID, false) {
		t.Fatal("the lead's request id was not recognised")
	}
	if d := <-got; d.Allow || !strings.Contains(d.Reason, "denied") {
		t.Fatalf("decision after a no: %+v", d)
	}
	if a.answer(req.RequestID, true) {
		t.Fatal("a question was answered twice")
	}

	// An interrupted turn stops waiting, as a denial.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { got <- a.ask(ctx, call, "bash needs approval") }()
	<-shown
	cancel()
	if d := <-got; d.Allow || !strings.Contains(d.Reason, "interrupted") {
		t.Fatalf("decision after an interrupt: %+v", d)
	}
}
