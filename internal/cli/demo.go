package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	fakeapiexamples "github.com/troupe-dev/troupe/examples/fakeapi"
	"github.com/troupe-dev/troupe/internal/agent"
	assembly "github.com/troupe-dev/troupe/internal/app"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// demoGoal is what the demo's lead is asked.
const demoGoal = "Migrate the REST API of this blog to GraphQL. Use a team: analyse the endpoints, design the schema, implement the resolvers, update the frontend."

// demoFiles are the files the demo's team writes.
var demoFiles = []string{"docs/rest-endpoints.md", "schema.graphql", "src/resolvers.js", "web/src/api.js"}

// demoReport is the --json output of `troupe demo`.
type demoReport struct {
	Workspace             string         `json:"workspace"`
	Team                  string         `json:"team"`
	TasksTotal            int            `json:"tasks_total"`
	TasksCompleted        int            `json:"tasks_completed"`
	Teammates             int            `json:"teammates"`
	Messages              int            `json:"messages"`
	LeadModelTurns        int            `json:"lead_model_turns"`
	LeadTurnsFromIdleOnly int            `json:"lead_turns_from_idle_only"`
	ModelCalls            int            `json:"model_calls"`
	FilesWritten          []string       `json:"files_written"`
	PlanApprovals         map[string]int `json:"plan_approvals"`
	TeammateMode          string         `json:"teammate_mode"`
	Isolation             string         `json:"isolation,omitempty"`
	DurationMS            int64          `json:"duration_ms"`
	OK                    bool           `json:"ok"`
}

