package llm

import (
	"context"
	"errors"
	"iter"
	"testing"
)

type named struct {
	name string
	got  *string
}

func (n named) Name() string { return n.name }
func (n named) Stream(_ context.Context, req *Request) iter.Seq2[Event, error] {
	*n.got = n.name + "/" + req.Model
	return func(yield func(Event, error) bool) {
		yield(Event{Type: EventDone, Response: &Response{}}, nil)
	}
}

func TestRouter(t *testing.T) {
	var got string
	r := &Router{Default: "anthropic", Providers: map[string]Provider{
		"anthropic": named{"anthropic", &got}, "openai": named{"openai", &got},
	}, Missing: map[string]string{"gemini": "not supported"}}
	for _, tc := range []struct{ spec, want string }{
		{"claude-sonnet-4-5", "anthropic/claude-sonnet-4-5"},
		{"openai:llama3.1:8b", "openai/llama3.1:8b"},
		{"anthropic:claude-opus-4-1", "anthropic/claude-opus-4-1"},
		{"llama3.1:8b", "anthropic/llama3.1:8b"},
		{"", "anthropic/"},
	} {
		if _, err := Collect(r.Stream(context.Background(), &Request{Model: tc.spec}), nil); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%q went to %q, want %q", tc.spec, got, tc.want)
		}
	}
	if _, err := Collect(r.Stream(context.Background(), &Request{Model: "gemini:pro"}), nil); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("unconfigured provider: err = %v", err)
	}
}
