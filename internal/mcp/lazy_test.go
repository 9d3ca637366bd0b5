package mcp

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// TestLazyStart: a session with Lazy and a tool cache offers the tools a
// server listed the last time without starting it, and starts it at the
// first call; a changed configuration is started with the session again.
func TestLazyStart(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	srv := helperServer(t, "s", "basic")

	// First session: no cache yet, so the server starts to list its tools,
	// and the list is kept.
	first := newManager(t, Options{Lazy: true, ToolCache: cache}, srv)
	want, probs := first.Tools(context.Background(), nil)
	if len(probs) != 0 || len(want) == 0 {
		t.Fatalf("first session: tools %v, problems %v", names(want), probs)
	}
	if st := first.Status()[0]; st.State != StateConnected {
		t.Fatalf("first session: server %s, want it started to list its tools", st.State)
	}
	first.Close()

	// Second session: the same tools are offered, nothing started.
	second := newManager(t, Options{Lazy: true, ToolCache: cache}, srv)
	got, probs := second.Tools(context.Background(), nil)
	if len(probs) != 0 || !slices.Equal(names(got), names(want)) {
		t.Fatalf("lazy session: tools %v (problems %v), want %v", names(got), probs, names(want))
	}
	if st := second.Status()[0]; st.State != StateIdle {
		t.Fatalf("lazy session: server %s before any call, want %s", st.State, StateIdle)
	}
	// The first call starts it and goes through.
	res := run(t, find(t, got, "mcp__s__echo"), `{"text": "lazy"}`)
	if res.IsError || !strings.Contains(res.Content, "lazy") {
		t.Fatalf("first call of a lazy server: %+v", res)
	}
	if st := second.Status()[0]; st.State != StateConnected {
		t.Errorf("after the first call: server %s, want %s", st.State, StateConnected)
	}

	// A changed configuration does not trust the cache: it starts.
	changed := srv
	changed.Args = append(changed.Args, "--changed")
	third := newManager(t, Options{Lazy: true, ToolCache: cache}, changed)
	if _, probs := third.Tools(context.Background(), nil); len(probs) != 0 {
		t.Fatalf("changed config: %v", probs)
	}
	if st := third.Status()[0]; st.State != StateConnected {
		t.Errorf("changed config: server %s, want it started", st.State)
	}

	// Without Lazy the cache is not read: the session starts its servers.
	eager := newManager(t, Options{ToolCache: cache}, srv)
	eager.Tools(context.Background(), nil)
	if st := eager.Status()[0]; st.State != StateConnected {
		t.Errorf("eager session: server %s, want it started", st.State)
	}
}
