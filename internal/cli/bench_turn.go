package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/agent"
	assembly "github.com/troupe-dev/troupe/internal/app"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
	"github.com/troupe-dev/troupe/internal/shell"
	"github.com/troupe-dev/troupe/internal/tool"
)

// benchTurnScript makes every call of the bench agent a bash echo.
const benchTurnScript = `
rules:
  - times: 0
    reply:
      - text: "Turn ${call}."
      - tool_use: {name: bash, input: {command: "echo turn ${call}"}}
`

// turnReport is the output of `troupe bench turn --json`.
type turnReport struct {
	Turns             int     `json:"turns"`
	MSPerTurnP50      float64 `json:"ms_per_turn_p50"`
	MSPerTurnP99      float64 `json:"ms_per_turn_p99"`
	ModelMSP50        float64 `json:"model_ms_p50"`
	ToolMSP50         float64 `json:"tool_ms_p50"`
	HarnessMSP50      float64 `json:"harness_ms_p50"`
	HarnessMSP99      float64 `json:"harness_ms_p99"`
	PrefixStableRatio float64 `json:"prefix_stable_ratio,omitempty"`
	// Shell is how the turns ran bash: "spawn" (a bash per command, the
	// default) or "session" (one long-lived bash for the agent).
	Shell string `json:"shell"`
	// EncodeMSP50 is the time to build one request body.
	EncodeMSP50 float64 `json:"encode_ms_p50"`
	// FloorMS is the least a turn can cost on this machine and endpoint:
	// a bare bash -c spawn plus one HTTP round trip to the endpoint,
	// measured in the same run (p50). AboveFloorMS is the turn's p50 less
	// it.
	FloorMS      float64 `json:"floor_ms,omitempty"`
	AboveFloorMS float64 `json:"above_floor_ms,omitempty"`
	// ToolMSSpawnP50 and ToolMSSessionP50 are one bash echo through the
	// bash tool in each shell mode, interleaved.
	ToolMSSpawnP50   float64 `json:"tool_ms_spawn_p50"`
	ToolMSSessionP50 float64 `json:"tool_ms_session_p50"`
	// With --sandbox: the turns' bash calls run in the bubblewrap sandbox,
	// and the cost of one bash call is measured with and without it.
	Sandbox              bool    `json:"sandbox,omitempty"`
	BashMSP50            float64 `json:"bash_ms_p50,omitempty"`
	SandboxedBashMSP50   float64 `json:"sandboxed_bash_ms_p50,omitempty"`
	SandboxCostMSPerCall float64 `json:"sandbox_cost_ms_per_call,omitempty"`
	Endpoint             string  `json:"endpoint"`
	Tool                 string  `json:"tool"`
	GoVersion            string  `json:"go_version"`
	CPUs                 int     `json:"cpus"`
}

