package llm

import "errors"

// Sentinel errors of model calls. Providers wrap them so callers can test
// with errors.Is while the message keeps the detail.
var (
	// ErrNoResponse means a stream ended without a final response.
	ErrNoResponse = errors.New("model stream ended without a response")
	// ErrAuth means the endpoint refused the credentials (401/403).
	ErrAuth = errors.New("authentication failed")
	// ErrInvalidRequest means the endpoint refused the request as
	// malformed (400); retrying it cannot help.
	ErrInvalidRequest = errors.New("invalid request")
	// ErrUnavailable means the endpoint could not be reached or kept
	// failing after every retry.
	ErrUnavailable = errors.New("model endpoint unavailable")
	// ErrMissingKey means no API key was configured.
	ErrMissingKey = errors.New("no API key")
	// ErrReplyTooLarge means a reply passed the cap on one reply's size;
	// the call was ended, and retrying it would only repeat that.
	ErrReplyTooLarge = errors.New("reply too large")
)
