package todo

import "errors"

// Errors of (*List).Replace; the messages it returns wrap them and say, for
// the model, what to fix.
var (
	ErrTooMany        = errors.New("too many items")
	ErrEmptyContent   = errors.New("empty content")
	ErrBadStatus      = errors.New("invalid status")
	ErrManyInProgress = errors.New("more than one item in progress")
)
