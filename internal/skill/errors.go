package skill

import "errors"

// Reasons a SKILL.md is refused or a skill cannot be loaded. Warnings and
// errors wrap one of these, so callers can tell them apart with errors.Is.
var (
	// ErrNoFrontMatter: the file does not begin with a "---" line.
	ErrNoFrontMatter = errors.New("no front matter (the file must begin with a --- line)")
	// ErrUnclosedFrontMatter: no "---" line ends the front matter.
	ErrUnclosedFrontMatter = errors.New("front matter is not closed by a --- line")
	// ErrInvalidYAML: the front matter is not a YAML mapping.
	ErrInvalidYAML = errors.New("invalid YAML front matter")
	// ErrMissingName: the front matter has no name.
	ErrMissingName = errors.New("front matter has no name")
	// ErrInvalidName: the name does not match NamePattern.
	ErrInvalidName = errors.New("invalid skill name")
	// ErrMissingDescription: the front matter has no description.
	ErrMissingDescription = errors.New("front matter has no description")
	// ErrTooLarge: the file is larger than MaxFileSize.
	ErrTooLarge = errors.New("file too large")
	// ErrDuplicate: an earlier directory already defines a skill of that name.
	ErrDuplicate = errors.New("duplicate skill")
	// ErrUnknown: Load was asked for a skill the set does not hold.
	ErrUnknown = errors.New("unknown skill")
)
