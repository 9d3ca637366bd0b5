package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	assembly "github.com/troupe-dev/troupe/internal/app"
	"github.com/troupe-dev/troupe/internal/llm"
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

// choice is the provider flags as package app takes them.
func (f providerFlags) choice() assembly.ProviderChoice {
	return assembly.ProviderChoice{Name: f.provider, BaseURL: f.baseURL}
}

// buildProvider returns the provider of a run (assembly.BuildProvider), or
// the replayed cassette under troupe replay. A missing key or endpoint is
// an error with its exit code.
func (a *app) buildProvider(pf providerFlags, maxRetries int) (llm.Provider, string, error) {
	if a.providerOverride != nil {
		return a.providerOverride, "replay", nil
	}
	p, endpoint, err := assembly.BuildProvider(pf.choice(), maxRetries)
	if err != nil {
		return nil, "", appError(err)
	}
	return p, endpoint, nil
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
