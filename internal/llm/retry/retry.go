// Package retry holds the backoff policy the model providers share:
// exponential waits with jitter, a server's retry-after honoured up to a cap,
// and a sleep that gives way to cancellation. Providers keep their own
// judgement of which failures are worth another attempt.
//
// It must never depend on anything else of troupe's.
package retry

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// Backoff shapes the waits between attempts. Zero fields take the defaults
// noted.
type Backoff struct {
	// Base is the wait before the first retry (default 500ms); each
	// further retry doubles it, up to Max (default 30s).
	Base time.Duration
	Max  time.Duration
	// MaxRetryAfter caps a server's retry-after (default 5m), so a
	// confused server cannot park a run for hours.
	MaxRetryAfter time.Duration
	// Jitter returns a number in [0,1) (default math/rand).
	Jitter func() float64
}

// Delay is the wait before retry number attempt (1-based): the server's
// retryAfter when it gave one, else Base*2^(attempt-1) capped at Max, with
// jitter taking it down to as little as half so that many clients refused at
// once do not come back at once.
func (b Backoff) Delay(attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, orDefault(b.MaxRetryAfter, 5*time.Minute))
	}
	base, ceiling := orDefault(b.Base, 500*time.Millisecond), orDefault(b.Max, 30*time.Second)
	d := base << min(max(attempt-1, 0), 20)
	if d <= 0 || d > ceiling {
		d = ceiling
	}
	jitter := b.Jitter
	if jitter == nil {
		jitter = rand.Float64
	}
	half := d / 2
	return half + time.Duration(jitter()*float64(d-half))
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// After reads how long a server asked the client to wait: retry-after-ms,
// else retry-after in seconds or as an HTTP date. It returns 0 when the
// headers say nothing usable.
func After(h http.Header) time.Duration {
	if v := h.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("retry-after")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// Sleep waits d, or returns ctx's error as soon as ctx is done.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
