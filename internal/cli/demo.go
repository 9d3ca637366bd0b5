package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	fakeapiexamples "github.com/troupe-dev/troupe/examples/fakeapi"
	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/llm/anthropic"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
)

// demoReport is the --json output of `troupe demo`.
type demoReport struct {
	Workspace   string `json:"workspace"`
	ModelTurns  int    `json:"model_turns"`
	ToolCalls   int    `json:"tool_calls"`
	ToolErrors  int    `json:"tool_errors"`
	FileContent string `json:"file_content"`
	OK          bool   `json:"ok"`
	DurationMS  int64  `json:"duration_ms"`
}

func (a *app) demoCmd() *cobra.Command {
	var (
		asJSON   bool
		headless bool
		latency  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Play troupe offline on the bundled scripted model (no API key needed)",
		Long: `Runs an agent against the bundled scripted model (the fake Anthropic API,
in process, over loopback HTTP) in a temporary workspace unless --workspace is
given. The agent writes hello.txt, edits it and shows it with bash, exactly as
it would against the real API.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runDemo(asJSON, latency)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON report at the end")
	cmd.Flags().BoolVar(&headless, "headless", false, "plain text output (the default until the terminal UI exists)")
	cmd.Flags().DurationVar(&latency, "model-latency", 0, "delay every model reply by this much")
	return cmd
}

func (a *app) runDemo(asJSON bool, latency time.Duration) error {
	dir := a.workspace
	if dir == "" {
		tmp, err := os.MkdirTemp("", "troupe-demo-")
		if err != nil {
			return withCode(ExitError, err)
		}
		dir = tmp
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return withCode(ExitError, err)
	}
	dir, _ = filepath.Abs(dir)
	script, err := fakeapi.ParseScript(fakeapiexamples.SingleAgent)
	if err != nil {
		return withCode(ExitError, fmt.Errorf("bundled script: %w", err))
	}
	fake := fakeapi.New(script, fakeapi.Options{Latency: latency})
	base, err := fake.Start("127.0.0.1:0")
	if err != nil {
		return withCode(ExitError, err)
	}
	defer fake.Close()
	provider, err := anthropic.New(anthropic.Config{APIKey: "demo", BaseURL: base})
	if err != nil {
		return withCode(ExitError, err)
	}

	rep := demoReport{Workspace: dir}
	say := func(format string, args ...any) {
		if !asJSON {
			fmt.Fprintf(a.stdout, format+"\n", args...)
		}
	}
	say("troupe demo: one agent on the bundled scripted model, workspace %s", dir)
	start := time.Now()
	observe := func(ev agent.Event) {
		stamp := fmt.Sprintf("%6.2fs", time.Since(start).Seconds())
		switch ev.Type {
		case agent.EventMessage:
			if t := strings.TrimSpace(ev.Message.Text()); t != "" {
				say("%s %s: %s", stamp, ev.Agent, t)
			}
		case agent.EventToolCall:
			rep.ToolCalls++
			say("%s %s → %s %s", stamp, ev.Agent, ev.Call.Name, oneLine(string(ev.Call.Input), 90))
		case agent.EventToolResult:
			mark := "ok"
			if ev.Result.IsError {
				mark = "error"
				rep.ToolErrors++
			}
			say("%s %s ← %s %s: %s", stamp, ev.Agent, ev.Call.Name, mark, oneLine(ev.Result.Content, 90))
		case agent.EventRetry:
			say("%s %s model call failed (%v), retrying", stamp, ev.Agent, ev.Err)
		}
	}
	res, runErr := runLone(a.ctx, loneRun{provider: provider, dir: dir, prompt: "Create hello.txt saying hello, edit it, and show it.", observe: observe})
	rep.DurationMS = time.Since(start).Milliseconds()
	if res != nil {
		rep.ModelTurns = res.Turns
	}
	data, _ := os.ReadFile(filepath.Join(dir, "hello.txt"))
	rep.FileContent = string(data)
	rep.OK = runErr == nil && strings.TrimSpace(rep.FileContent) == "hello from troupe, edited" && fake.Unmatched() == 0
	if asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		say("hello.txt: %q", strings.TrimSpace(rep.FileContent))
		say("%d model turns, %d tool calls, %.2fs", rep.ModelTurns, rep.ToolCalls, float64(rep.DurationMS)/1000)
	}
	if runErr != nil {
		return withCode(ExitError, runErr)
	}
	if !rep.OK {
		return withCode(ExitError, fmt.Errorf("the demo did not end as scripted (hello.txt: %q)", rep.FileContent))
	}
	return nil
}
