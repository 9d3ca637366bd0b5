package retry_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/troupe-dev/troupe/internal/llm/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDelay(t *testing.T) {
	fixed := func(f float64) func() float64 { return func() float64 { return f } }
	for _, tc := range []struct {
		name       string
		b          retry.Backoff
		attempt    int
		retryAfter time.Duration
		want       time.Duration
	}{
		{"first, no jitter", retry.Backoff{Jitter: fixed(0)}, 1, 0, 250 * time.Millisecond},
		{"first, full jitter", retry.Backoff{Jitter: fixed(0.5)}, 1, 0, 375 * time.Millisecond},
		{"doubles", retry.Backoff{Jitter: fixed(0.5)}, 2, 0, 750 * time.Millisecond},
		{"capped", retry.Backoff{Base: time.Second, Max: 4 * time.Second, Jitter: fixed(0)}, 10, 0, 2 * time.Second},
		{"huge attempt does not overflow", retry.Backoff{Jitter: fixed(0)}, 1000, 0, 15 * time.Second},
		{"retry-after wins", retry.Backoff{Jitter: fixed(0.9)}, 3, 7 * time.Second, 7 * time.Second},
		{"retry-after capped", retry.Backoff{MaxRetryAfter: time.Minute}, 1, time.Hour, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.b.Delay(tc.attempt, tc.retryAfter); got != tc.want {
				t.Errorf("Delay(%d, %v) = %v, want %v", tc.attempt, tc.retryAfter, got, tc.want)
			}
		})
	}
}

func TestAfter(t *testing.T) {
	future := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		h   http.Header
		min time.Duration
		max time.Duration
	}{
		{http.Header{}, 0, 0},
		{http.Header{"Retry-After": {"2"}}, 2 * time.Second, 2 * time.Second},
		{http.Header{"Retry-After": {"0.05"}}, 50 * time.Millisecond, 50 * time.Millisecond},
		{http.Header{"Retry-After-Ms": {"120"}, "Retry-After": {"9"}}, 120 * time.Millisecond, 120 * time.Millisecond},
		{http.Header{"Retry-After": {"soon"}}, 0, 0},
		{http.Header{"Retry-After": {"-3"}}, 0, 0},
		{http.Header{"Retry-After": {future}}, 58 * time.Minute, time.Hour},
	} {
		if got := retry.After(tc.h); got < tc.min || got > tc.max {
			t.Errorf("After(%v) = %v, want in [%v, %v]", tc.h, got, tc.min, tc.max)
		}
	}
}

func TestSleepCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := retry.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep = %v, want context.Canceled", err)
	}
	if err := retry.Sleep(context.Background(), time.Nanosecond); err != nil {
		t.Fatalf("Sleep = %v", err)
	}
}
