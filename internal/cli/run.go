package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/anthropic"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/text"
)

// runFlags are the flags of a headless run (`troupe -p`).
type runFlags struct {
	prompt       string
	outputFormat string
	model        string
	maxTurns     int
	maxRetries   int
	verbose      bool
	team         teamFlags
	provider     providerFlags
}

func (a *app) addRunFlags(root *cobra.Command) {
	f := &a.run
	root.Flags().StringVarP(&f.prompt, "print", "p", "", "run headless on this prompt and print the result")
	root.Flags().StringVar(&f.outputFormat, "output-format", "text", "output of a headless run: text, json or stream-json")
	root.Flags().StringVar(&f.model, "model", "", "model name (default "+anthropic.DefaultModel+")")
	root.Flags().IntVar(&f.maxTurns, "max-turns", 0, "stop after this many model calls (0: no limit)")
	root.Flags().IntVar(&f.maxRetries, "max-retries", 5, "retries of a failed model call (429, 529, 5xx, broken connections)")
	root.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "show tool calls and results on stderr (text output)")
	f.team.add(root.Flags())
	f.provider.add(root.Flags())
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("unknown command %q; see troupe --help", args[0])
		}
		if f.prompt == "" {
			return a.runTUI(cmd)
		}
		return a.runHeadless(cmd)
	}
}

