package store

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Reserved names.
const (
	// LeadName is the lead's name on every team.
	LeadName = "team-lead"
	// LeadAlias is accepted on input for LeadName.
	LeadAlias = "lead"
	// HumanName is the sender name of the person at the keyboard. It has no
	// inbox.
	HumanName = "human"
)

// NamePattern is what team and member names must match (after folding to
// lower case).
var NamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,39}$`)

// NormalizeName folds name to lower case, maps the lead alias to LeadName and
// checks it against NamePattern.
func NormalizeName(name string) (string, error) {
	if validName(name) && name != LeadAlias {
		return name, nil // already normal: every roster change checks every member's name
	}
	n := strings.ToLower(strings.TrimSpace(name))
	if n == LeadAlias {
		n = LeadName
	}
	if !validName(n) {
		return "", fmt.Errorf("%w: %q (want %s)", ErrInvalidName, name, NamePattern)
	}
	return n, nil
}

// validName is NamePattern.MatchString without the regexp machinery.
func validName(n string) bool {
	if len(n) == 0 || len(n) > 40 {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// NormalizeMemberName is NormalizeName for a name to put on a roster: the
// reserved names HumanName and LeadAlias cannot be members.
func NormalizeMemberName(name string) (string, error) {
	n, err := NormalizeName(name)
	if err != nil {
		return "", err
	}
	if n == HumanName || strings.ToLower(strings.TrimSpace(name)) == LeadAlias {
		return "", fmt.Errorf("%w: %q is reserved", ErrInvalidName, name)
	}
	return n, nil
}

// ResolveRecipient normalises name and checks it may be sent a message in
// team r: the lead, or a member that has not shut down (ErrMemberGone). The
// error for an unknown name lists the valid ones.
func ResolveRecipient(r *Roster, name string) (string, error) {
	n, err := ResolveMember(r, name)
	if err != nil {
		return "", err
	}
	if m, ok := r.Member(n); ok && n != LeadName && m.Status == StatusShutdown {
		return "", fmt.Errorf("%w: %s in team %s has shut down and reads no more messages (members: %s)", ErrMemberGone, n, r.Name, strings.Join(r.Recipients(), ", "))
	}
	return n, nil
}

// ResolveMember normalises name and checks it has an inbox in team r: the
// lead or a member, shut down or not.
func ResolveMember(r *Roster, name string) (string, error) {
	n, err := NormalizeName(name)
	if err != nil {
		return "", err
	}
	if n == LeadName {
		return n, nil
	}
	if _, ok := r.Member(n); ok {
		return n, nil
	}
	return "", fmt.Errorf("%w %q in team %s (members: %s)", ErrUnknownMember, name, r.Name, strings.Join(r.Recipients(), ", "))
}

// ResolveSender normalises name and checks it may send in team r: the lead,
// a member, or HumanName.
func ResolveSender(r *Roster, name string) (string, error) {
	n, err := NormalizeName(name)
	if err != nil {
		return "", err
	}
	if n == HumanName {
		return n, nil
	}
	if _, err := ResolveMember(r, n); err != nil {
		return "", fmt.Errorf("sender: %w", err)
	}
	return n, nil
}

// PrepareMessage is what every backend does to m before it stores it: its
// recipient and sender resolved in team r, its type, id and timestamp
// filled in when empty (from newID and now), and the whole validated.
func PrepareMessage(r *Roster, m Message, newID func() string, now func() time.Time) (Message, error) {
	to, err := ResolveRecipient(r, m.To)
	if err != nil {
		return Message{}, fmt.Errorf("send: %w", err)
	}
	from, err := ResolveSender(r, m.From)
	if err != nil {
		return Message{}, fmt.Errorf("send to %s: %w", to, err)
	}
	m.To, m.From = to, from
	if m.Type == "" {
		m.Type = TypeMessage
	}
	if m.ID == "" {
		m.ID = newID()
	}
	if m.Timestamp.IsZero() {
		m.Timestamp = now()
	}
	if err := ValidateMessage(&m); err != nil {
		return Message{}, fmt.Errorf("send to %s: %w", to, err)
	}
	return m, nil
}

// NormalizeMembers normalises r's member names in place and refuses
// duplicates and reserved names.
func (r *Roster) NormalizeMembers() error {
	seen := make(map[string]bool, len(r.Members))
	for i := range r.Members {
		m := &r.Members[i]
		n, err := NormalizeMemberName(m.Name)
		if err != nil {
			return err
		}
		if seen[n] {
			return fmt.Errorf("%w: %s", ErrMemberExists, n)
		}
		seen[n] = true
		m.Name = n
	}
	return nil
}

// Clone is a deep copy of r (Members never nil): a roster update edits
// its copy in place, and a backend that compares the copy with what it
// read must not find the two sharing a slice.
func (r Roster) Clone() Roster {
	r.Members = slices.Clone(r.Members)
	if r.Members == nil {
		r.Members = []Member{}
	}
	for i := range r.Members {
		r.Members[i].MCPServers = slices.Clone(r.Members[i].MCPServers)
	}
	r.Personas = slices.Clone(r.Personas)
	return r
}

// BroadcastEach sends a copy of m to every recipient of team r but its
// sender, each with an id of its own, through send (a backend's single
// send); it stops at the first error with what was sent so far.
func BroadcastEach(r *Roster, m Message, send func(Message) (Message, error)) ([]Message, error) {
	from, err := ResolveSender(r, m.From)
	if err != nil {
		return nil, fmt.Errorf("broadcast: %w", err)
	}
	if m.Type == "" {
		m.Type = TypeBroadcast
	}
	var out []Message
	for _, to := range r.Recipients() {
		if to == from {
			continue
		}
		c := m
		c.To, c.ID = to, ""
		sent, err := send(c)
		if err != nil {
			return out, err
		}
		out = append(out, sent)
	}
	return out, nil
}

// HumanAnswer is the message that carries the human's answer to a
// permission or plan approval request (requestType is the request's
// message type) back to the member that asked. The terminal UI and the web
// dashboard answer with the same words.
func HumanAnswer(requestType, to, requestID string, approve bool, feedback string) Message {
	typ := TypePermissionResponse
	if requestType == TypePlanApprovalRequest {
		typ = TypePlanApprovalResponse
	}
	verdict := "approved"
	if !approve {
		verdict = "denied"
	}
	return Message{Type: typ, From: HumanName, To: to, RequestID: requestID, Approve: &approve, Feedback: feedback,
		Content: fmt.Sprintf("The human %s your request.", verdict)}
}

// UpdateMemberVia is UpdateMember made of UpdateRoster, for a backend
// whose roster changes cost the same either way.
func UpdateMemberVia(ctx context.Context, t Team, name string, fn func(*Member) error) (m Member, ok bool, err error) {
	n, err := NormalizeMemberName(name)
	if err != nil {
		return Member{}, false, fmt.Errorf("update member: %w", err)
	}
	_, err = t.UpdateRoster(ctx, func(r *Roster) error {
		p, found := r.Member(n)
		if ok = found; !found {
			return nil
		}
		next := *p
		next.MCPServers = slices.Clone(p.MCPServers)
		if err := fn(&next); err != nil {
			return err
		}
		next.Name = p.Name
		*p, m = next, next
		m.MCPServers = slices.Clone(next.MCPServers)
		return nil
	})
	if err != nil {
		return Member{}, false, err
	}
	return m, ok, nil
}

// ReadMemberVia is ReadMember made of ReadRoster, for a backend whose
// roster reads cost the same either way.
func ReadMemberVia(ctx context.Context, t Team, name string) (Member, bool, error) {
	n, err := NormalizeMemberName(name)
	if err != nil {
		return Member{}, false, fmt.Errorf("read member: %w", err)
	}
	r, err := t.ReadRoster(ctx)
	if err != nil {
		return Member{}, false, err
	}
	m, ok := r.Member(n)
	if !ok {
		return Member{}, false, nil
	}
	return *m, true, nil
}
