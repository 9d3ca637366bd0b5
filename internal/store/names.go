package store

import (
	"fmt"
	"regexp"
	"strings"
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
	n := strings.ToLower(strings.TrimSpace(name))
	if n == LeadAlias {
		n = LeadName
	}
	if !NamePattern.MatchString(n) {
		return "", fmt.Errorf("%w: %q (want %s)", ErrInvalidName, name, NamePattern)
	}
	return n, nil
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
	for _, v := range r.Names() {
		if v == n {
			return n, nil
		}
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
