package llm

import (
	"context"
	"fmt"
	"iter"
	"sort"
	"strings"
)

// Router sends each request to a provider chosen by its model: a model
// written "provider:model" (openai:llama3.1, anthropic:claude-sonnet-4-5)
// goes to that provider with the prefix removed; any other model goes to
// the default. Only a known provider name counts as a prefix, so model names
// with colons of their own (llama3.1:8b) pass through.
type Router struct {
	Default   string
	Providers map[string]Provider
	// Missing explains how to configure a provider that is named but not
	// configured (e.g. "set OPENAI_BASE_URL"), by provider name.
	Missing map[string]string
}

var _ Provider = (*Router)(nil)

// Name is the default provider's name.
func (r *Router) Name() string { return r.Default }

// Resolve returns the provider and the bare model a model spec names.
func (r *Router) Resolve(spec string) (Provider, string, error) {
	if name, model, ok := strings.Cut(spec, ":"); ok {
		if p, known := r.Providers[name]; known {
			return p, model, nil
		}
		if how, known := r.Missing[name]; known {
			return nil, "", fmt.Errorf("%w: provider %s is not configured (%s)", ErrInvalidRequest, name, how)
		}
	}
	p, ok := r.Providers[r.Default]
	if !ok {
		names := make([]string, 0, len(r.Providers))
		for n := range r.Providers {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, "", fmt.Errorf("%w: no default provider (have %s)", ErrInvalidRequest, strings.Join(names, ", "))
	}
	return p, spec, nil
}

// Stream implements Provider.
func (r *Router) Stream(ctx context.Context, req *Request) iter.Seq2[Event, error] {
	p, model, err := r.Resolve(req.Model)
	if err != nil {
		return func(yield func(Event, error) bool) { yield(Event{}, err) }
	}
	routed := *req
	routed.Model = model
	return p.Stream(ctx, &routed)
}