func (a *app) demoCmd() *cobra.Command {
	var (
		asJSON   bool
		headless bool
		latency  time.Duration
		mode     string
		iso      string
		cache    cacheFlags
		pat      string
		theme    string
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Play a whole team's work offline on the bundled scripted model (no API key needed)",
		Long: `Plays seed 000's story on the bundled scripted model (the fake Anthropic API, in
process, over loopback HTTP): the lead creates a team and four chained tasks
(analyse the REST endpoints -> design the GraphQL schema -> implement the
resolvers -> update the frontend), spawns an analyst, a backend developer in
plan mode and a frontend developer, who claim their tasks by themselves, write
real files, message each other and broadcast; the backend's first plan is
rejected with feedback and the revised one approved; then everyone is shut down
and the team deleted. Runs in a temporary workspace unless --workspace is given.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.demoWeb.checkBeside(); err != nil {
				return err
			}
			if pat != "" || theme != "" {
				if iso != "" {
					return withCode(ExitUsage, fmt.Errorf("demo: --isolation plays the REST-to-GraphQL story; it cannot be combined with --pattern or --theme"))
				}
				st, err := personaStory(pat, theme)
				if err != nil {
					return withCode(ExitUsage, err)
				}
				a.demoCache = cache
				return a.playDemo(st, asJSON, latency, mode)
			}
			if !asJSON && !headless && iso == "" {
				if ok, err := a.demoTUI(latency, mode); ok || err != nil {
					return err
				}
			}
			a.demoCache = cache
			a.demoIsolation = iso
			return a.runDemo(asJSON, latency, mode)
		},
	}
	cache.register(cmd, false)
	cmd.Flags().BoolVar(&asJSON, "json", false, "end with one JSON object of figures")
	cmd.Flags().BoolVar(&headless, "headless", false, "print a plain text timeline instead of playing the demo in the terminal UI")
	cmd.Flags().DurationVar(&latency, "model-latency", 0, "delay every model reply by this much")
	cmd.Flags().StringVar(&mode, "teammate-mode", team.ModeInProcess, "in-process or process")
	a.demoWeb.add(cmd.Flags(), true)
	cmd.Flags().StringVar(&iso, "isolation", "", "worktree: play the story in a git repository with every teammate in its own worktree, a merge queue, and a conflict that goes back to its owner")
	cmd.Flags().StringVar(&pat, "pattern", "", "play seed 004's persona story under this team pattern (fixed-theme), headless")
	cmd.Flags().StringVar(&theme, "theme", "", "the persona theme of that story (example)")
	return cmd
}

// demoStory is one scripted story the demo plays.
type demoStory struct {
	script []byte
	goal   string
	files  []string // the files the team must leave
	tasks  int      // the tasks it must complete
	// prepare readies the workspace before the session (nil: nothing).
	prepare func(dir string) error
}

// restStory is seed 000's REST-to-GraphQL story, the demo's own.
var restStory = demoStory{script: fakeapiexamples.RESTToGraphQL, goal: demoGoal, files: demoFiles, tasks: 4}

func (a *app) runDemo(asJSON bool, latency time.Duration, mode string) error {
	return a.playDemo(restStory, asJSON, latency, mode)
}

func (a *app) playDemo(st demoStory, asJSON bool, latency time.Duration, mode string) (err error) {
	if err := a.canRecord(mode); err != nil {
		return err
	}
	dir := a.workspace
	if dir == "" {
		tmp, terr := os.MkdirTemp("", "troupe-demo-")
		if terr != nil {
			return withCode(ExitError, terr)
		}
		dir = tmp
		// A temporary workspace goes away with a demo that succeeded;
		// one that failed or was interrupted stays, so the failure can be
		// read and the team resumed.
		defer func() {
			if err == nil {
				os.RemoveAll(tmp)
				return
			}
			fmt.Fprintf(a.stderr, "troupe demo: the workspace is kept in %s\n", tmp)
		}()
	}
	if err = os.MkdirAll(dir, 0o755); err != nil {
		return withCode(ExitError, err)
	}
	dir, _ = filepath.Abs(dir)
	if st.prepare != nil {
		if err := st.prepare(dir); err != nil {
			return withCode(ExitError, err)
		}
	}
	iso, err := team.ParseIsolation(a.demoIsolation)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	scriptText := st.script
	if iso == team.IsolationWorktree {
		if err := demoRepo(a.ctx, dir); err != nil {
			return withCode(ExitError, err)
		}
		if scriptText, err = withOverlay(scriptText, fakeapiexamples.RESTToGraphQLWorktree); err != nil {
			return withCode(ExitError, fmt.Errorf("bundled script: %w", err))
		}
	}
	script, err := fakeapi.ParseScript(scriptText)
	if err != nil {
		return withCode(ExitError, fmt.Errorf("bundled script: %w", err))
	}
	fake := fakeapi.New(script, a.demoCache.options(fakeapi.Options{Latency: latency}))
	base, err := fake.Start("127.0.0.1:0")
	if err != nil {
		return withCode(ExitError, err)
	}
	defer fake.Close()
	var provider llm.Provider = a.providerOverride
	if provider == nil {
		if provider, err = assembly.AnthropicAt(base, "demo", 0); err != nil {
			return withCode(ExitError, err)
		}
	}
	provider, finishRecord, err := a.recording(provider, a.record, dir)
	if err != nil {
		return err
	}
	e, err := a.openEnv(dir, a.stderr)
	if err != nil {
		return withCode(ExitError, err)
	}
	defer e.Close()
	if err := writeDemoMarker(e.StateDir, latency, iso); err != nil {
		return withCode(ExitError, err)
	}

	out := io.Discard
	if !asJSON {
		out = a.stdout
	}
	tl := &timeline{w: out, start: time.Now()}
	tally := newTally()
	flags := teamFlags{teammateMode: mode, permissionMode: team.PermBypass, isolation: iso}
	cfg, err := a.sessionConfig(e, provider, "", 0, &flags, providerFlags{provider: "anthropic", baseURL: base})
	if err != nil {
		return withCode(ExitError, err)
	}
	if cfg.Pacer, err = a.teamPacer(mode); err != nil {
		return err
	}
	cfg.Observe = tl.agentEvent
	cfg.OnEvent = func(ev store.Event) {
		tally.observe(ev)
		tl.teamEvent(ev)
	}
	cfg.AgentEnv = []string{"ANTHROPIC_API_KEY=demo", "ANTHROPIC_BASE_URL=" + base}
	sess, err := team.NewSession(cfg)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	stopWeb, err := a.webBeside(a.demoWeb, e.Store, sess, nil, dir)
	if err != nil {
		sess.Close()
		return err
	}
	defer stopWeb()
	fmt.Fprintf(out, "troupe demo: a team on the bundled scripted model, in %s\n\n", dir)
	res, runErr := sess.RunHeadless(a.ctx, st.goal)
	closeErr := sess.Close()
	if err := finishRecord(); err != nil && closeErr == nil {
		closeErr = err
	}

	rep := demoReport{Workspace: dir, TeammateMode: mode, Isolation: iso, DurationMS: time.Since(tl.start).Milliseconds(), PlanApprovals: tl.plans()}
	if res != nil {
		rep.LeadModelTurns, rep.LeadTurnsFromIdleOnly = res.Stats.LeadModelTurns, res.Stats.LeadTurnsFromIdleOnly
	}
	tally.mu.Lock()
	rep.Team = strings.Join(tally.teams, ",")
	rep.TasksTotal, rep.TasksCompleted, rep.Teammates, rep.Messages = len(tally.tasks), len(tally.completed), len(tally.teammates), tally.messages
	tally.mu.Unlock()
	rep.ModelCalls = len(fake.Requests())
	unmatched := fake.Unmatched()
	if a.providerOverride != nil {
		rep.ModelCalls, unmatched = tl.modelCalls(), 0 // replayed: the fake was not called
	}
	for _, f := range st.files {
		if fi, err := os.Stat(filepath.Join(dir, f)); err == nil && fi.Size() > 0 {
			rep.FilesWritten = append(rep.FilesWritten, f)
		}
	}
	rep.OK = runErr == nil && closeErr == nil && unmatched == 0 && rep.TasksTotal == st.tasks && rep.TasksCompleted == st.tasks &&
		len(rep.FilesWritten) == len(st.files)
	if asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		if res != nil && res.Text != "" {
			fmt.Fprintf(out, "\n%s\n", res.Text)
		}
		fmt.Fprintf(out, "\n%d/%d tasks completed by %d teammates, %d messages, %d model calls (lead %d, of which %d woken by idle notices alone), %.1fs\n",
			rep.TasksCompleted, rep.TasksTotal, rep.Teammates, rep.Messages, rep.ModelCalls, rep.LeadModelTurns, rep.LeadTurnsFromIdleOnly,
			float64(rep.DurationMS)/1000)
		fmt.Fprintf(out, "files: %s (in %s)\n", strings.Join(rep.FilesWritten, ", "), dir)
	}
	switch {
	case runErr != nil && errors.Is(runErr, context.Canceled):
		if rep.Team == "" {
			return withCode(ExitInterrupted, errors.New("interrupted"))
		}
		hint := "troupe resume " + rep.Team
		if a.workspace == "" {
			hint = fmt.Sprintf("troupe resume %s --workspace %s", rep.Team, dir)
		}
		return withCode(ExitInterrupted, fmt.Errorf("interrupted; continue with: %s", hint))
	case runErr != nil:
		return withCode(ExitError, runErr)
	case closeErr != nil:
		return withCode(ExitError, closeErr)
	case unmatched > 0:
		for _, r := range fake.Requests() {
			if r.Rule < 0 && r.Status == 200 {
				e.Logger.Warn("demo call off script", "call", r.N, "agent", r.Agent, "last_turn", lastTurnText(r.Body))
			}
		}
		return withCode(ExitError, fmt.Errorf("the demo went off script: %d model calls matched no rule (see %s)", unmatched, filepath.Join(e.StateDir, "troupe.log")))
	case !rep.OK:
		return withCode(ExitError, fmt.Errorf("the demo did not finish: %d/%d tasks completed, files %v", rep.TasksCompleted, rep.TasksTotal, rep.FilesWritten))
	}
	return nil
}

// timeline prints a team's work as it happens, one line per thing a person
// would want to see.
type timeline struct {
	w     io.Writer
	start time.Time
	mu    sync.Mutex
	plan  map[string]int
	calls int
	// mates are the teammates: what they do with tools is told by the
	// journal (tool events), wherever they run, not by their agent events.
	mates map[string]bool
}

func (t *timeline) modelCalls() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.calls
}

func (t *timeline) line(who, format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.w, "%6.2fs  %-10s %s\n", time.Since(t.start).Seconds(), who, fmt.Sprintf(format, args...))
}

func (t *timeline) plans() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]int{}
	for k, v := range t.plan {
		out[k] = v
	}
	return out
}

func (t *timeline) agentEvent(ev agent.Event) {
	switch ev.Type {
	case agent.EventUsage:
		t.mu.Lock()
		t.calls++
		t.mu.Unlock()
	case agent.EventToolCall:
		if t.mate(ev.Agent) {
			return
		}
		var in struct {
			Path    string `json:"path"`
			Command string `json:"command"`
		}
		_ = json.Unmarshal(ev.Call.Input, &in)
		t.tool(ev.Agent, teamevent.Tool{Tool: ev.Call.Name, Path: in.Path, Command: in.Command})
	case agent.EventToolResult:
		if ev.Result.IsError && !t.mate(ev.Agent) {
			t.tool(ev.Agent, teamevent.Tool{Tool: ev.Call.Name, Error: ev.Result.Content})
		}
	case agent.EventRetry:
		t.line(ev.Agent, "model call failed (%v), retrying", ev.Err)
	}
}

func (t *timeline) mate(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mates[name]
}

// tool is a line for a tool that changed the workspace or failed.
func (t *timeline) tool(who string, e teamevent.Tool) {
	switch {
	case e.Error != "":
		t.line(who, "%s failed: %s", e.Tool, oneLine(e.Error, 80))
	case e.Tool == "write_file":
		t.line(who, "writes %s", e.Path)
	case e.Tool == "edit_file":
		t.line(who, "edits %s", e.Path)
	case e.Tool == "bash":
		t.line(who, "runs %s", oneLine(e.Command, 60))
	}
}

func (t *timeline) teamEvent(e store.Event) {
	env, err := teamevent.Decode(e)
	if err != nil {
		return // a line of the wrong shape tells the story nothing
	}
	who := env.Agent
	switch ev := env.Event.(type) {
	case teamevent.TeamCreate:
		t.line(who, "creates team %s", env.Team)
	case teamevent.TaskCreate:
		t.line(who, "adds task #%s: %s", ev.Task, ev.Subject)
	case teamevent.TaskUpdate:
		if len(ev.AddBlockedBy) > 0 {
			t.line(who, "task #%s waits for #%s", ev.Task, strings.Join(ev.AddBlockedBy, ", #"))
		}
	case teamevent.Tool:
		t.tool(who, ev)
	case teamevent.Merge:
		switch ev.Status {
		case "merged":
			t.line(ev.Owner, "merge queue: #%s merged into %s (%s)", ev.Task, ev.Into, ev.How)
		case "conflict":
			t.line(ev.Owner, "merge queue: #%s conflicts with %s in %s; back to %s", ev.Task, ev.Into, strings.Join(ev.Files, ", "), ev.Owner)
		default:
			t.line(ev.Owner, "merge queue: #%s %s %s", ev.Task, ev.Status, oneLine(ev.Error, 80))
		}
	case teamevent.Spawn:
		t.mu.Lock()
		if t.mates == nil {
			t.mates = map[string]bool{}
		}
		t.mates[ev.Member] = true
		t.mu.Unlock()
		extra := ""
		if ev.PlanModeRequired {
			extra = ", plan mode"
		}
		t.line(who, "spawns %s (%s%s)", ev.Member, ev.Role, extra)
	case teamevent.Claim:
		t.line(who, "claims task #%s: %s", ev.Task, ev.Subject)
	case teamevent.TaskComplete:
		t.line(who, "completes task #%s", ev.Task)
	case teamevent.Status:
		switch ev.Status {
		case store.StatusIdle:
			t.line(who, "is idle")
		case store.StatusShutdown:
			t.line(who, "has shut down")
		}
	case teamevent.Send:
		t.send(who, ev)
	case teamevent.TeamDelete:
		t.line(who, "deletes team %s", env.Team)
	}
}

func (t *timeline) send(who string, ev teamevent.Send) {
	text := ev.Content
	switch ev.MsgType {
	case store.TypeIdleNotification:
	case store.TypeMessage:
		t.line(who, "→ %s: %s", ev.To, oneLine(text, 90))
	case store.TypeBroadcast:
		t.line(who, "→ %s (broadcast): %s", ev.To, oneLine(text, 80))
	case store.TypePlanApprovalResponse:
		verdict := "rejects"
		if ev.Approve != nil && *ev.Approve {
			verdict = "approves"
		}
		t.mu.Lock()
		if t.plan == nil {
			t.plan = map[string]int{}
		}
		t.plan[verdict]++
		t.mu.Unlock()
		if ev.Feedback != "" {
			text = ev.Feedback
		}
		t.line(who, "%s %s's plan: %s", verdict, ev.To, oneLine(text, 70))
	default:
		t.line(who, "→ %s [%s] %s", ev.To, ev.MsgType, oneLine(text, 70))
	}
}

// lastTurnText is the text of the last message of a Messages API request
// body, for diagnostics.
func lastTurnText(body []byte) string {
	var req struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil || len(req.Messages) == 0 {
		return ""
	}
	return oneLine(string(req.Messages[len(req.Messages)-1]), 600)
}
