package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/spinner"
	"charm.land/bubbles/v2/textarea"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/teamview"
)

// viewKind is what the main pane shows.
type viewKind int

const (
	viewChat viewKind = iota
	viewTasks
	viewTeam
	viewInbox
	viewHelp
)

var viewNames = map[viewKind]string{viewChat: "chat", viewTasks: "tasks", viewTeam: "team", viewInbox: "inbox", viewHelp: "help"}

// Model is the UI's bubbletea model.
type Model struct {
	state
	ctl  Controller
	now  func() time.Time
	demo bool
	// commands and expand are Options.Commands and Options.Expand.
	commands []Command
	expand   func(name, args string) (string, bool)

	width, height int
	view          viewKind
	follow        bool // the main pane sticks to its bottom

	input    textarea.Model
	pane     viewport.Model
	spin     spinner.Model
	feedback bool // typing the feedback of a denial

	// mode is the lead's permission mode; modes is the Shift+Tab cycle.
	mode  string
	modes []string

	inboxName string
	inbox     []store.Message
	md        *markdown
	quitting  bool
	// rules is the team's pattern and theme as its roster has them ("":
	// no team yet); a team makes delegate mode one Shift+Tab away.
	rules   string
	hasTeam bool
	// confirmQuit: the human asked to quit while members work; the next
	// key says whether to. interrupted: the UI quit while they worked.
	confirmQuit bool
	interrupted bool
	resumeCmd   func(team string) string
	// archived names the team deleted during the session (TeamDelete).
	archived string
}

// New returns the UI's model.
func New(opts Options) *Model {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	in := textarea.New()
	in.ShowLineNumbers = false
	in.Placeholder = "Tell the lead what to do · @name to message a teammate · /help"
	in.KeyMap.InsertNewline = key.NewBinding(key.WithKeys("ctrl+j", "alt+enter", "shift+enter"))
	in.SetHeight(2)
	in.CharLimit = 0
	in.SetPromptFunc(2, func(p textarea.PromptInfo) string {
		if p.LineNumber == 0 {
			return "› "
		}
		return "  "
	})
	in.Focus()
	m := &Model{
		state:  newState(opts.Demo),
		ctl:    opts.Controller,
		now:    opts.Now,
		demo:   opts.Demo,
		follow: true,
		input:  in,
		pane:   viewport.New(),
		spin:   spinner.New(spinner.WithSpinner(spinner.MiniDot)),
		md:     newMarkdown(),
	}
	m.commands, m.expand = opts.Commands, opts.Expand
	m.resumeCmd = opts.ResumeCommand
	if m.resumeCmd == nil {
		m.resumeCmd = func(team string) string { return "troupe resume " + team }
	}
	m.mode, m.modes = modeCycle(opts.PermissionMode)
	m.resize(80, 24)
	return m
}

// modeCycle is the mode to show first and the modes Shift+Tab cycles
// through: Claude Code's three, and bypassPermissions only for a session
// that started in it.
func modeCycle(start string) (string, []string) {
	if start == "" {
		start = "default"
	}
	modes := []string{"default", "acceptEdits", "plan"}
	if start == "bypassPermissions" {
		modes = append(modes, start)
	}
	return start, modes
}

// nextMode switches the lead to the mode after the current one.
func (m *Model) nextMode() {
	sw, ok := m.ctl.(ModeSwitcher)
	if !ok || m.demo {
		return
	}
	modes := m.modes
	if m.hasTeam && !slices.Contains(modes, "delegate") {
		// Seed 004: once the team exists, Shift+Tab reaches delegate mode
		// (the lead manages only), and goes on back to the others.
		modes = append(slices.Clone(modes), "delegate")
	}
	next := modes[0]
	for i, md := range modes {
		if md == m.mode {
			next = modes[(i+1)%len(modes)]
		}
	}
	if !slices.Contains(modes, m.mode) {
		m.note("The lead's mode %s cannot be changed in this session.", m.mode)
		return
	}
	if err := sw.SetPermissionMode(next); err != nil {
		m.add(entry{kind: entryError, text: err.Error()})
		return
	}
	m.mode = next
}

// teamRules is what the status line says of a team's pattern and theme.
func teamRules(sn Snapshot) string {
	if sn.Roster == nil {
		return ""
	}
	p, _ := sn.Roster.PersonaOf(store.LeadName)
	return rulesText(sn.Roster.Pattern, sn.Roster.Theme, p.Name)
}

func rulesText(pattern, theme, lead string) string {
	s := pattern
	if theme != "" {
		if s != "" {
			s += " · "
		}
		s += "theme " + theme
		if lead != "" {
			s += " (lead: " + lead + ")"
		}
	}
	return s
}

