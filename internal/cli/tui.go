package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"

	fakeapiexamples "github.com/troupe-dev/troupe/examples/fakeapi"
	"github.com/troupe-dev/troupe/internal/agent"
	assembly "github.com/troupe-dev/troupe/internal/app"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
	"github.com/troupe-dev/troupe/internal/skill"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/tui"
)

// errNoTerminal is why `troupe` alone cannot start here.
var errNoTerminal = errors.New(`the interactive session needs a terminal on stdin and stdout; run headless with -p "goal" instead`)

// terminals returns stdin and stdout as files when both are terminals.
func (a *app) terminals() (in, out *os.File, ok bool) {
	in, inOK := a.stdin.(*os.File)
	out, outOK := a.rawStdout.(*os.File)
	if !inOK || !outOK || !term.IsTerminal(in.Fd()) || !term.IsTerminal(out.Fd()) {
		return nil, nil, false
	}
	return in, out, true
}

// runTUI is `troupe` with no arguments: the interactive session in the
// terminal UI.
func (a *app) runTUI(cmd *cobra.Command) error {
	f := &a.run
	if err := f.check(false); err != nil {
		return err
	}
	if err := f.web.checkBeside(); err != nil {
		return err
	}
	if f.continueLatest || f.resume != "" {
		return withCode(ExitUsage, errors.New("--continue and --resume work with a headless run (-p) for now; in the terminal UI, use troupe resume TEAM"))
	}
	in, out, ok := a.terminals()
	if !ok {
		return withCode(ExitUsage, errNoTerminal)
	}
	dir, err := a.Workspace()
	if err != nil {
		return withCode(ExitUsage, err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return withCode(ExitUsage, fmt.Errorf("workspace %s is not a directory", dir))
	}
	provider, _, err := a.buildProvider(f.provider, f.maxRetries)
	if err != nil {
		return err
	}
	provider, finishRecord, err := a.recording(provider, a.record, dir)
	if err != nil {
		return err
	}
	e, err := a.openEnv(dir, nil) // warnings go to the log, not over the UI
	if err != nil {
		return withCode(ExitError, err)
	}
	defer e.Close()
	defer quietLogs(e.LogFile)()
	cfg, err := a.sessionConfig(e, provider, f.model, f.maxTurns, &f.team, f.provider)
	if err != nil {
		return withCode(ExitError, err)
	}
	if err := f.claude.apply(e, &cfg); err != nil {
		return err
	}
	return a.interactive(e, cfg, dir, in, out, "", f.web, finishRecord)
}

// interactive runs a session in the terminal UI until the human quits;
// resume names a team to bring back first (troupe resume). finish, if not
// nil, runs after the session closed (a recording's end).
func (a *app) interactive(e *env, cfg team.Config, dir string, in, out *os.File, resume string, web webFlags, finish func() error) error {
	q := newFeed()
	var sess *team.Session
	cfg.Observe = observeWithTeam(func() *team.Session { return sess }, func(ev agent.Event) {
		q.push(tui.AgentMsg(ev))
	})
	// What reached the lead, as the messages themselves: the UI shows them
	// verbatim and reads no prompt text.
	cfg.OnDelivered = func(a string, msgs []store.Message, at string) {
		if a == store.LeadName {
			q.push(tui.DeliveredMsg{Agent: a, Messages: msgs, At: at})
		}
	}
	ctl := &sessionCtl{}
	cfg.OnEvent = func(ev store.Event) {
		ctl.observe(ev)
		q.push(tui.TeamMsg(ev))
	}
	cfg.HumanRequests = func(m store.Message) bool { q.push(tui.RequestMsg(m)); return true }
	asker := newLeadAsker(func(m store.Message) { q.push(tui.RequestMsg(m)) })
	cfg.AskHuman = asker.ask
	if resume != "" {
		// The UI opens on the team as it stood: its journal so far.
		if t, err := cfg.Store.Team(a.ctx, resume); err == nil {
			if evs, err := t.Journal().Read(a.ctx); err == nil {
				q.push(tui.HistoryMsg(evs))
			}
		}
	}
	sess, err := team.NewSession(cfg)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	// Changes to the files that configure the agents are put to the human
	// for review: at once when a bash command made them, and at the end of
	// each lead turn for any other (they apply from the next session on).
	warnUI := func(text string) { q.push(tui.UpdateMsg(team.Update{Kind: team.UpdateWarning, Text: text})) }
	if e.Rules != nil {
		e.Rules.OnProtectedChange = func(paths []string) {
			for _, p := range paths {
				e.Logger.Warn("protected file changed by a bash command", "path", p)
				warnUI(fmt.Sprintf("%s was changed by a bash command; the change is not applied to this session. Review it.", p))
			}
		}
	}
	shown := map[string]bool{}
	it := team.NewInteractive(sess, func(u team.Update) {
		q.push(tui.UpdateMsg(u))
		if u.Kind != team.UpdateTurnEnd {
			return
		}
		for _, c := range e.SettingsChanges() {
			if text := c.String(); !shown[text] {
				shown[text] = true
				warnUI(text + " during the session; not applied to it (review it before the next session)")
			}
		}
	})
	stopWeb, err := a.webBeside(web, e.Store, sess, func(string) map[string]bool { return runningSet(it.Running()) }, dir)
	if err != nil {
		sess.Close()
		return err
	}
	defer stopWeb()
	if resume != "" {
		if err := it.Resume(a.ctx, resume); err != nil {
			_ = sess.Close()
			if errors.Is(err, context.Canceled) {
				return withCode(ExitInterrupted, fmt.Errorf("interrupted; continue with: %s", a.resumeHint(resume, dir)))
			}
			return withCode(ExitError, err)
		}
	}
	ctl.it, ctl.sess, ctl.lead = it, sess, asker
	model := tui.New(tui.Options{Controller: ctl, Commands: tuiCommands(e.Skills), Expand: e.Skills.Expand,
		PermissionMode: sess.PermissionMode(), ResumeCommand: func(t string) string { return a.resumeHint(t, dir) }})
	err = a.play(model, in, out, q, func(ctx context.Context) { _ = it.Run(ctx) })
	sess.EndHooks("prompt_input_exit")
	name := sess.TeamName()
	closeErr := sess.Close()
	if err == nil {
		err = closeErr
	}
	if finish != nil {
		if ferr := finish(); err == nil {
			err = ferr
		}
	}
	return a.leftUI(err, name, dir, model.Interrupted())
}

// leftUI is how a session in the terminal UI ends: an error, or the team
// left behind (resumable), interrupted when the human quit while members
// worked or a signal stopped the session.
func (a *app) leftUI(err error, team, dir string, interrupted bool) error {
	interrupted = interrupted || a.ctx.Err() != nil
	switch {
	case err != nil:
		return withCode(ExitError, err)
	case team == "" && interrupted:
		return withCode(ExitInterrupted, errors.New("interrupted"))
	case team == "":
		return nil
	case interrupted:
		return withCode(ExitInterrupted, fmt.Errorf("interrupted; team %s stays resumable; continue with: %s", team, a.resumeHint(team, dir)))
	}
	fmt.Fprintf(a.stderr, "troupe: team %s stays resumable; continue with: %s\n", team, a.resumeHint(team, dir))
	return nil
}

// resumeHint is the exact command that resumes team from the current
// directory: the workspace (and a state directory given by flag) named
// unless they are the defaults.
func (a *app) resumeHint(team, dir string) string {
	cmd := "troupe resume " + shellWord(team)
	if cwd, err := os.Getwd(); err != nil || filepath.Clean(cwd) != filepath.Clean(dir) {
		cmd += " --workspace " + shellWord(dir)
	}
	if a.stateDir != "" {
		if abs, err := filepath.Abs(a.stateDir); err == nil {
			cmd += " --state-dir " + shellWord(abs)
		}
	}
	return cmd
}

// shellWord quotes s for a POSIX shell when it needs it.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// play runs the UI until the user quits, with work running beside it; when
// the UI ends, work's context is cancelled and play waits for it.
func (a *app) play(model tea.Model, in, out *os.File, q *feed, work func(ctx context.Context)) error {
	ctx, cancel := context.WithCancel(a.ctx)
	defer cancel()
	p := tea.NewProgram(model, tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out))
	var wg sync.WaitGroup
	wg.Go(func() { q.run(ctx, p.Send) })
	wg.Go(func() { work(ctx) })
	_, err := p.Run()
	cancel()
	wg.Wait()
	if errors.Is(err, tea.ErrProgramKilled) || errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// quietLogs sends the standard loggers to the log file while the UI owns
// the screen, and returns what puts them back.
func quietLogs(w io.Writer) func() {
	prevFlags, prevOut := log.Flags(), log.Writer()
	prevSlog := slog.Default()
	log.SetOutput(w)
	slog.SetDefault(slog.New(slog.NewTextHandler(w, nil)))
	return func() {
		log.SetOutput(prevOut)
		log.SetFlags(prevFlags)
		slog.SetDefault(prevSlog)
	}
}

// sessionCtl is the UI's handle on an interactive session.
type sessionCtl struct {
	it   *team.Interactive
	sess *team.Session
	lead *leadAsker // the lead's own questions; nil when nobody asks

	mu       sync.Mutex
	archived string // the team deleted (and archived) last, until a new one
}

// observe follows the team's creation and deletion, so that what the UI is
// told once the team is gone says so.
func (c *sessionCtl) observe(ev store.Event) {
	switch ev.Type {
	case "team_delete":
		c.mu.Lock()
		c.archived = ev.Team
		c.mu.Unlock()
	case "team_create":
		c.mu.Lock()
		c.archived = ""
		c.mu.Unlock()
	}
}

// noTeam says why there is no team to act on: none yet, or the one
// deleted during the session.
func (c *sessionCtl) noTeam(err error) error {
	c.mu.Lock()
	name := c.archived
	c.mu.Unlock()
	if name == "" {
		return err
	}
	return fmt.Errorf("team %s finished and was archived (troupe usage %s shows its usage); ask the lead for a new team", name, name)
}

// SetPermissionMode switches the lead's mode (Shift+Tab).
func (c *sessionCtl) SetPermissionMode(mode string) error { return c.sess.SetPermissionMode(mode) }

func (c *sessionCtl) Submit(text string)   { c.it.Submit(text) }
func (c *sessionCtl) Interrupt() bool      { return c.it.Interrupt() }
func (c *sessionCtl) Compact(focus string) { c.it.Compact(focus) }

func (c *sessionCtl) Send(ctx context.Context, to, text string) error {
	if n, err := store.NormalizeName(to); err == nil && n != store.LeadName {
		if _, err := c.sess.Team(); err != nil {
			return c.noTeam(err)
		}
	}
	return c.it.Send(ctx, to, text)
}

func (c *sessionCtl) Answer(ctx context.Context, id string, approve bool, feedback string) error {
	if c.lead != nil && c.lead.answer(id, approve) {
		return nil
	}
	return c.it.Answer(ctx, id, approve, feedback)
}

func (c *sessionCtl) Snapshot(ctx context.Context) (tui.Snapshot, error) {
	t, err := c.sess.Team()
	if errors.Is(err, team.ErrNoTeam) {
		return tui.Snapshot{}, nil
	}
	if err != nil {
		return tui.Snapshot{}, err
	}
	r, err := t.ReadRoster(ctx)
	if err != nil {
		return tui.Snapshot{}, err
	}
	board, err := t.Tasks().Board(ctx)
	if err != nil {
		return tui.Snapshot{}, err
	}
	running := map[string]bool{}
	for _, n := range c.it.Running() {
		running[n] = true
	}
	return tui.Snapshot{Roster: &r, Tasks: board.Tasks, Corrupt: board.Corrupt, Running: running}, nil
}

func (c *sessionCtl) Inbox(ctx context.Context, name string) ([]store.Message, error) {
	t, err := c.sess.Team()
	if err != nil {
		return nil, c.noTeam(err)
	}
	n, err := store.NormalizeName(name)
	if err != nil {
		return nil, err
	}
	return t.Mailbox().Peek(ctx, n)
}

// feed hands messages to the UI in order without ever blocking the agent
// or team goroutines that produce them.
type feed struct {
	mu     sync.Mutex
	queue  []tea.Msg
	signal chan struct{}
}

func newFeed() *feed { return &feed{signal: make(chan struct{}, 1)} }

func (f *feed) push(m tea.Msg) {
	f.mu.Lock()
	f.queue = append(f.queue, m)
	f.mu.Unlock()
	select {
	case f.signal <- struct{}{}:
	default:
	}
}

// run sends what is queued until ctx ends.
func (f *feed) run(ctx context.Context, send func(tea.Msg)) {
	for {
		f.mu.Lock()
		batch := f.queue
		f.queue = nil
		f.mu.Unlock()
		for _, m := range batch {
			if ctx.Err() != nil {
				return
			}
			send(m)
		}
		select {
		case <-ctx.Done():
			return
		case <-f.signal:
		}
	}
}

// demoTUI plays the demo in the terminal UI; ok is false when the UI cannot
// run here (no terminal), and the caller falls back to the text timeline.
func (a *app) demoTUI(latency time.Duration, mode string) (ok bool, err error) {
	in, out, ok := a.terminals()
	if !ok {
		return false, nil
	}
	if latency == 0 {
		// At full speed the story is over before anyone can read it.
		latency = demoUILatency
	}
	d, err := a.startDemo(latency, mode)
	if err != nil {
		return true, err
	}
	finished := false
	defer func() { d.removeTemp(finished && err == nil, a.stderr) }()
	defer d.close()
	defer quietLogs(d.env.LogFile)()
	q := newFeed()
	tl := newTally()
	var sess *team.Session
	d.cfg.Observe = observeWithTeam(func() *team.Session { return sess }, func(ev agent.Event) { q.push(tui.AgentMsg(ev)) })
	d.cfg.OnEvent = func(ev store.Event) {
		tl.observe(ev)
		q.push(tui.TeamMsg(ev))
	}
	sess, err = team.NewSession(d.cfg)
	if err != nil {
		return true, withCode(ExitUsage, err)
	}
	stopWeb, err := a.webBeside(a.demoWeb, d.env.Store, sess, nil, d.dir)
	if err != nil {
		sess.Close()
		return true, err
	}
	defer stopWeb()
	var runErr error
	model := tui.New(tui.Options{Demo: true, PermissionMode: sess.PermissionMode(), ResumeCommand: func(t string) string { return a.resumeHint(t, d.dir) }})
	err = a.play(model, in, out, q, func(ctx context.Context) {
		q.push(tui.PromptMsg(demoGoal))
		start := time.Now()
		res, err := sess.RunHeadless(ctx, demoGoal)
		if cerr := sess.Close(); err == nil {
			err = cerr
		}
		if ctx.Err() != nil {
			return // the user quit before the end
		}
		runErr, finished = err, true
		q.push(tui.FinishedMsg{Summary: d.summary(res, tl, time.Since(start)), Err: err})
	})
	if err == nil {
		err = runErr
	}
	if err != nil {
		return true, withCode(ExitError, err)
	}
	if !finished {
		// Quit before the end of the story: the team is left as it was.
		return true, a.leftUI(nil, model.Team(), d.dir, true)
	}
	return true, nil
}

// demoUILatency paces the demo's model in the terminal UI, unless
// --model-latency says otherwise.
const demoUILatency = 300 * time.Millisecond

// demo is the demo's surroundings: a workspace, the bundled script served
// by the fake API on loopback, and a session configuration on it.
type demo struct {
	dir  string
	temp bool // dir was made for this demo (no --workspace)
	fake *fakeapi.Server
	env  *env
	cfg  team.Config
}

func (a *app) startDemo(latency time.Duration, mode string) (*demo, error) {
	dir := a.workspace
	if dir == "" {
		tmp, err := os.MkdirTemp("", "troupe-demo-")
		if err != nil {
			return nil, withCode(ExitError, err)
		}
		dir = tmp
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, withCode(ExitError, err)
	}
	dir, _ = filepath.Abs(dir)
	script, err := fakeapi.ParseScript(fakeapiexamples.RESTToGraphQL)
	if err != nil {
		return nil, withCode(ExitError, fmt.Errorf("bundled script: %w", err))
	}
	d := &demo{dir: dir, temp: a.workspace == "", fake: fakeapi.New(script, a.demoCache.options(fakeapi.Options{Latency: latency}))}
	base, err := d.fake.Start("127.0.0.1:0")
	if err != nil {
		return nil, withCode(ExitError, err)
	}
	var provider llm.Provider = a.providerOverride
	if provider == nil {
		if provider, err = assembly.AnthropicAt(base, "demo", 0); err != nil {
			d.close()
			return nil, withCode(ExitError, err)
		}
	}
	if d.env, err = a.openEnv(dir, nil); err != nil {
		d.close()
		return nil, withCode(ExitError, err)
	}
	// troupe resume plays a team left behind on the same bundled script.
	if err := writeDemoMarker(d.env.StateDir, latency, ""); err != nil {
		d.close()
		return nil, withCode(ExitError, err)
	}
	flags := teamFlags{teammateMode: mode, permissionMode: team.PermBypass}
	if d.cfg, err = a.sessionConfig(d.env, provider, "", 0, &flags, providerFlags{provider: "anthropic", baseURL: base}); err != nil {
		d.close()
		return nil, withCode(ExitError, err)
	}
	d.cfg.AgentEnv = []string{"ANTHROPIC_API_KEY=demo", "ANTHROPIC_BASE_URL=" + base}
	return d, nil
}

// removeTemp removes a temporary workspace once the story has been played
// through; otherwise (a failure, or a team left resumable) it says where the
// workspace is kept.
func (d *demo) removeTemp(done bool, w io.Writer) {
	if !d.temp {
		return
	}
	if done {
		_ = os.RemoveAll(d.dir)
		return
	}
	fmt.Fprintf(w, "troupe demo: the workspace is kept in %s\n", d.dir)
}

func (d *demo) close() {
	if d.env != nil {
		d.env.Close()
	}
	_ = d.fake.Close()
}

// summary is the end of the story: the lead's last words and the figures.
func (d *demo) summary(res *team.Result, tl *tally, took time.Duration) string {
	var b strings.Builder
	var written []string
	for _, f := range demoFiles {
		if st, err := os.Stat(filepath.Join(d.dir, f)); err == nil && st.Size() > 0 {
			written = append(written, f)
		}
	}
	lead := 0
	if res != nil {
		lead = res.Stats.LeadModelTurns
	}
	tl.mu.Lock()
	done, total, mates, msgs := len(tl.completed), len(tl.tasks), len(tl.teammates), tl.messages
	tl.mu.Unlock()
	fmt.Fprintf(&b, "**Demo finished:** %d/%d tasks completed by %d teammates, %d messages, %d model calls (lead %d), %.1fs.\n\n",
		done, total, mates, msgs, len(d.fake.Requests()), lead, took.Seconds())
	fmt.Fprintf(&b, "Files written in %s: %s", d.dir, strings.Join(written, ", "))
	return b.String()
}

// tuiCommands lists the skills and Claude Code commands the user can type
// as /name in the terminal UI.
func tuiCommands(set *skill.Set) []tui.Command {
	var out []tui.Command
	for _, c := range set.Commands() {
		out = append(out, tui.Command{Name: c.Name, ArgumentHint: c.ArgumentHint, Description: c.Description})
	}
	return out
}
