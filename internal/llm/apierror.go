package llm

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// APIError is a failed model call as a provider reports it. It never
// carries credentials or request headers. errors.Is matches its Kind (one
// of the sentinels: ErrAuth, ErrUnavailable, ErrInvalidRequest).
type APIError struct {
	Provider  string // "anthropic", "openai"
	Status    int    // HTTP status; 0 for a transport or in-stream failure
	Type      string // the server's error type, e.g. "overloaded_error"
	Code      string // the server's error code, e.g. "rate_limit_exceeded"
	Message   string
	RequestID string
	// RetryAfter is the server's retry-after, if it sent one.
	RetryAfter time.Duration
	// Retry says whether another attempt may succeed.
	Retry bool
	Kind  error
}

func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString(e.Provider)
	if e.Status != 0 {
		fmt.Fprintf(&b, ": %d", e.Status)
	}
	if e.Type != "" {
		fmt.Fprintf(&b, " %s", e.Type)
	}
	if e.Code != "" {
		fmt.Fprintf(&b, " (%s)", e.Code)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " (request %s)", e.RequestID)
	}
	return b.String()
}

// Unwrap lets errors.Is match the sentinel.
func (e *APIError) Unwrap() error { return e.Kind }

// Retryable reports whether another attempt may succeed.
func (e *APIError) Retryable() bool { return e.Retry }

// JudgeStatus sets Kind and Retry from an HTTP status, as both providers'
// APIs mean them: 401 and 403 are ErrAuth; 408, 409, 429 and 5xx are
// ErrUnavailable and worth another attempt; any other is ErrInvalidRequest.
func (e *APIError) JudgeStatus(status int) {
	switch {
	case status == 401 || status == 403:
		e.Kind, e.Retry = ErrAuth, false
	case status == 408 || status == 409 || status == 429 || status >= 500:
		e.Kind, e.Retry = ErrUnavailable, true
	default:
		e.Kind, e.Retry = ErrInvalidRequest, false
	}
}

// Retries is how a provider retries one streamed call.
type Retries struct {
	Max      int                                                       // retries after the first attempt
	Delay    func(attempt int, retryAfter time.Duration) time.Duration // the wait before retry number attempt
	Sleep    func(ctx context.Context, d time.Duration) error
	Classify func(error) *APIError // how the provider judges a failed attempt
}

// Run makes attempts until one succeeds, one fails for good, the retries
// run out or ctx ends. attempt streams one try to yield and reports its
// response, whether the consumer stopped, or its error. Run yields an
// EventRetry before each wait and ends with EventDone or an error.
func (r Retries) Run(ctx context.Context, yield func(Event, error) bool, attempt func() (*Response, bool, error)) {
	for n := 1; ; n++ {
		resp, stopped, err := attempt()
		if stopped {
			return
		}
		if err == nil {
			yield(Event{Type: EventDone, Response: resp}, nil)
			return
		}
		if ctx.Err() != nil {
			yield(Event{}, ctx.Err())
			return
		}
		ae := r.Classify(err)
		if !ae.Retry {
			yield(Event{}, ae)
			return
		}
		if n > r.Max {
			yield(Event{}, fmt.Errorf("%w after %d attempts: %v", ErrUnavailable, n, ae))
			return
		}
		delay := r.Delay(n, ae.RetryAfter)
		if !yield(Event{Type: EventRetry, Attempt: n, Delay: delay.Milliseconds(), Err: ae}, nil) {
			return
		}
		if err := r.Sleep(ctx, delay); err != nil {
			yield(Event{}, err)
			return
		}
	}
}