// Init starts the spinner.
func (m *Model) Init() tea.Cmd { return m.spin.Tick }

// snapshotMsg and inboxMsg carry answers from the Controller.
type (
	snapshotMsg struct {
		snap Snapshot
		err  error
	}
	inboxMsg struct {
		name string
		msgs []store.Message
		err  error
	}
	errMsg struct{ err error }
)

// Update folds a message into the model.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	now := m.now()
	var cmds []tea.Cmd
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.resize(msg.Width, msg.Height)
	case spinner.TickMsg:
		var cmd tea.Cmd
		m.spin, cmd = m.spin.Update(msg)
		cmds = append(cmds, cmd)
	case AgentMsg:
		m.team.Apply(now, agent.Event(msg))
	case TeamMsg:
		env, err := teamevent.Decode(store.Event(msg))
		if err != nil {
			break // a line of the wrong shape tells nothing
		}
		m.team.Apply(now, env)
		switch e := env.Event.(type) {
		case teamevent.TeamCreate:
			m.rules, m.hasTeam = rulesText(e.Pattern, e.Theme, e.Lead), true
		case teamevent.TeamDelete:
			m.rules, m.hasTeam = "", false
		}
		m.remark(env)
		if m.view == viewTasks || m.view == viewTeam {
			switch env.Event.(type) {
			case teamevent.TaskCreate, teamevent.TaskUpdate, teamevent.TaskComplete, teamevent.Claim,
				teamevent.Status, teamevent.Spawn, teamevent.Dead, teamevent.HandBack:
				cmds = append(cmds, m.refresh())
			}
		}
	case HistoryMsg:
		for _, e := range msg {
			if env, err := teamevent.Decode(e); err == nil {
				m.team.Apply(env.TS, env)
			}
		}
	case DeliveredMsg:
		m.team.Apply(now, teamview.Delivered{Agent: msg.Agent, Messages: msg.Messages, At: msg.At})
	case UpdateMsg:
		m.driverUpdate(team.Update(msg), now)
	case RequestMsg:
		m.team.Apply(now, teamview.Request(msg))
	case PromptMsg:
		m.team.Apply(now, teamview.Prompt{Text: string(msg)})
	case FinishedMsg:
		f := msg
		m.finished = &f
		m.setBusy(false, now)
		if f.Summary != "" {
			m.add(entry{kind: entryLead, text: f.Summary})
		}
		if f.Err != nil {
			m.add(entry{kind: entryError, text: f.Err.Error()})
		}
		m.view, m.follow = viewChat, true
	case snapshotMsg:
		if msg.err == nil {
			m.team.Apply(now, msg.snap)
			if msg.snap.Roster != nil {
				m.rules, m.hasTeam = teamRules(msg.snap), true
			}
		}
	case inboxMsg:
		m.inboxName, m.inbox = msg.name, msg.msgs
		if msg.err != nil {
			m.add(entry{kind: entryError, text: fmt.Sprintf("inbox %s: %v", msg.name, msg.err)})
		}
	case errMsg:
		m.add(entry{kind: entryError, text: msg.err.Error()})
	case tea.KeyPressMsg:
		if cmd, handled := m.key(msg); handled {
			cmds = append(cmds, cmd)
			break
		}
		var cmd tea.Cmd
		m.input, cmd = m.input.Update(msg)
		cmds = append(cmds, cmd)
	case tea.PasteMsg:
		var cmd tea.Cmd
		m.input, cmd = m.input.Update(msg)
		cmds = append(cmds, cmd)
	default:
		var cmd tea.Cmd
		m.input, cmd = m.input.Update(msg)
		cmds = append(cmds, cmd)
	}
	m.layout()
	if m.quitting {
		cmds = append(cmds, tea.Quit)
	}
	return m, tea.Batch(cmds...)
}

// remark says in the chat what the human must know of a team event: the
// team came back (troupe resume), or it was deleted and archived, and
// where its usage is.
func (m *Model) remark(env teamevent.Envelope) {
	switch e := env.Event.(type) {
	case teamevent.Resume:
		back := "nobody was left to restart"
		if len(e.Restarted) > 0 {
			back = strings.Join(e.Restarted, ", ") + " back with their conversations"
		}
		m.note("Team %s resumed: %s.", env.Team, back)
	case teamevent.TeamDelete:
		m.archived = env.Team
		m.note("Team %s finished and was archived; its usage: troupe usage %s. Tell the lead what to do next to start a new team.", env.Team, env.Team)
	case teamevent.TeamCreate:
		m.archived = ""
	}
}

