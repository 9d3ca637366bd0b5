package team

import (
	"context"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
)

// protocol is one agent's state of the request/answer protocols, keyed by
// request id: shutdown, plan approval and permission requests and their
// answers. The lead's side keeps the requests addressed to it and the
// shutdown requests it sent; a teammate's side keeps its plan, its
// permission waits and the shutdown requests it was sent. It is the only
// owner of that state: the tools (SendMessage), the inboxes and the lead's
// loop read and change it through its methods, never under another lock.
type protocol struct {
	ids requestIDs

	mu sync.Mutex
	// The lead's side.
	requests map[string]store.Message // requests addressed to the lead, unanswered
	toHuman  map[string]bool          // those of them the human answers
	awaiting map[string]string        // shutdown requests the lead sent, unanswered: id -> member
	// A teammate's side.
	planPending  string               // request_id of the plan awaiting approval
	planApproved bool                 // its plan was approved
	permWaiting  map[string]chan bool // permission request_id -> answer
	shutdownReqs map[string]string    // unanswered shutdown request_id -> requester
	stopAfter    bool                 // a shutdown was approved: stop at the next boundary
}

func newProtocol() *protocol {
	return &protocol{requests: map[string]store.Message{}, toHuman: map[string]bool{}, awaiting: map[string]string{},
		permWaiting: map[string]chan bool{}, shutdownReqs: map[string]string{}}
}

// next makes a request id for agent (see requestIDs).
func (p *protocol) next(ctx context.Context, t store.Team, agent, kind string) string {
	return p.ids.next(ctx, t, agent, kind)
}

// --- the lead's side ---

// toLead notes a message addressed to the lead: answers close what they
// answer, requests are kept until answered. It returns false for a request
// the human takes (human returns true): the lead's model never sees it.
func (p *protocol) toLead(m store.Message, human func(store.Message) bool) bool {
	switch m.Type {
	case store.TypeShutdownResponse:
		p.mu.Lock()
		delete(p.awaiting, m.RequestID)
		p.mu.Unlock()
	case store.TypePlanApprovalRequest, store.TypePermissionRequest:
		p.mu.Lock()
		p.requests[m.RequestID] = m
		p.mu.Unlock()
		if human != nil && human(m) {
			p.mu.Lock()
			p.toHuman[m.RequestID] = true
			p.mu.Unlock()
			return false
		}
	}
	return true
}

// request returns a pending request addressed to the lead.
func (p *protocol) request(id string) (store.Message, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.requests[id]
	return m, ok
}

// answered closes request id.
func (p *protocol) answered(id string) {
	p.mu.Lock()
	delete(p.requests, id)
	delete(p.toHuman, id)
	p.mu.Unlock()
}

// reopen puts requests read before a resume back as pending.
func (p *protocol) reopen(reqs []store.Message) {
	p.mu.Lock()
	for _, r := range reqs {
		p.requests[r.RequestID] = r
	}
	p.mu.Unlock()
}

// sentShutdown notes a shutdown request the lead sent to member.
func (p *protocol) sentShutdown(id, member string) {
	p.mu.Lock()
	p.awaiting[id] = member
	p.mu.Unlock()
}

// shutdownAsked returns the lead's shutdown requests to member that it
// has not seen answered.
func (p *protocol) shutdownAsked(member string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for id, name := range p.awaiting {
		if name == member {
			ids = append(ids, id)
		}
	}
	return ids
}

// forgetShutdowns drops the shutdown requests of a team that is gone.
func (p *protocol) forgetShutdowns() {
	p.mu.Lock()
	clear(p.awaiting)
	p.mu.Unlock()
}

