package team

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

func journalOf(t *testing.T, evs ...teamevent.Event) []store.Event {
	t.Helper()
	var out []store.Event
	for _, ev := range evs {
		e, err := teamevent.Encode("x", ev)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// A kill between the lead's transcript line of a request and its ack
// leaves the request in the lead's inbox and in its conversation: the
// inbox never hands it out again, so it must be put to the lead anew.
func TestReopenedRequests(t *testing.T) {
	t.Parallel()
	req := store.Message{ID: "m1", Type: store.TypePlanApprovalRequest, From: "backend", To: store.LeadName, RequestID: "plan-backend-1", Content: "the plan"}
	asked := teamevent.Sent(req)
	yes := true
	answered := teamevent.Protocol{Kind: store.TypePlanApprovalResponse, RequestID: "plan-backend-1", Member: "backend", Approve: &yes}
	for _, tc := range []struct {
		name   string
		evs    []teamevent.Event
		unread []store.Message
		seen   map[string]bool
		want   []string
	}{
		{"read, unanswered", []teamevent.Event{asked}, nil, nil, []string{"plan-backend-1"}},
		{"unread: comes again with the inbox", []teamevent.Event{asked}, []store.Message{req}, nil, nil},
		{"in the conversation, ack lost", []teamevent.Event{asked}, []store.Message{req}, map[string]bool{"m1": true}, []string{"plan-backend-1"}},
		{"answered", []teamevent.Event{asked, answered}, nil, map[string]bool{"m1": true}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, m := range reopenedRequests(journalOf(t, tc.evs...), tc.unread, tc.seen) {
				got = append(got, m.RequestID)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("reopened (-want +got):\n%s", diff)
			}
		})
	}
}

// A plan-mode member coming back knows the answer its conversation has,
// even when the journal lacks it (the lead was killed before journaling
// it) and the member's ack of it was lost.
func TestRestorePlan(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	req := store.Message{ID: "m1", Type: store.TypePlanApprovalRequest, From: "backend", To: store.LeadName, RequestID: "plan-backend-1"}
	asked := teamevent.Protocol{Kind: store.TypePlanApprovalRequest, RequestID: "plan-backend-1", Member: "backend"}
	resp := store.Message{ID: "m2", Type: store.TypePlanApprovalResponse, From: store.LeadName, To: "backend", RequestID: "plan-backend-1", Approve: &yes}
	refusal := resp
	refusal.Approve = &no
	forged := resp
	forged.From = "frontend"
	type state struct {
		Pending  string
		Approved bool
	}
	for _, tc := range []struct {
		name       string
		evs        []teamevent.Event
		leadUnread []store.Message
		ownUnread  []store.Message
		seen       map[string]bool
		want       state
	}{
		{"asked", []teamevent.Event{asked}, nil, nil, nil, state{"plan-backend-1", false}},
		{"asked, only the lead's inbox says so", nil, []store.Message{req}, nil, nil, state{"plan-backend-1", false}},
		{"answer unread: it comes again", []teamevent.Event{asked}, nil, []store.Message{resp}, nil, state{"plan-backend-1", false}},
		{"answer read, ack lost", []teamevent.Event{asked}, nil, []store.Message{resp}, map[string]bool{"m2": true}, state{"", true}},
		{"refusal read, ack lost", []teamevent.Event{asked}, nil, []store.Message{refusal}, map[string]bool{"m2": true}, state{"", false}},
		{"answer read and acked, only its send journaled", []teamevent.Event{asked, teamevent.Sent(resp)}, nil, nil, map[string]bool{"m2": true}, state{"", true}},
		{"an answer from a teammate binds nothing", []teamevent.Event{asked}, nil, []store.Message{forged}, map[string]bool{"m2": true}, state{"plan-backend-1", false}},
		{"answer journaled", []teamevent.Event{asked, teamevent.Protocol{Kind: store.TypePlanApprovalResponse, RequestID: "plan-backend-1", Member: "backend", Approve: &yes}}, nil, nil, nil, state{"", true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got state
			got.Pending, got.Approved = restorePlan(journalOf(t, tc.evs...), "backend", tc.leadUnread, tc.ownUnread, tc.seen)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// A teammate killed between its roster's shutdown line and its answer to
// the lead's shutdown request never answers: the lead stops waiting once
// its process is gone, and waits on while it runs (or runs elsewhere).
func TestShutdownAnswerOfGoneProcess(t *testing.T) {
	t.Parallel()
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		m     store.Member
		waits bool
	}{
		{"process gone", store.Member{Name: "m1", Status: store.StatusShutdown, PID: ended.Process.Pid}, false},
		{"process runs", store.Member{Name: "m1", Status: store.StatusShutdown, PID: os.Getpid()}, true},
		{"on another machine", store.Member{Name: "m1", Status: store.StatusShutdown, PID: ended.Process.Pid, Placement: PlacementRemote}, true},
		{"no pid yet", store.Member{Name: "m1", Status: store.StatusShutdown}, true},
		{"not shut down (Dead decides)", store.Member{Name: "m1", Status: store.StatusIdle, PID: ended.Process.Pid, HeartbeatAt: time.Now()}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProtocol()
			p.sentShutdown("shutdown-team-lead-1", "m1")
			r := store.Roster{Members: []store.Member{tc.m}}
			awaiting, _, _ := p.outstanding(&r, time.Now())
			if awaiting["m1"] != tc.waits {
				t.Errorf("the lead waits for m1's answer: %v, want %v", awaiting["m1"], tc.waits)
			}
		})
	}
}
