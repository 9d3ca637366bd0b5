package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/anthropic"
	"github.com/troupe-dev/troupe/internal/llm/openai"
	"github.com/troupe-dev/troupe/internal/replay/cassette"
	"github.com/troupe-dev/troupe/internal/replay/pace"
	"github.com/troupe-dev/troupe/internal/secret"
	"github.com/troupe-dev/troupe/internal/team"
)

// providerFlags choose the model endpoint.
type providerFlags struct {
	provider string // anthropic (default) or openai
	baseURL  string // the chosen provider's endpoint
}

func (f *providerFlags) add(fs interface {
	StringVar(*string, string, string, string)
}) {
	fs.StringVar(&f.provider, "provider", "anthropic", "model provider: anthropic (ANTHROPIC_API_KEY) or openai (an OpenAI-compatible server: Ollama, vLLM, llama.cpp; OPENAI_API_KEY if it needs one)")
	fs.StringVar(&f.baseURL, "base-url", "", "the provider's endpoint (default: ANTHROPIC_BASE_URL or OPENAI_BASE_URL)")
}

// buildProvider returns the provider of a run: a router whose default is
// the chosen provider and which also reaches the other one when it is
// configured, so that one agent can use "openai:llama3.1" while the rest use
// the default. A missing key or endpoint is an error with its exit code.
func (a *app) buildProvider(pf providerFlags, maxRetries int) (llm.Provider, string, error) {
	if a.providerOverride != nil {
		return a.providerOverride, "replay", nil
	}
	if maxRetries == 0 {
		maxRetries = -1
	}
	router := &llm.Router{Default: pf.provider, Providers: map[string]llm.Provider{}, Missing: map[string]string{
		"anthropic": "set ANTHROPIC_API_KEY",
		"openai":    "set OPENAI_BASE_URL, or run with --provider openai --base-url URL",
	}}
	anthropicURL, openaiURL := os.Getenv("ANTHROPIC_BASE_URL"), os.Getenv("OPENAI_BASE_URL")
	// A password in an endpoint is a secret wherever the URL is printed.
	secret.RegisterURL(pf.baseURL)
	maxReply, err := maxReplyBytes()
	if err != nil {
		return nil, "", withCode(ExitUsage, err)
	}
	switch pf.provider {
	case "anthropic":
		if pf.baseURL != "" {
			anthropicURL = pf.baseURL
		}
	case "openai":
		if pf.baseURL != "" {
			openaiURL = pf.baseURL
		}
		if openaiURL == "" {
			return nil, "", withCode(ExitUsage, errors.New("--provider openai needs --base-url URL (or OPENAI_BASE_URL), e.g. http://localhost:11434/v1 for Ollama"))
		}
	default:
		return nil, "", withCode(ExitUsage, fmt.Errorf("--provider must be anthropic or openai, not %q", pf.provider))
	}
	if key := os.Getenv("ANTHROPIC_API_KEY"); key != "" {
		p, err := anthropic.New(anthropic.Config{APIKey: key, BaseURL: anthropicURL, MaxRetries: maxRetries, MaxReplyBytes: maxReply})
		if err != nil {
			return nil, "", withCode(ExitError, err)
		}
		router.Providers["anthropic"] = p
	} else if pf.provider == "anthropic" {
		return nil, "", withCode(ExitNoKey, errors.New("ANTHROPIC_API_KEY is not set (export it, use --provider openai for a local server, or try `troupe demo`, which needs no key)"))
	}
	if openaiURL != "" {
		p, err := openai.New(openai.Config{APIKey: os.Getenv("OPENAI_API_KEY"), BaseURL: openaiURL, MaxRetries: maxRetries, MaxReplyBytes: maxReply})
		if err != nil {
			return nil, "", withCode(ExitError, err)
		}
		router.Providers["openai"] = p
	}
	endpoint := anthropicURL
	if pf.provider == "openai" {
		endpoint = openaiURL
	}
	if endpoint == "" {
		endpoint = "https://api.anthropic.com"
	}
	return router, endpoint, nil
}