// outstanding is what the lead's protocols wait on, for the team's
// assessment: members whose answer to a shutdown request is due (those gone
// from roster r, or dead, will never answer and are dropped), requests the
// lead has not answered by member, and members whose request the human
// answers.
func (p *protocol) outstanding(r *store.Roster, now time.Time) (awaiting map[string]bool, asked map[string][]store.Message, withHuman map[string]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, name := range p.awaiting {
		// A member that says shutdown in the roster is about to answer;
		// one that is gone from it or dead never will, nor one whose
		// process on this machine ended after its roster said shutdown
		// (killed between that line and its answer).
		if m, ok := r.Member(name); !ok || Dead(*m, now) || goneProcess(*m) {
			delete(p.awaiting, id)
		}
	}
	awaiting, asked, withHuman = map[string]bool{}, map[string][]store.Message{}, map[string]bool{}
	for _, name := range p.awaiting {
		awaiting[name] = true
	}
	for _, req := range p.requests {
		if p.toHuman[req.RequestID] {
			withHuman[req.From] = true
			continue
		}
		asked[req.From] = append(asked[req.From], req)
	}
	return awaiting, asked, withHuman
}

// --- a teammate's side ---

// toMember applies a message addressed to a teammate. Only the lead and the
// human answer its requests or ask it to shut down; the same types from
// anyone else reach the model as text and bind nothing.
func (p *protocol) toMember(msg store.Message) bool {
	if !fromLeadOrHuman(msg.From) {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch msg.Type {
	case store.TypePlanApprovalResponse:
		if msg.RequestID != "" && msg.RequestID == p.planPending {
			p.planPending = ""
			p.planApproved = msg.Approve != nil && *msg.Approve
		}
	case store.TypePermissionResponse:
		if ch, ok := p.permWaiting[msg.RequestID]; ok {
			ch <- msg.Approve != nil && *msg.Approve
			delete(p.permWaiting, msg.RequestID)
		}
	case store.TypeShutdownRequest:
		p.shutdownReqs[msg.RequestID] = msg.From
	}
	return true
}

// plan returns the plan awaiting approval ("" if none) and whether one was
// approved.
func (p *protocol) plan() (pending string, approved bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.planPending, p.planApproved
}

// setPlan notes a plan sent for approval (or restored: pending and
// approved as the journal says).
func (p *protocol) setPlan(pending string, approved bool) {
	p.mu.Lock()
	p.planPending, p.planApproved = pending, approved
	p.mu.Unlock()
}

// waitPermission registers a permission request; its answer comes on the
// channel. done unregisters it.
func (p *protocol) waitPermission(id string) (answer <-chan bool, done func()) {
	ch := make(chan bool, 1)
	p.mu.Lock()
	p.permWaiting[id] = ch
	p.mu.Unlock()
	return ch, func() {
		p.mu.Lock()
		delete(p.permWaiting, id)
		p.mu.Unlock()
	}
}

// shutdownRequest returns an unanswered shutdown request, if any.
func (p *protocol) shutdownRequest() (store.Message, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, from := range p.shutdownReqs {
		return store.Message{RequestID: id, From: from}, true
	}
	return store.Message{}, false
}

// answerShutdown closes shutdown request id and returns who asked; ok is
// false when no such request was sent to this member.
func (p *protocol) answerShutdown(id string) (from string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	from, ok = p.shutdownReqs[id]
	delete(p.shutdownReqs, id)
	return from, ok
}

// hasShutdown reports whether shutdown request id waits for an answer.
func (p *protocol) hasShutdown(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.shutdownReqs[id]
	return ok
}

// stop notes an approved shutdown: the member's run ends at its next
// boundary and no later tool call of the same reply runs.
func (p *protocol) stop() {
	p.mu.Lock()
	p.stopAfter = true
	p.mu.Unlock()
}

func (p *protocol) stopping() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopAfter
}

// goneProcess reports whether m, shut down on the roster, ran in a process
// of this machine that no longer exists. Its heartbeat no longer beats, so
// Dead says so only a Lease later, if ever.
func goneProcess(m store.Member) bool {
	return m.Status == store.StatusShutdown && m.Placement != PlacementRemote && m.PID > 0 && !processAlive(m.PID)
}
