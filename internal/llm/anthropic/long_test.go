package anthropic_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/anthropic"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
)

// longServer serves one rule whose reply is a text of n bytes, streamed in
// deltas of deltaBytes, as a real long reply comes.
func longServer(tb testing.TB, n, deltaBytes int) (*fakeapi.Server, string) {
	tb.Helper()
	text := strings.Repeat("lorem ipsum dolor sit amet, ", n/28+1)[:n]
	s, err := fakeapi.ParseScript(fmt.Appendf(nil, `{"rules": [{"times": 0, "reply": [{"text": %q}]}]}`, text))
	if err != nil {
		tb.Fatal(err)
	}
	srv := fakeapi.New(s, fakeapi.Options{DeltaBytes: deltaBytes})
	if _, err := srv.Start("127.0.0.1:0"); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Close() })
	return srv, text
}

// A reply past the cap ends the call with ErrReplyTooLarge, saying what
// the cap is, and is not retried; a reply within it arrives whole.
func TestReplyCap(t *testing.T) {
	srv, text := longServer(t, 10_000, 100)
	for _, tc := range []struct {
		max     int64
		wantErr bool
	}{{4096, true}, {10_000, false}, {-1, false}, {0, false}} {
		p, sl := newProvider(t, srv, func(c *anthropic.Config) { c.MaxReplyBytes = tc.max })
		before := len(srv.Requests())
		resp, err := llm.Collect(p.Stream(context.Background(), userReq("hi")), nil)
		if tc.wantErr {
			if !errors.Is(err, llm.ErrReplyTooLarge) || !strings.Contains(err.Error(), "4 KiB") {
				t.Errorf("cap %d: err = %v, want ErrReplyTooLarge naming 4 KiB", tc.max, err)
			}
			if len(sl.d) != 0 || len(srv.Requests())-before != 1 {
				t.Errorf("cap %d: retried: waits %v, requests %d", tc.max, sl.d, len(srv.Requests())-before)
			}
			continue
		}
		if err != nil || resp.Message.Text() != text {
			t.Errorf("cap %d: err %v, text of %d bytes, want %d", tc.max, err, len(resp.Message.Text()), len(text))
		}
	}
}

// A long reply in many small deltas is gathered in linear time: the
// memory allocated for it (server and client both) is a small multiple of
// its size, where appending each delta to a string would copy the reply
// once per delta (gigabytes here).
func TestLongReplyGatheredLinearly(t *testing.T) {
	const size = 1 << 20
	srv, text := longServer(t, size, 256)
	p, _ := newProvider(t, srv, nil)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	resp, err := llm.Collect(p.Stream(context.Background(), userReq("hi")), nil)
	runtime.ReadMemStats(&after)
	if err != nil || resp.Message.Text() != text {
		t.Fatalf("long reply: err %v, %d bytes of %d", err, len(resp.Message.Text()), size)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 128*size {
		t.Errorf("a %d MiB reply allocated %d MiB: not linear", size>>20, alloc>>20)
	} else {
		t.Logf("a %d MiB reply allocated %d MiB", size>>20, alloc>>20)
	}
}

// BenchmarkLongReply streams replies of 1, 10 and 50 MB in 1 KiB deltas
// through the fake server: the time per byte stays flat as the size grows.
func BenchmarkLongReply(b *testing.B) {
	for _, mb := range []int{1, 10, 50} {
		b.Run(fmt.Sprintf("%dMB", mb), func(b *testing.B) {
			srv, text := longServer(b, mb<<20, 1024)
			p, err := anthropic.New(anthropic.Config{APIKey: "k", BaseURL: srv.URL(), MaxRetries: -1, MaxReplyBytes: -1})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(text)))
			b.ResetTimer()
			for b.Loop() {
				resp, err := llm.Collect(p.Stream(context.Background(), userReq("hi")), nil)
				if err != nil || len(resp.Message.Text()) != len(text) {
					b.Fatalf("err %v, %d bytes", err, len(resp.Message.Text()))
				}
			}
			b.StopTimer()
			closeIdle(nil)
		})
	}
}