func (a *app) runHeadless(cmd *cobra.Command) error {
	f := &a.run
	switch f.outputFormat {
	case "text", "json", "stream-json":
	default:
		return withCode(ExitUsage, fmt.Errorf("--output-format must be text, json or stream-json, not %q", f.outputFormat))
	}
	if err := a.canRecord(f.team.teammateMode); err != nil {
		return err
	}
	dir, err := a.Workspace()
	if err != nil {
		return withCode(ExitUsage, err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return withCode(ExitUsage, fmt.Errorf("workspace %s is not a directory", dir))
	}
	provider, base, err := a.buildProvider(f.provider, f.maxRetries)
	if err != nil {
		return err
	}
	provider, finishRecord, err := a.recording(provider, a.record, dir)
	if err != nil {
		return err
	}
	e, err := a.openEnv(dir, a.stderr)
	if err != nil {
		return withCode(ExitError, err)
	}
	defer e.close()
	out := newRunOutput(f.outputFormat, a.stdout, a.stderr, f.verbose)
	cfg, err := a.sessionConfig(e, provider, f.model, f.maxTurns, &f.team, f.provider)
	if err != nil {
		return withCode(ExitError, err)
	}
	if cfg.Pacer, err = a.teamPacer(cfg.TeammateMode); err != nil {
		return err
	}
	var sess *team.Session
	tl := newTally()
	cfg.Observe = observeWithTeam(func() *team.Session { return sess }, out.observe)
	cfg.OnEvent = func(ev store.Event) {
		tl.observe(ev)
		out.teamEvent(ev)
	}
	sess, err = team.NewSession(cfg)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	start := time.Now()
	res, runErr := sess.RunHeadless(a.ctx, f.prompt)
	closeErr := sess.Close()
	out.finish(res, tl, runErr, time.Since(start))
	if runErr == nil && closeErr != nil {
		runErr = closeErr
	}
	if err := finishRecord(); err != nil && runErr == nil {
		runErr = err
	}
	switch {
	case runErr == nil:
		return nil
	case errors.Is(runErr, context.Canceled):
		if t := res.Team; t != "" {
			return withCode(ExitInterrupted, fmt.Errorf("interrupted; continue with: troupe resume %s", t))
		}
		return withCode(ExitInterrupted, errors.New("interrupted"))
	case errors.Is(runErr, llm.ErrAuth):
		return withCode(ExitNoKey, fmt.Errorf("the model endpoint refused the API key: %v", runErr))
	case errors.Is(runErr, llm.ErrUnavailable):
		return withCode(ExitEndpoint, fmt.Errorf("cannot reach the model endpoint %s: %v", base, runErr))
	default:
		return withCode(ExitError, runErr)
	}
}

// runOutput writes a headless run's output in the chosen format.
type runOutput struct {
	format  string
	stdout  io.Writer
	stderr  io.Writer
	verbose bool
	mu      sync.Mutex
	enc     *json.Encoder
}

func newRunOutput(format string, stdout, stderr io.Writer, verbose bool) *runOutput {
	return &runOutput{format: format, stdout: stdout, stderr: stderr, verbose: verbose, enc: json.NewEncoder(stdout)}
}

// streamEvent is one line of --output-format stream-json.
type streamEvent struct {
	Type       string          `json:"type"`
	Agent      string          `json:"agent"`
	Team       string          `json:"team"`
	Text       string          `json:"text,omitempty"`
	Tool       string          `json:"tool,omitempty"`
	ID         string          `json:"id,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Content    string          `json:"content,omitempty"`
	IsError    bool            `json:"is_error,omitempty"`
	DurationMS int64           `json:"duration_ms,omitempty"`
	Usage      *llm.Usage      `json:"usage,omitempty"`
	Message    *llm.Message    `json:"message,omitempty"`
	Error      string          `json:"error,omitempty"`
}

func (o *runOutput) observe(ev agent.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch o.format {
	case "stream-json":
		se := streamEvent{Type: string(ev.Type), Agent: ev.Agent, Team: ev.Team, Text: ev.Text, Usage: ev.Usage, Message: ev.Message}
		if ev.Err != nil {
			se.Error = ev.Err.Error()
		}
		if ev.Call != nil {
			se.Tool, se.ID = ev.Call.Name, ev.Call.ID
			if ev.Type == agent.EventToolCall {
				se.Input = ev.Call.Input
			}
		}
		if ev.Result != nil {
			se.Content, se.IsError = ev.Result.Content, ev.Result.IsError
			se.DurationMS = ev.Duration.Milliseconds()
		}
		if ev.Type == agent.EventText || ev.Type == agent.EventThinking {
			// Deltas are noise for machines that get the whole message
			// in the "message" event.
			return
		}
		_ = o.enc.Encode(se)
	default:
		switch ev.Type {
		case agent.EventRetry:
			fmt.Fprintf(o.stderr, "troupe: model call failed (%v); retrying in %s\n", ev.Err, ev.Delay.Round(time.Millisecond))
		case agent.EventToolCall:
			if o.verbose {
				fmt.Fprintf(o.stderr, "→ %s %s\n", ev.Call.Name, oneLine(string(ev.Call.Input), 120))
			}
		case agent.EventToolResult:
			if o.verbose {
				mark := "✓"
				if ev.Result.IsError {
					mark = "✗"
				}
				fmt.Fprintf(o.stderr, "%s %s %s\n", mark, ev.Call.Name, oneLine(ev.Result.Content, 120))
			}
		}
	}
}

// runSummary is the --output-format json result, and the last line of
// stream-json.
type runSummary struct {
	Type       string     `json:"type"`
	Agent      string     `json:"agent"`
	Team       string     `json:"team"`
	Result     string     `json:"result"`
	IsError    bool       `json:"is_error"`
	Error      string     `json:"error,omitempty"`
	Turns      int        `json:"turns"`
	DurationMS int64      `json:"duration_ms"`
	Usage      llm.Usage  `json:"usage"`
	Stats      team.Stats `json:"stats"`
	Summary    string     `json:"summary,omitempty"`
}

func (o *runOutput) finish(res *team.Result, tl *tally, err error, d time.Duration) {
	if res == nil {
		res = &team.Result{}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch o.format {
	case "json", "stream-json":
		s := runSummary{Type: "result", Agent: store.LeadName, Team: res.Team, Result: res.Text,
			Turns: res.Stats.LeadModelTurns, DurationMS: d.Milliseconds(), Usage: res.Usage, Stats: res.Stats, Summary: tl.summary()}
		if err != nil {
			s.IsError, s.Error = true, err.Error()
		}
		_ = o.enc.Encode(s)
	default:
		if res.Text != "" {
			fmt.Fprintln(o.stdout, strings.TrimRight(res.Text, "\n"))
		}
		if sum := tl.summary(); sum != "" {
			fmt.Fprintf(o.stdout, "\n%s; lead model turns %d (%d from idle notifications alone)\n", sum, res.Stats.LeadModelTurns, res.Stats.LeadTurnsFromIdleOnly)
		}
	}
}

// teamEvent writes a team journal event (stream-json only, or a line with
// -v).
func (o *runOutput) teamEvent(e store.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch o.format {
	case "stream-json":
		if e.Type == "usage" {
			return // the agent's own usage event already said it
		}
		line := map[string]any{"type": e.Type, "agent": e.Agent, "team": e.Team, "ts": e.TS}
		for k, v := range e.Fields {
			if _, taken := line[k]; !taken {
				line[k] = v
			}
		}
		_ = o.enc.Encode(line)
	case "text":
		if o.verbose {
			fmt.Fprintf(o.stderr, "· %s %s %s\n", e.Agent, e.Type, oneLine(fmt.Sprint(e.Fields), 140))
		}
	}
}

// oneLine folds s onto one line, cut to n characters.
var oneLine = text.OneLine
