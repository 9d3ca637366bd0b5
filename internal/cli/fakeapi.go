package cli

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
	"github.com/troupe-dev/troupe/internal/llm/fakescript"
)

// fakeAPICmd is `troupe fake-api`: the scripted fake Anthropic API served
// until the command's context ends or SIGINT/SIGTERM arrives.
func (a *app) fakeAPICmd() *cobra.Command {
	var (
		script   string
		addr     string
		latency  time.Duration
		idPrefix string
		cache    cacheFlags
	)
	cmd := &cobra.Command{
		Use:   "fake-api --script FILE",
		Short: "Serve the scripted fake Anthropic API on loopback (tests, demos)",
		Long: `Serve the scripted fake of the Anthropic Messages API (docs/fakeapi.md).

The first line of standard output is the base URL to give a client, for
example ANTHROPIC_BASE_URL=http://127.0.0.1:PORT. Each request is logged on
standard error. The server runs until interrupted (SIGINT or SIGTERM).

Message and tool_use ids carry a prefix drawn at random at every start
(toolu_fake_s3f9c0a1b2d4e_1_0), so that a run resumed against a restarted
server never meets an id twice. --id-prefix fixes it for reproducible ids
(--id-prefix '' gives the ids of docs/fakeapi.md).

The server simulates the API's prompt cache (docs/fakeapi.md): prefixes up to
cache_control breakpoints are cached for 5 minutes or an hour, and usage
reports cache reads and writes. --cache-clock-scale 60 makes a real second a
simulated minute (a 5-minute lifetime ends after 5 seconds); --no-prompt-cache
bills every call as plain input.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if latency < 0 {
				return fmt.Errorf("--latency must not be negative, got %v", latency)
			}
			if err := cache.check(); err != nil {
				return err
			}
			s, err := fakeapi.LoadScript(script)
			if err != nil {
				return withCode(ExitError, err)
			}
			if !cmd.Flags().Changed("id-prefix") {
				idPrefix = fakescript.UniquePrefix()
			}
			return a.serveFakeAPI(cmd.Context(), s, addr, latency, idPrefix, cache)
		},
	}
	cmd.Flags().StringVar(&script, "script", "", "script file, YAML or JSON (required)")
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:0", "address to listen on (port 0 picks a free port)")
	cmd.Flags().DurationVar(&latency, "latency", 0, "delay before every answer, on top of each rule's own")
	cmd.Flags().StringVar(&idPrefix, "id-prefix", "", "fixed prefix of message and tool ids (default: random at every start)")
	cache.register(cmd, true)
	_ = cmd.MarkFlagRequired("script")
	return cmd
}

// cacheFlags are the fake API's prompt cache settings.
type cacheFlags struct {
	off   bool
	scale float64
}

func (f *cacheFlags) register(cmd *cobra.Command, clock bool) {
	cmd.Flags().BoolVar(&f.off, "no-prompt-cache", false, "the fake API caches nothing: every call is billed as plain input")
	if clock {
		cmd.Flags().Float64Var(&f.scale, "cache-clock-scale", 1, "speed of the prompt cache's clock (60: a second is a minute)")
	}
}

func (f cacheFlags) check() error {
	if f.scale <= 0 || f.scale != f.scale {
		return withCode(ExitUsage, fmt.Errorf("--cache-clock-scale must be positive, got %v", f.scale))
	}
	return nil
}

// options sets the cache fields of o.
func (f cacheFlags) options(o fakeapi.Options) fakeapi.Options {
	o.NoPromptCache, o.CacheClockScale = f.off, f.scale
	return o
}

func (a *app) serveFakeAPI(ctx context.Context, s *fakeapi.Script, addr string, latency time.Duration, idPrefix string, cache cacheFlags) error {
	if ctx == nil {
		ctx = context.Background()
	}
	// Run's signal handler prints this, then cancels ctx: a handler of
	// our own could end the server before the notice is printed.
	setStopNotice("troupe: stopping the fake API server")

	var logMu sync.Mutex // requests are answered, and logged, concurrently
	srv := fakeapi.New(s, cache.options(fakeapi.Options{
		Latency:   latency,
		IDPrefix:  idPrefix,
		NoRecords: true, // nothing reads them, and they would grow for as long as it serves
		Logf: func(format string, args ...any) {
			logMu.Lock()
			defer logMu.Unlock()
			fmt.Fprintf(a.stderr, format+"\n", args...)
		},
	}))
	url, err := srv.Start(addr)
	if err != nil {
		return withCode(ExitError, errors.Join(err, srv.Close()))
	}
	fmt.Fprintln(a.stdout, url)
	<-ctx.Done()
	if err := srv.Close(); err != nil {
		return withCode(ExitError, fmt.Errorf("fake-api: close: %w", err))
	}
	return nil
}