// maxReplyBytes is the cap on one model reply from TROUPE_MAX_REPLY_BYTES
// (0 or unset: the providers' default, 32 MiB; negative: no cap).
func maxReplyBytes() (int64, error) {
	v := strings.TrimSpace(os.Getenv("TROUPE_MAX_REPLY_BYTES"))
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("TROUPE_MAX_REPLY_BYTES must be a number of bytes, got %q", v)
	}
	return n, nil
}

// agentProviderArgs are the flags and environment that give a teammate
// process the same providers as the lead (keys come from the inherited
// environment and are never written anywhere).
func agentProviderArgs(pf providerFlags) (args, env []string) {
	args = []string{"--provider", pf.provider}
	if pf.baseURL != "" {
		args = append(args, "--base-url", pf.baseURL)
	}
	return args, nil
}

// recording wraps p so every model call of the run is written to the
// cassette at path; finish closes it and reports a write error.
func (a *app) recording(p llm.Provider, path, workspace string) (llm.Provider, func() error, error) {
	if path == "" {
		return p, func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, withCode(ExitError, fmt.Errorf("--record: %w", err))
	}
	meta := map[string]string{"workspace": workspace}
	for k, v := range snapshotMeta(a.ctx, workspace) {
		meta[k] = v
	}
	rec := cassette.NewRecorder(p, secret.Writer(f), cassette.Header{
		CreatedAt: time.Now().UTC(), Provider: p.Name(), Args: replayArgs(a.args), Meta: meta,
	})
	a.recorder = rec
	return rec, func() error {
		werr := rec.Err()
		if err := f.Close(); werr == nil {
			werr = err
		}
		if werr != nil {
			return fmt.Errorf("--record %s: %w", path, werr)
		}
		return nil
	}, nil
}

// teamPacer is the pacer of a headless team run: the recorded schedule when
// replaying, a new recording of one with --record, else none. Pacing is what
// makes a team's run replay exactly; teammate processes cannot share the
// lead's turn, so they cannot be recorded.
func (a *app) teamPacer(mode string) (*pace.Pacer, error) {
	if a.pacerOverride != nil {
		if mode == team.ModeProcess {
			return nil, withCode(ExitUsage, errors.New("this recording was made with in-process teammates; replay it without --teammate-mode process"))
		}
		return a.pacerOverride, nil
	}
	rec := a.recorder
	if rec == nil {
		return nil, nil
	}
	if err := a.canRecord(mode); err != nil {
		return nil, err
	}
	return pace.NewRecorder(pace.Options{Record: rec.Step}), nil
}

// canRecord refuses --record with teammate processes, before anything runs.
func (a *app) canRecord(mode string) error {
	if a.record != "" && mode == team.ModeProcess {
		return withCode(ExitUsage, errors.New("--record needs in-process teammates: teammate processes make model calls the lead's process cannot record"))
	}
	return nil
}

// replayArgs is the command line without --record and --workspace (the
// replay runs in a fresh workspace of its own).
func replayArgs(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--record" || a == "--workspace" || a == "--state-dir":
			i++
		case strings.HasPrefix(a, "--record=") || strings.HasPrefix(a, "--workspace=") || strings.HasPrefix(a, "--state-dir="):
		default:
			out = append(out, a)
		}
	}
	return out
}

