// Package app assembles a troupe session once: it opens the store from a
// URL, builds the model providers from flags and environment, reads the
// settings into rules, hooks, the permission policy and the sandbox, and
// turns them into a team.Config. It is the one package that names concrete
// stores (store/file) and providers (llm/anthropic, llm/openai); everything
// above it (cli) works on the interfaces.
//
// It must never depend on cli or tui: it knows no flags, commands or output
// formats, only the choices they carry (Options, TeamOptions,
// ProviderChoice).
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/store/file"
	// The NATS JetStream store registers scheme "nats" (teams on several
	// machines).
	_ "github.com/troupe-dev/troupe/internal/store/nats"
)

// Kind says what went wrong in an assembly error, so the command line can
// choose its exit code.
type Kind int

// The kinds of assembly errors.
const (
	KindFailure Kind = iota // the assembly failed (a file, a server)
	KindUsage               // a bad choice: flag, environment variable, rule
	KindNoKey               // no API key for the chosen provider
)

// Error is an assembly error of a Kind. Its message is its cause's.
type Error struct {
	Kind Kind
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// KindOf is the kind of err: the kind of the first *Error in its chain,
// else KindFailure.
func KindOf(err error) Kind {
	var ae *Error
	if errors.As(err, &ae) {
		return ae.Kind
	}
	return KindFailure
}

func usageError(err error) error { return &Error{Kind: KindUsage, Err: err} }
func noKeyError(err error) error { return &Error{Kind: KindNoKey, Err: err} }
func failure(err error) error    { return &Error{Kind: KindFailure, Err: err} }

// StoreOption changes how OpenStore opens a store.
type StoreOption func(*storeOptions)

type storeOptions struct {
	logger   *slog.Logger
	pollOnly bool
}

// StoreLogger sends the store's warnings (a malformed line) to l instead of
// slog's default logger.
func StoreLogger(l *slog.Logger) StoreOption {
	return func(o *storeOptions) { o.logger = l }
}

// StorePollOnly turns the file store's change notifications off when on,
// leaving its poll (bench store measures both).
func StorePollOnly(on bool) StoreOption {
	return func(o *storeOptions) { o.pollOnly = on }
}

// OpenStore opens the store at url through the store registry
// (store.Open): "file:PATH" (or "file://PATH") is the file store in the
// state directory PATH, and a URL with no scheme is a path too. This is the
// one place that opens a store; a new backend registers its scheme and is
// imported here for that.
func OpenStore(ctx context.Context, rawURL string, opts ...StoreOption) (store.Store, error) {
	var o storeOptions
	for _, opt := range opts {
		opt(&o)
	}
	scheme, path := splitStoreURL(rawURL)
	target := rawURL
	if scheme == file.Scheme {
		if path == "" {
			return nil, fmt.Errorf("store %q: no directory after file:", rawURL)
		}
		// A path is made a URL here, so that spaces, '?' and '#' in it stay
		// part of the path.
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("store %q: %w", rawURL, err)
		}
		u := url.URL{Scheme: file.Scheme, Path: filepath.ToSlash(abs)}
		if o.pollOnly {
			u.RawQuery = "watch=false"
		}
		target = u.String()
	}
	var sopts []store.OpenOption
	if o.logger != nil {
		sopts = append(sopts, store.WithLogger(o.logger))
	}
	return store.Open(ctx, target, sopts...)
}

// splitStoreURL splits a store URL into its scheme and the rest. A path
// (absolute, relative, or with no colon before its first slash) is a file
// URL.
func splitStoreURL(url string) (scheme, rest string) {
	i := strings.IndexByte(url, ':')
	if i <= 0 || strings.ContainsAny(url[:i], `/\.`) {
		return "file", url
	}
	scheme, rest = url[:i], url[i+1:]
	if scheme == "file" {
		rest = strings.TrimPrefix(rest, "//")
	}
	return scheme, rest
}
