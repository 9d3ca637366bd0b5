package llm

import (
	"errors"
	"testing"
)

func TestAPIError(t *testing.T) {
	for _, tc := range []struct {
		status int
		kind   error
		retry  bool
	}{
		{401, ErrAuth, false}, {403, ErrAuth, false},
		{408, ErrUnavailable, true}, {409, ErrUnavailable, true}, {429, ErrUnavailable, true},
		{500, ErrUnavailable, true}, {529, ErrUnavailable, true},
		{400, ErrInvalidRequest, false}, {404, ErrInvalidRequest, false}, {413, ErrInvalidRequest, false},
	} {
		e := &APIError{Provider: "p"}
		e.JudgeStatus(tc.status)
		if !errors.Is(e, tc.kind) || e.Retryable() != tc.retry {
			t.Errorf("status %d: kind %v retry %v, want %v %v", tc.status, e.Kind, e.Retry, tc.kind, tc.retry)
		}
	}
	e := &APIError{Provider: "openai", Status: 429, Type: "requests", Code: "rate_limit_exceeded", Message: "slow down", RequestID: "req_1"}
	if got, want := e.Error(), "openai: 429 requests (rate_limit_exceeded): slow down (request req_1)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got := (&APIError{Provider: "anthropic", Message: "connection reset"}).Error(); got != "anthropic: connection reset" {
		t.Errorf("a transport failure reads %q", got)
	}
}