// replayCmd is `troupe replay FILE`.
func (a *app) replayCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "replay FILE",
		Short: "Re-run a recorded run against its cassette, with no network, and report the first difference",
		Long: `Re-runs the command recorded in FILE (made with --record) in a fresh
workspace, answering every model call from the cassette instead of a model.
When the recorded workspace was in a git checkout, the fresh workspace starts
with its files as they were (uncommitted changes to tracked files included,
untracked files not); with --workspace DIR the replay runs in DIR as it is. Each agent's calls are answered in that agent's recorded
order, and the agents of a team take their turns in the recorded order, so
every agent meets the inbox, the task board and the files it met when the run
was recorded. The first request that differs from the recording (because the
code, the prompts, the tools or the workspace changed) is reported with the
agent, the call and the first field that differs, and the replay exits 1.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return withCode(ExitUsage, err)
			}
			c, err := cassette.Load(bytes.NewReader(data))
			if err != nil {
				return withCode(ExitUsage, err)
			}
			if len(c.Header.Args) == 0 {
				return withCode(ExitUsage, fmt.Errorf("%s records no command to re-run", args[0]))
			}
			dir := a.workspace
			if dir == "" {
				// A fresh workspace, holding what the recorded one held
				// when the recorded workspace was a git checkout.
				if dir, err = os.MkdirTemp("", "troupe-replay-"); err != nil {
					return withCode(ExitError, err)
				}
				note, err := restoreSnapshot(a.ctx, c.Header.Meta, dir)
				if err != nil {
					return withCode(ExitError, fmt.Errorf("%w (replay into a copy of it with --workspace DIR)", err))
				}
				if note != "" {
					fmt.Fprintf(a.stderr, "troupe: %s\n", note)
				}
			}
			dir, _ = filepath.Abs(dir)
			// The recorded prompts name the recorded workspace; the replay
			// runs elsewhere.
			if old := c.Header.Meta["workspace"]; old != "" && old != dir {
				data = bytes.ReplaceAll(data, []byte(old), []byte(dir))
				if c, err = cassette.Load(bytes.NewReader(data)); err != nil {
					return withCode(ExitUsage, err)
				}
			}
			rp := cassette.NewReplayer(c)
			ctx, cancel := context.WithCancel(a.ctx)
			defer cancel()
			rp.OnDivergence(func(error) { cancel() })
			sub := &app{ctx: ctx, stdin: a.stdin, stdout: a.stdout, stderr: a.stderr, rawStdout: a.rawStdout, providerOverride: rp}
			if len(c.Steps) > 0 {
				sub.pacerOverride = pace.NewReplayer(c.Steps, pace.Options{OnDiverge: func(error) { cancel() }})
				defer sub.pacerOverride.Close()
			} else if len(c.Agents()) > 1 {
				fmt.Fprintf(a.stderr, "troupe: %s keeps no order of turns (recorded in the terminal UI, or by an older troupe): its agents run freely, so the replay may diverge on timing alone\n", args[0])
			}
			root := sub.rootCmd()
			runArgs := append(append([]string(nil), c.Header.Args...), "--workspace", dir)
			sub.args = runArgs
			root.SetArgs(runArgs)
			root.SetIn(a.stdin)
			root.SetOut(a.stdout)
			root.SetErr(a.stderr)
			fmt.Fprintf(a.stderr, "troupe: replaying %q in %s\n", strings.Join(c.Header.Args, " "), dir)
			runErr := root.ExecuteContext(ctx)
			if d := rp.Divergence(); d != nil {
				return withCode(ExitError, d)
			}
			if err := sub.pacerOverride.Err(); err != nil {
				return withCode(ExitError, err)
			}
			if unused := rp.Unused(); len(unused) > 0 {
				return withCode(ExitError, fmt.Errorf("the replay made fewer model calls than the recording: %v left unused", unused))
			}
			if runErr != nil {
				return runErr
			}
			u := c.Usage()
			turns := ""
			if n := len(c.Steps); n > 0 {
				turns = fmt.Sprintf(", %d turns in the recorded order", n-sub.pacerOverride.Remaining())
			}
			fmt.Fprintf(a.stderr, "troupe: replay matched the recording (%d calls%s; %d input, %d output, %d cache-read tokens)\n",
				len(c.Entries), turns, u.InputTokens, u.OutputTokens, u.CacheReadTokens)
			return nil
		},
	}
}