func (m *Model) driverUpdate(u team.Update, now time.Time) {
	switch u.Kind {
	case team.UpdateTurnStart:
		m.team.Apply(now, teamview.TurnStart{Why: u.Why})
	case team.UpdateTurnEnd:
		// A failure goes in the lead's transcript (the teamview's).
		m.team.Apply(now, teamview.TurnEnd{Err: u.Err, Interrupted: u.Interrupted})
		if u.Interrupted {
			m.note("Interrupted. The lead keeps the conversation; say what to do next.")
		}
	case team.UpdateToLead:
		m.team.Apply(now, teamview.Delivered{Agent: store.LeadName, Messages: u.Messages, At: "idle"})
	case team.UpdateCompacted:
		switch {
		case u.Interrupted:
			m.note("Compaction stopped; the conversation is unchanged.")
		case u.Err != nil:
			m.add(entry{kind: entryError, text: "compact: " + u.Err.Error()})
		default:
			m.note("The lead's conversation was compacted into a summary.")
		}
	case team.UpdateWarning:
		m.team.Apply(now, teamview.Warning{Text: u.Text})
	case team.UpdateTeam:
		m.team.Apply(now, teamview.TeamState{Text: u.Text})
		if strings.HasPrefix(u.Text, "stalled") {
			m.note("The team is %s.", u.Text)
		}
	}
}

// key handles the keys the UI owns; the rest go to the input line.
func (m *Model) key(k tea.KeyPressMsg) (tea.Cmd, bool) {
	if m.confirmQuit {
		m.confirmQuit = false
		switch k.String() {
		case "y", "Y", "ctrl+c":
			m.quitting, m.interrupted = true, true
		default:
			m.note("Not quitting; the team carries on.")
		}
		return nil, true
	}
	switch k.String() {
	case "ctrl+c":
		m.quit()
		return nil, true
	case "tab":
		m.setView((m.view + 1) % 3)
		return m.refresh(), true
	case "shift+tab":
		m.nextMode()
		return nil, true
	case "pgup":
		m.pane.PageUp()
		m.follow = false
		return nil, true
	case "pgdown":
		m.pane.PageDown()
		m.follow = m.pane.AtBottom()
		return nil, true
	case "esc":
		switch {
		case m.busy() && m.ctl != nil && m.ctl.Interrupt():
			m.note("Stopping the lead…")
		case m.feedback:
			m.feedback = false
			m.input.Reset()
		case m.view != viewChat:
			m.setView(viewChat)
		}
		return nil, true
	}
	if m.demo || m.finished != nil && m.ctl == nil {
		if k.String() == "q" {
			m.quit()
		}
		return nil, true
	}
	if len(m.requests()) > 0 && !m.feedback {
		return m.answerKey(k.String())
	}
	if k.String() == "enter" {
		text := strings.TrimSpace(m.input.Value())
		m.input.Reset()
		if m.feedback {
			m.feedback = false
			return m.answer(false, text), true
		}
		if text == "" {
			return nil, true
		}
		return m.submit(text), true
	}
	return nil, false
}

// quit ends the UI at once when nobody works; otherwise it asks first,
// saying what quitting does to the team and how to bring it back.
func (m *Model) quit() {
	working := m.Working()
	if len(working) == 0 {
		m.quitting = true
		return
	}
	how := "The team stays resumable"
	if name := m.team.Team(); name != "" {
		how += ": " + m.resumeCmd(name)
	}
	m.note("%s still working. Quit now? They stop where they are. %s. Press y to quit, any other key to stay.", strings.Join(working, ", "), how)
	m.confirmQuit = true
	m.follow = true
	m.setView(viewChat)
}

// Working names the members at work now: the lead in a turn, teammates
// working, starting or waiting for an answer. Nobody works once the
// session or demo has finished.
func (m *Model) Working() []string {
	if m.finished != nil {
		return nil
	}
	var out []string
	for _, r := range m.team.Roster() {
		switch {
		case r.Name == store.LeadName && r.InTurn,
			r.Name != store.LeadName && (r.Status == store.StatusWorking || r.Status == teamview.StatusStarting || r.Status == teamview.StatusWaiting):
			out = append(out, r.Name)
		}
	}
	return out
}

// Interrupted reports whether the human quit while members were working
// (and confirmed it).
func (m *Model) Interrupted() bool { return m.interrupted }

// Team is the name of the team the UI shows ("" before TeamCreate, or once
// the team was deleted).
func (m *Model) Team() string {
	if m.archived != "" && m.archived == m.team.Team() {
		return ""
	}
	return m.team.Team()
}

// answerKey answers the first waiting request: y allows, n denies, f denies
// with feedback typed next.
func (m *Model) answerKey(k string) (tea.Cmd, bool) {
	switch k {
	case "y", "Y":
		return m.answer(true, ""), true
	case "n", "N":
		return m.answer(false, ""), true
	case "f", "F":
		m.feedback = true
		m.input.Reset()
		return nil, true
	}
	return nil, true
}

