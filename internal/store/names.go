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

// ResolveRecipient normalises name and checks it is the lead or a member of
// r. The error for an unknown name lists the valid ones.
func ResolveRecipient(r *Roster, name string) (string, error) {
	n, err := NormalizeName(name)
	if err != nil {
		return "", err
	}
	valid := r.Recipients()
	for _, v := range valid {
		if v == n {
			return n, nil
		}
	}
	return "", fmt.Errorf("%w %q in team %s (members: %s)", ErrUnknownMember, name, r.Name, strings.Join(valid, ", "))
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
	if _, err := ResolveRecipient(r, n); err != nil {
		return "", fmt.Errorf("sender: %w", err)
	}
	return n, nil
}
