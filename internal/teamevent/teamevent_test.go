package teamevent

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/store"
)

func yes() *bool { b := true; return &b }

// TestRoundTrip encodes each type, sends it through JSON as the journal file
// does, and decodes it back to the same value; the in-process fields decode
// the same way.
func TestRoundTrip(t *testing.T) {
	hb := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	events := []Event{
		TeamCreate{Description: "d", Pattern: "fixed-theme", SessionID: "s1"},
		TeamDelete{Members: []string{"a", "b"}, Forced: true},
		Spawn{Member: "a", Role: "dev", Model: "m", PlanModeRequired: true, PermissionMode: "default", Mode: "in-process"},
		Status{Member: "a", Status: "idle", Why: "done"},
		Stopped{Member: "a", Why: "killed"},
		Dead{Member: "a", HeartbeatAt: hb, FreedTasks: []string{"1"}},
		Budget{Member: "a", Reached: "100 tokens"},
		Restart{Member: "a", Exit: "signal: killed", Restarts: 2},
		IdleTimeout{Member: "a", After: "5m0s"},
		HookTeammateIdle{Member: "a", Reason: "more"},
		Send{ID: "m1", MsgType: "shutdown_response", From: "a", To: "team-lead", RequestID: "r", Approve: yes(), Content: "bye"},
		Deliver{Member: "a", IDs: []string{"m1", "m2"}, At: "idle"},
		Protocol{Kind: ProtocolShutdown, RequestID: "r", Member: "a", Approve: yes(), Reason: "done"},
		Protocol{Kind: ProtocolPermission, RequestID: "r2", Member: "a", Tool: "bash"},
		Protocol{Kind: ProtocolPermissionResponse, RequestID: "r2", Member: "a", Approve: yes()},
		Permission{RequestID: "r2", Member: "a", Tool: "bash", Approve: false, Why: "no answer"},
		PermissionCheck{Member: "a", Tool: "bash", Effect: "deny", Rule: "Bash(rm:*)", Source: "project", Reason: "x", Allowed: false},
		TaskCreate{Task: "1", Subject: "s", BlockedBy: []string{"2"}},
		TaskUpdate{TaskChange{Task: "1", Status: "pending", Owner: "", AddBlocks: []string{"3"}}},
		TaskComplete{TaskChange{Task: "1", Status: "completed", Owner: "a"}},
		Claim{Task: "1", Owner: "a", Subject: "s"},
		HandBack{Member: "a", Task: "1"},
		Resume{Restarted: []string{"a"}, RunningElsewhere: []string{"b"}, PendingRequests: 2},
		Forgery{Inbox: "team-lead", ClaimedFrom: "a", MsgType: "message", ID: "x", Why: "bad seal"},
		KeyCreated{Why: "the team had no key"},
		CacheChoice{Member: "bob", TTL: "1h", Why: "no claimable task", Tokens: 12000, ExpectedSavedUSD: 0.0144},
		Coordination{Window: 20, CoordinationTokens: 9000, TeamTokens: 12000, Share: 0.75, MaxShare: 0.5},
		Tool{Tool: "write_file", Path: "schema.graphql"},
		Tool{Tool: "bash", Command: "go test ./...", Error: "exit status 1"},
		Merge{Task: "4", Owner: "frontend", Branch: "troupe/t/frontend", Into: "main", Status: "conflict", Files: []string{"README.md"}},
		Merge{Task: "1", Owner: "analyst", Branch: "troupe/t/analyst", Into: "main", Status: "merged", How: "fast-forward", Commit: "abc"},
		Usage{AgentName: "a", InputTokens: 10, OutputTokens: 2, CacheReadTokens: 7, CacheWriteTokens: 1, Model: "m", Kind: UsageWork, Task: "1"},
		Usage{AgentName: "b", InputTokens: 3, CacheReadTokens: 900, CacheWriteTokens: 40, CacheWrite1hTokens: 40, CacheTTL: "1h", Model: "m", Kind: UsageCoordination},
	}
	seen := map[string]bool{}
	for _, e := range events {
		seen[e.Type()] = true
		se, err := Encode("a", e)
		if err != nil {
			t.Fatalf("%T: %v", e, err)
		}
		// In process.
		got, err := Decode(se)
		if err != nil {
			t.Fatalf("%T: decode: %v", e, err)
		}
		if diff := cmp.Diff(e, got.Event); diff != "" {
			t.Errorf("%T in process (-want +got):\n%s", e, diff)
		}
		// Through the journal's JSON.
		b, err := json.Marshal(se)
		if err != nil {
			t.Fatal(err)
		}
		var back store.Event
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		got, err = Decode(back)
		if err != nil {
			t.Fatalf("%T: decode from disk: %v", e, err)
		}
		if diff := cmp.Diff(e, got.Event); diff != "" {
			t.Errorf("%T from disk (-want +got):\n%s", e, diff)
		}
		if got.Agent != "a" {
			t.Errorf("%T: agent %q", e, got.Agent)
		}
	}
	for _, typ := range Types() {
		if !seen[typ] {
			t.Errorf("type %q has no round-trip case", typ)
		}
	}
}

func TestDecodeUnknownAndBad(t *testing.T) {
	got, err := Decode(store.Event{Type: "from_the_future", Fields: map[string]any{"x": 1.0}})
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := got.Event.(Unknown); !ok || u.Kind != "from_the_future" || u.Fields["x"] != 1.0 {
		t.Errorf("unknown type decoded to %#v", got.Event)
	}
	if _, err := Decode(store.Event{Type: "spawn", Fields: map[string]any{"member": 3}}); err == nil {
		t.Error("a spawn whose member is a number decoded without error")
	}
	// A usage line written before the cache fields existed decodes with
	// them empty.
	got, err = Decode(store.Event{Type: "usage", Fields: map[string]any{"agent_name": "a", "input_tokens": 5.0, "cache_creation_input_tokens": 2.0}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Event(Usage{AgentName: "a", InputTokens: 5, CacheWriteTokens: 2}), got.Event); diff != "" {
		t.Error(diff)
	}
	// Legacy lines written before a field existed still decode.
	got, err = Decode(store.Event{Type: "claim", Fields: map[string]any{"task": "4", "owner": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Event(Claim{Task: "4", Owner: "b"}), got.Event); diff != "" {
		t.Error(diff)
	}
}