func (a *app) benchTurnCmd() *cobra.Command {
	var (
		turns      int
		baseURL    string
		asJSON     bool
		sandbox    bool
		floor      bool
		shellM     string
		cpuProfile string
	)
	cmd := &cobra.Command{
		Use:   "turn",
		Short: "Measure the harness overhead per model turn (one agent, tool-calling turns)",
		Long: `Runs one agent for --turns tool-calling turns and reports the time per turn.
By default the model is the in-process fake API with no latency, scripted to call
bash with echo on every turn. With --base-url the same loop runs against any
Anthropic-compatible server whose replies are bash echo tool calls.

harness_ms is a turn's time less the model call and the tool run: what troupe
itself costs per turn. With --sandbox the bash calls run in the bubblewrap
sandbox, and the cost of the sandbox per bash call is measured apart (the same
echo with and without it).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if shellM != "spawn" && shellM != "session" {
				return withCode(ExitUsage, fmt.Errorf("--shell must be spawn or session, got %q", shellM))
			}
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return withCode(ExitError, err)
				}
				defer stop()
			}
			rep, err := a.benchTurn(cmd.Context(), turnOpts{turns: turns, baseURL: baseURL, sandbox: sandbox, floor: floor || baseURL == "", session: shellM == "session"})
			if err != nil {
				return withCode(ExitError, err)
			}
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			fmt.Fprintf(a.stdout, "%d turns against %s (%s)\n", rep.Turns, rep.Endpoint, rep.Tool)
			fmt.Fprintf(a.stdout, "per turn: p50 %.3f ms, p99 %.3f ms\n", rep.MSPerTurnP50, rep.MSPerTurnP99)
			fmt.Fprintf(a.stdout, "of which model p50 %.3f ms, tool p50 %.3f ms, harness p50 %.3f ms (p99 %.3f ms)\n",
				rep.ModelMSP50, rep.ToolMSP50, rep.HarnessMSP50, rep.HarnessMSP99)
			fmt.Fprintf(a.stdout, "request encoding p50 %.3f ms; bash tool p50 %.3f ms spawning, %.3f ms in a session (turns ran with --shell %s)\n",
				rep.EncodeMSP50, rep.ToolMSSpawnP50, rep.ToolMSSessionP50, rep.Shell)
			if rep.FloorMS > 0 {
				fmt.Fprintf(a.stdout, "floor (bash -c spawn + one HTTP round trip) p50 %.3f ms: the turn is %.3f ms above it\n", rep.FloorMS, rep.AboveFloorMS)
			}
			if rep.Sandbox {
				fmt.Fprintf(a.stdout, "bash call p50: %.3f ms plain, %.3f ms sandboxed: the sandbox costs %.3f ms per call\n",
					rep.BashMSP50, rep.SandboxedBashMSP50, rep.SandboxCostMSPerCall)
			}
			if rep.PrefixStableRatio > 0 {
				fmt.Fprintf(a.stdout, "prefix stable ratio: %.3f\n", rep.PrefixStableRatio)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&turns, "turns", 200, "tool-calling turns to run")
	cmd.Flags().StringVar(&baseURL, "base-url", "", "run against this Anthropic-compatible server instead of the in-process fake")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&sandbox, "sandbox", false, "run the bash calls in the bubblewrap sandbox and report its cost per call")
	cmd.Flags().BoolVar(&floor, "compare-floor", false, "with --base-url: also measure the floor (a bare bash -c spawn plus one HTTP round trip; always measured against the in-process fake)")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof reads it)")
	cmd.Flags().StringVar(&shellM, "shell", "spawn", "how the turns run bash: spawn (a bash per command) or session (one long-lived bash)")
	return cmd
}

// turnOpts are the flags of bench turn.
type turnOpts struct {
	turns          int
	baseURL        string
	sandbox, floor bool
	session        bool // run the turns' bash in a shell session
}

func (a *app) benchTurn(ctx context.Context, o turnOpts) (*turnReport, error) {
	turns, baseURL, sandbox := o.turns, o.baseURL, o.sandbox
	if turns < 2 {
		return nil, errors.New("--turns must be at least 2")
	}
	rep := &turnReport{Tool: "bash echo", GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), Shell: "spawn"}
	if o.session {
		rep.Shell = "session"
	}
	var fake *fakeapi.Server
	key := os.Getenv("ANTHROPIC_API_KEY")
	if baseURL == "" {
		script, err := fakeapi.ParseScript([]byte(benchTurnScript))
		if err != nil {
			return nil, err
		}
		fake = fakeapi.New(script, fakeapi.Options{})
		if baseURL, err = fake.Start("127.0.0.1:0"); err != nil {
			return nil, err
		}
		defer fake.Close()
		key = "bench"
		rep.Endpoint = "in-process fake API"
	} else {
		rep.Endpoint = baseURL
		if key == "" {
			key = "bench"
		}
	}
	var (
		encMu sync.Mutex
		encMS []float64
	)
	provider, err := assembly.AnthropicObserved(baseURL, key, -1, func(d time.Duration, _ int) {
		encMu.Lock()
		encMS = append(encMS, float64(d.Nanoseconds())/1e6)
		encMu.Unlock()
	})
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "troupe-bench-turn-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ws, err := tool.OpenWorkspace(dir)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	env := &tool.Env{Workspace: ws}
	if err := benchToolModes(ctx, rep, ws, min(turns, 50)); err != nil {
		return nil, err
	}
	if o.floor {
		if rep.FloorMS, err = benchFloor(ctx, baseURL, key, ws.Dir(), min(turns, 50)); err != nil {
			return nil, err
		}
	}
	if o.session && !sandbox {
		env.Shell = shell.NewSession(ws.Dir(), nil)
		defer env.Shell.Close()
	}
	if sandbox {
		home, _ := os.UserHomeDir()
		env.Sandbox = &shell.Sandbox{Protected: shell.ProtectedPaths(ws.Dir()), Hidden: shell.HiddenPaths(home)}
		if err := shell.CheckSandbox(ctx, env.Sandbox); err != nil {
			return nil, err
		}
		rep.Sandbox = true
		if err := benchSandboxCost(ctx, rep, env.Sandbox, ws.Dir(), min(turns, 50)); err != nil {
			return nil, err
		}
	}

	// Timing: a turn runs from the end of the previous round to the end of
	// its own; the model's share ends at its usage event, the tool's share
	// is the tool run's own duration.
	var (
		mu                         sync.Mutex
		roundStart, modelEnd       time.Time
		toolDur                    time.Duration
		turnMS, modelMS, toolMS, h []float64
	)
	roundStart = time.Now()
	boundary := func(context.Context, []string) []llm.Block {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		turn := now.Sub(roundStart)
		model := modelEnd.Sub(roundStart)
		turnMS = append(turnMS, ms(turn))
		modelMS = append(modelMS, ms(model))
		toolMS = append(toolMS, ms(toolDur))
		h = append(h, ms(turn-model-toolDur))
		roundStart, toolDur = now, 0
		return nil
	}
	observe := func(ev agent.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch ev.Type {
		case agent.EventUsage:
			modelEnd = time.Now()
		case agent.EventToolResult:
			toolDur += ev.Duration
		}
	}
	ag, err := agent.New(agent.Config{
		Name:       "team-lead",
		Provider:   provider,
		System:     agent.Prompt{Identity: agent.Identity{Name: "team-lead"}, Workspace: ws.Dir()}.String(),
		Tools:      tool.NewRegistry(tool.Builtins()...),
		Env:        env,
		MaxTurns:   turns,
		Observe:    observe,
		Boundaries: []agent.Boundary{boundary},
	})
	if err != nil {
		return nil, err
	}
	_, err = ag.Run(ctx, llm.TextBlock("Run the benchmark: call bash with echo on every turn."))
	if err != nil && !errors.Is(err, agent.ErrMaxTurns) {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	if len(turnMS) == 0 {
		return nil, errors.New("the model made no tool calls; its replies must be bash tool calls")
	}
	rep.Turns = len(turnMS)
	rep.MSPerTurnP50, rep.MSPerTurnP99 = percentile(turnMS, 50), percentile(turnMS, 99)
	rep.ModelMSP50, rep.ToolMSP50 = percentile(modelMS, 50), percentile(toolMS, 50)
	rep.HarnessMSP50, rep.HarnessMSP99 = percentile(h, 50), percentile(h, 99)
	encMu.Lock()
	rep.EncodeMSP50 = percentile(encMS, 50)
	encMu.Unlock()
	if rep.FloorMS > 0 {
		rep.AboveFloorMS = float64(int((rep.MSPerTurnP50-rep.FloorMS)*1000+0.5)) / 1000
	}
	if fake != nil {
		// Over the first 50 turns, as issue 5 defines it.
		var bodies [][]byte
		for _, r := range fake.Requests() {
			if len(bodies) == 50 {
				break
			}
			bodies = append(bodies, r.Body)
		}
		rep.PrefixStableRatio = prefixStableRatio(bodies)
	}
	return rep, nil
}

// benchToolModes times n bash echo calls through the bash tool spawning a
// bash each and n in a shell session, interleaved, and records the p50s.
func benchToolModes(ctx context.Context, rep *turnReport, ws *tool.Workspace, n int) error {
	spawn := &tool.Env{Workspace: ws}
	sess := &tool.Env{Workspace: ws, Shell: shell.NewSession(ws.Dir(), nil)}
	defer sess.Shell.Close()
	bash, ok := tool.NewRegistry(tool.Builtins()...).Get("bash")
	if !ok {
		return errors.New("no bash tool")
	}
	var a, b []float64
	for range n {
		for _, env := range []*tool.Env{spawn, sess} {
			start := time.Now()
			r := bash.Run(ctx, env, []byte(`{"command":"echo bench"}`))
			if r.IsError {
				return fmt.Errorf("bench bash call failed: %s", r.Content)
			}
			if env == spawn {
				a = append(a, ms(time.Since(start)))
			} else {
				b = append(b, ms(time.Since(start)))
			}
		}
	}
	rep.ToolMSSpawnP50, rep.ToolMSSessionP50 = percentile(a, 50), percentile(b, 50)
	return nil
}

// benchFloor is the p50 over n rounds of the least a turn can cost: a bare
// bash -c spawn running the echo, plus one streamed HTTP round trip to the
// endpoint with a one-message request, read to its end.
func benchFloor(ctx context.Context, baseURL, key, dir string, n int) (float64, error) {
	body := []byte(`{"max_tokens":64,"messages":[{"content":"floor","role":"user"}],"model":"claude-sonnet-4-5","stream":true}`)
	client := &http.Client{}
	defer client.CloseIdleConnections()
	url := strings.TrimSuffix(baseURL, "/") + "/v1/messages"
	var xs []float64
	for range n {
		start := time.Now()
		cmd := exec.CommandContext(ctx, "bash", "-c", "echo floor")
		cmd.Dir = dir
		if err := cmd.Run(); err != nil {
			return 0, fmt.Errorf("floor: bash: %w", err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("content-type", "application/json")
		req.Header.Set("x-api-key", key)
		req.Header.Set("anthropic-version", "2023-06-01")
		resp, err := client.Do(req)
		if err != nil {
			return 0, fmt.Errorf("floor: %w", err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, fmt.Errorf("floor: %w", err)
		}
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("floor: %s answered %s", url, resp.Status)
		}
		xs = append(xs, ms(time.Since(start)))
	}
	return percentile(xs, 50), nil
}

// benchSandboxCost times n echo commands run plainly and n run in sb,
// interleaved so that both see the same machine, and records the p50s and
// their difference: what the sandbox adds to one bash call.
func benchSandboxCost(ctx context.Context, rep *turnReport, sb *shell.Sandbox, dir string, n int) error {
	var plain, boxed []float64
	for range n {
		for _, s := range []*shell.Sandbox{nil, sb} {
			start := time.Now()
			r, err := shell.Run(ctx, shell.Options{Dir: dir, Command: "echo bench", Sandbox: s})
			if err != nil {
				return err
			}
			if r.ExitCode != 0 {
				return fmt.Errorf("bench bash call failed (exit %d): %s", r.ExitCode, r.Output)
			}
			if s == nil {
				plain = append(plain, ms(time.Since(start)))
			} else {
				boxed = append(boxed, ms(time.Since(start)))
			}
		}
	}
	rep.BashMSP50, rep.SandboxedBashMSP50 = percentile(plain, 50), percentile(boxed, 50)
	rep.SandboxCostMSPerCall = rep.SandboxedBashMSP50 - rep.BashMSP50
	return nil
}

// prefixStableRatio is, over consecutive requests, the share of each
// request's bytes that equal the previous request's bytes from the start:
// what a provider's prefix cache can reuse. Requests are compared in the
// order the cache reads them (tools, system, messages) with the
// cache_control markers left out, since they mark the prefix rather than
// being part of it.
func prefixStableRatio(bodies [][]byte) float64 {
	var same, total int
	for i := 1; i < len(bodies); i++ {
		prev, cur := cacheOrder(bodies[i-1]), cacheOrder(bodies[i])
		n := 0
		for n < len(prev) && n < len(cur) && prev[n] == cur[n] {
			n++
		}
		same += n
		total += len(cur)
	}
	if total == 0 {
		return 0
	}
	return float64(same) / float64(total)
}

// cacheOrder re-serialises a Messages API request body as tools, system and
// messages, without cache_control.
func cacheOrder(body []byte) []byte {
	var req map[string]any
	if json.Unmarshal(body, &req) != nil {
		return body
	}
	var out []byte
	for _, k := range []string{"tools", "system", "messages"} {
		b, _ := json.Marshal(stripCacheControl(req[k]))
		out = append(out, b...)
	}
	return out
}

func stripCacheControl(v any) any {
	switch t := v.(type) {
	case map[string]any:
		delete(t, "cache_control")
		for k, x := range t {
			t[k] = stripCacheControl(x)
		}
	case []any:
		for i, x := range t {
			t[i] = stripCacheControl(x)
		}
	}
	return v
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// percentile returns the p-th percentile (nearest rank) of xs.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	i = max(0, min(i, len(s)-1))
	return float64(int(s[i]*1000+0.5)) / 1000
}