func (m *Model) answer(approve bool, feedback string) tea.Cmd {
	waiting := m.requests()
	if len(waiting) == 0 {
		return nil
	}
	r := waiting[0].Message
	m.team.Apply(m.now(), teamview.Answered{RequestID: waiting[0].ID})
	verdict := "denied"
	if approve {
		verdict = "allowed"
		if r.Type == store.TypePlanApprovalRequest {
			verdict = "approved"
		}
	}
	what := "its plan"
	if r.Type == store.TypePermissionRequest {
		what = r.ToolName
	}
	line := fmt.Sprintf("You %s %s: %s.", verdict, r.From, what)
	if feedback != "" {
		line += " Feedback: " + feedback
	}
	m.note("%s", line)
	if m.ctl == nil {
		return nil
	}
	ctl := m.ctl
	return func() tea.Msg {
		if err := ctl.Answer(context.Background(), r.RequestID, approve, feedback); err != nil {
			return errMsg{fmt.Errorf("answer %s: %w", r.From, err)}
		}
		return nil
	}
}

// submit acts on a line the human entered.
func (m *Model) submit(text string) tea.Cmd {
	m.follow = true
	if strings.HasPrefix(text, "/") {
		return m.command(text)
	}
	if strings.HasPrefix(text, "@") {
		to, body, _ := strings.Cut(text[1:], " ")
		body = strings.TrimSpace(body)
		if to == "" || body == "" {
			m.add(entry{kind: entryError, text: "write @name and a message, e.g. @alice please also check the tests"})
			return nil
		}
		m.setView(viewChat)
		m.add(entry{kind: entryToMember, who: to, text: body})
		if m.ctl == nil {
			return nil
		}
		ctl := m.ctl
		return func() tea.Msg {
			if err := ctl.Send(context.Background(), to, body); err != nil {
				return errMsg{fmt.Errorf("message to %s not sent: %w", to, err)}
			}
			return nil
		}
	}
	m.setView(viewChat)
	m.team.Apply(m.now(), teamview.Prompt{Text: text})
	if m.ctl != nil {
		m.ctl.Submit(text)
	}
	return nil
}

// command runs a slash command.
func (m *Model) command(text string) tea.Cmd {
	name, arg, _ := strings.Cut(strings.TrimPrefix(text, "/"), " ")
	arg = strings.TrimSpace(arg)
	switch name {
	case "quit", "exit", "q":
		m.quit()
	case "help", "?":
		m.setView(viewHelp)
	case "tasks", "board":
		m.setView(viewTasks)
		return m.refresh()
	case "team", "timeline":
		m.setView(viewTeam)
		return m.refresh()
	case "chat":
		m.setView(viewChat)
	case "inbox":
		if arg == "" {
			arg = store.LeadName
		}
		m.setView(viewInbox)
		m.inboxName, m.inbox = arg, nil
		if m.ctl == nil {
			return nil
		}
		ctl, name := m.ctl, arg
		return func() tea.Msg {
			msgs, err := ctl.Inbox(context.Background(), name)
			return inboxMsg{name: name, msgs: msgs, err: err}
		}
	case "compact":
		m.setView(viewChat)
		if m.ctl != nil {
			m.ctl.Compact(arg)
		}
		if m.busy() {
			m.note("The lead's conversation will be compacted when its turn ends.")
		} else {
			m.note("Compacting the lead's conversation…")
		}
	default:
		m.setView(viewChat)
		if m.expand != nil {
			if prompt, ok := m.expand(name, arg); ok {
				// The chat shows what was typed; the lead gets the
				// command's text with the arguments filled in.
				m.team.Apply(m.now(), teamview.Prompt{Text: text})
				if m.ctl != nil {
					m.ctl.Submit(prompt)
				}
				return nil
			}
		}
		m.add(entry{kind: entryError, text: fmt.Sprintf("unknown command /%s; /help lists them", name)})
	}
	return nil
}

func (m *Model) setView(v viewKind) {
	if v != m.view {
		m.view, m.follow = v, v == viewChat
		if v != viewChat {
			m.pane.GotoTop()
		}
	}
}

// refresh asks the controller for a snapshot of the team.
func (m *Model) refresh() tea.Cmd {
	if m.ctl == nil {
		return nil
	}
	ctl := m.ctl
	return func() tea.Msg {
		sn, err := ctl.Snapshot(context.Background())
		return snapshotMsg{snap: sn, err: err}
	}
}

// requestText is what a request asks.
func requestText(r store.Message) string { return teamview.RequestText(r) }
