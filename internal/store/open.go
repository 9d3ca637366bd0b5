package store

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// Opener opens a store of one backend from its URL. u.Scheme is the scheme
// it was registered under; what follows is the backend's to read (a path,
// a server address, query parameters).
type Opener func(ctx context.Context, u *url.URL, cfg OpenConfig) (Store, error)

// OpenConfig is what every backend may be told when it is opened; options
// of one backend alone go in its URL's query.
type OpenConfig struct {
	// Logger receives the store's warnings (default slog.Default()).
	Logger *slog.Logger
}

// OpenOption sets a field of OpenConfig.
type OpenOption func(*OpenConfig)

// WithLogger sends the store's warnings to l.
func WithLogger(l *slog.Logger) OpenOption {
	return func(c *OpenConfig) { c.Logger = l }
}

var registry = struct {
	sync.RWMutex
	openers map[string]Opener
}{openers: map[string]Opener{}}

// Register makes Open use open for URLs of scheme (lower case, no colon).
// Backends call it from init; registering a scheme twice panics, as
// database/sql's Register does, because it is a programming error.
func Register(scheme string, open Opener) {
	registry.Lock()
	defer registry.Unlock()
	if open == nil {
		panic("store: Register of a nil opener for " + scheme)
	}
	if _, dup := registry.openers[scheme]; dup {
		panic("store: Register called twice for scheme " + scheme)
	}
	registry.openers[scheme] = open
}

// Schemes returns the registered schemes, sorted.
func Schemes() []string {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]string, 0, len(registry.openers))
	for s := range registry.openers {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Open opens the store that rawURL names, through the backend registered
// for its scheme: "file:.troupe" or "file:/abs/path/.troupe" for the file
// store (its package must be imported for the scheme to be known).
func Open(ctx context.Context, rawURL string, opts ...OpenOption) (Store, error) {
	cfg := OpenConfig{Logger: slog.Default()}
	for _, o := range opts {
		o(&cfg)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("open store %q: %w", rawURL, err)
	}
	scheme := strings.ToLower(u.Scheme)
	registry.RLock()
	open := registry.openers[scheme]
	registry.RUnlock()
	if open == nil {
		known := strings.Join(Schemes(), ", ")
		if known == "" {
			known = "none registered"
		}
		if scheme == "" {
			return nil, fmt.Errorf("open store %q: %w: the URL has no scheme (known: %s)", rawURL, ErrUnknownScheme, known)
		}
		return nil, fmt.Errorf("open store %q: %w %q (known: %s)", rawURL, ErrUnknownScheme, scheme, known)
	}
	u.Scheme = scheme
	s, err := open(ctx, u, cfg)
	if err != nil {
		return nil, fmt.Errorf("open store %q: %w", rawURL, err)
	}
	return s, nil
}
