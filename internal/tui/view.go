package tui

import (
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamview"

	"github.com/troupe-dev/troupe/internal/text"
)

var (
	accent  = lipgloss.Color("#7D56F4")
	green   = lipgloss.Color("#3FB950")
	yellow  = lipgloss.Color("#D29922")
	red     = lipgloss.Color("#F85149")
	grey    = lipgloss.Color("#8B949E")
	sBold   = lipgloss.NewStyle().Bold(true)
	sDim    = lipgloss.NewStyle().Foreground(grey)
	sAccent = lipgloss.NewStyle().Foreground(accent).Bold(true)
	sUser   = lipgloss.NewStyle().Foreground(lipgloss.Color("#58A6FF")).Bold(true)
	sWarn   = lipgloss.NewStyle().Foreground(yellow).Bold(true)
	sErr    = lipgloss.NewStyle().Foreground(red)
	sOK     = lipgloss.NewStyle().Foreground(green)
	sBar    = lipgloss.NewStyle().Reverse(true)
)

// Geometry.
const (
	minSideWidth  = 24
	wideSideWidth = 32
	inputHeight   = 2
)

func (m *Model) sideWidth() int {
	switch {
	case m.width >= 110:
		return wideSideWidth
	case m.width >= 60:
		return minSideWidth
	}
	return 0
}

// mainWidth is the width of the main pane.
func (m *Model) mainWidth() int {
	if sw := m.sideWidth(); sw > 0 {
		return m.width - sw - 1
	}
	return m.width
}

// bodyHeight is the height of the main pane and the side panel.
func (m *Model) bodyHeight() int {
	bottom := 2 // separator, status line
	if !m.demo {
		bottom += inputHeight
	}
	return max(1, m.height-1-bottom)
}

func (m *Model) resize(w, h int) {
	m.width, m.height = max(w, 20), max(h, 8)
	m.input.SetWidth(m.width)
	m.input.SetHeight(inputHeight)
	m.layout()
}

// layout puts the current view's content in the main pane.
func (m *Model) layout() {
	m.pane.SetWidth(m.mainWidth())
	m.pane.SetHeight(m.bodyHeight())
	var lines []string
	switch m.view {
	case viewTasks:
		lines = m.tasksLines()
	case viewTeam:
		lines = m.teamLines()
	case viewInbox:
		lines = m.inboxLines()
	case viewHelp:
		lines = m.helpLines()
	default:
		lines = m.chatLines()
	}
	m.pane.SetContentLines(lines)
	if m.follow {
		m.pane.GotoBottom()
	}
	if m.feedback {
		m.input.Placeholder = "why not? feedback for the denial · Enter sends it · Esc goes back"
	} else {
		m.input.Placeholder = "Tell the lead what to do · @name messages a teammate · /help"
	}
}

// View draws the whole screen.
func (m *Model) View() tea.View {
	v := tea.NewView(m.Render())
	v.AltScreen = true
	if m.quitting {
		v = tea.NewView("")
	}
	return v
}

// Render is the screen as text, exactly width x height cells.
func (m *Model) Render() string {
	w := m.width
	out := make([]string, 0, m.height)
	out = append(out, m.header())
	body := strings.Split(m.pane.View(), "\n")
	side := m.sideLines(m.bodyHeight())
	mw, sw := m.mainWidth(), m.sideWidth()
	for i := 0; i < m.bodyHeight(); i++ {
		line := ""
		if i < len(body) {
			line = body[i]
		}
		line = fit(line, mw)
		if sw > 0 {
			s := ""
			if i < len(side) {
				s = side[i]
			}
			line += sDim.Render("│") + fit(s, sw)
		}
		out = append(out, line)
	}
	out = append(out, m.bottom()...)
	out = append(out, fit(m.statusLine(), w))
	return strings.Join(out, "\n")
}

func (m *Model) header() string {
	left := sAccent.Render(" troupe")
	if name := m.team.Team(); name != "" {
		left += sDim.Render(" · team ") + sBold.Render(name)
		if name == m.archived {
			left += sDim.Render(" (archived)")
		}
	}
	if m.demo {
		left += sDim.Render(" · demo")
	}
	var tabs []string
	for _, v := range []viewKind{viewChat, viewTasks, viewTeam} {
		name := viewNames[v]
		if v == m.view {
			tabs = append(tabs, sBar.Render(" "+name+" "))
		} else {
			tabs = append(tabs, sDim.Render(" "+name+" "))
		}
	}
	if m.view == viewInbox || m.view == viewHelp {
		tabs = append(tabs, sBar.Render(" "+viewNames[m.view]+" "))
	}
	right := strings.Join(tabs, "")
	gap := m.width - ansi.StringWidth(left) - ansi.StringWidth(right)
	if gap < 1 {
		return fit(left, m.width)
	}
	return left + strings.Repeat(" ", gap) + right
}

// bottom is the separator and the input line, or the approval prompt.
func (m *Model) bottom() []string {
	w := m.width
	if m.confirmQuit {
		q := fmt.Sprintf(" Quit while %s work? ", strings.Join(m.Working(), ", "))
		lines := []string{sWarn.Render(fit(q, w)), fit(fmt.Sprintf("  %s quits (the team stays resumable) · any other key stays", sBold.Render("y")), w)}
		if m.demo {
			return lines[:1]
		}
		return append(lines, fit("", w))
	}
	if m.demo {
		hint := " demo · Tab switches views · PgUp/PgDn scroll · q quits "
		if m.finished != nil {
			hint = " the demo is over · Tab switches views · q quits "
		}
		return []string{rule(hint, w)}
	}
	if waiting := m.requests(); len(waiting) > 0 {
		r := waiting[0].Message
		title := fmt.Sprintf(" ⚑ %s %s ", r.From, text.OneLine(requestText(r), w))
		lines := []string{sWarn.Render(fit(title, w))}
		if m.feedback {
			return append(lines, m.inputLines()...)
		}
		yes, no := "allow", "deny"
		if r.Type == store.TypePlanApprovalRequest {
			yes, no = "approve", "reject"
		}
		opts := fmt.Sprintf("  %s %s · %s %s · %s %s with feedback", sBold.Render("y"), yes, sBold.Render("n"), no, sBold.Render("f"), no)
		if n := len(waiting); n > 1 {
			opts += sDim.Render(fmt.Sprintf("   (%d more waiting)", n-1))
		}
		return []string{lines[0], fit(opts, w), fit("", w)}
	}
	return append([]string{rule("", w)}, m.inputLines()...)
}

func (m *Model) inputLines() []string {
	lines := strings.Split(m.input.View(), "\n")
	out := make([]string, inputHeight)
	for i := range out {
		if i < len(lines) {
			out[i] = fit(lines[i], m.width)
		} else {
			out[i] = fit("", m.width)
		}
	}
	return out
}

// statusLine is the spinner with what the lead does, and team-wide counts.
func (m *Model) statusLine() string {
	now := m.now()
	c := m.team.Counts()
	lead := m.lead()
	var parts []string
	switch {
	case lead.InTurn:
		p := fmt.Sprintf("%s lead %s %s", m.spin.View(), lead.Doing, elapsed(now.Sub(lead.DoingSince)))
		if turn := now.Sub(lead.TurnSince); turn-now.Sub(lead.DoingSince) >= time.Second {
			p += sDim.Render(" (turn " + elapsed(turn) + ")")
		}
		parts = append(parts, p)
	case c.Working > 0 && m.finished == nil:
		parts = append(parts, fmt.Sprintf("%s %d working", m.spin.View(), c.Working))
	case m.finished != nil:
		parts = append(parts, sOK.Render("✓ finished"))
	default:
		parts = append(parts, sDim.Render("ready"))
	}
	if c.Total > 0 {
		parts = append(parts, fmt.Sprintf("tasks %d/%d", c.Done, c.Total))
	}
	members := fmt.Sprintf("%d working %d idle", c.Working, c.Idle)
	if c.Waiting > 0 {
		members += " " + sWarn.Render(fmt.Sprintf("%d waiting", c.Waiting))
	}
	parts = append(parts, members, tokens(c.Tokens)+" tok")
	if m.rules != "" {
		parts = append(parts, m.rules)
	}
	// The mode comes first, so that a narrow terminal never cuts it off.
	left := " " + modeLabel(m.mode) + sDim.Render(" · ") + strings.Join(parts, sDim.Render(" · "))
	hint := "⇧Tab mode · Esc stop · /help"
	if m.demo {
		hint = ""
	}
	gap := m.width - ansi.StringWidth(left) - ansi.StringWidth(hint) - 1
	if gap < 1 || hint == "" {
		return left
	}
	return left + strings.Repeat(" ", gap) + sDim.Render(hint)
}

// modeLabel shows the lead's permission mode; the looser ones stand out.
func modeLabel(mode string) string {
	switch mode {
	case "bypassPermissions":
		return sWarn.Render("⏵⏵ " + mode)
	case "acceptEdits":
		return sWarn.Render("⏵⏵ " + mode)
	case "plan":
		return sAccent.Render("⏸ " + mode)
	}
	return "mode " + mode
}

// sideLines is the members panel.
func (m *Model) sideLines(h int) []string {
	sw := m.sideWidth()
	if sw == 0 {
		return nil
	}
	title := " TEAM"
	if name := m.team.Team(); name != "" {
		title += " " + name
	}
	lines := []string{sBold.Render(fit(title, sw)), ""}
	roster := m.team.Roster()
	for i, mem := range roster {
		if len(lines)+2 > h && i < len(roster) {
			lines[len(lines)-1] = sDim.Render(fmt.Sprintf(" +%d more (/team)", len(roster)-i+1))
			break
		}
		glyph, word, style := statusLook(mem.Status)
		nameW := sw - 3 - ansi.StringWidth(word) - 1
		head := " " + style.Render(glyph) + " " + fit(sBold.Render(text.OneLine(mem.Name, nameW)), nameW) + " " + style.Render(word)
		detail := mem.Role
		if mem.Task != "" {
			detail = "#" + mem.Task + " " + mem.Subject
		}
		if mem.Tool != "" && mem.Status == store.StatusWorking {
			detail = "⚙ " + mem.Tool
		}
		tok := tokens(mem.Tokens)
		dw := sw - 4 - ansi.StringWidth(tok)
		lines = append(lines, head, "   "+fit(sDim.Render(text.OneLine(detail, dw)), dw)+" "+sDim.Render(tok))
	}
	return lines
}

func statusLook(status string) (glyph, word string, style lipgloss.Style) {
	switch status {
	case store.StatusWorking:
		return "●", "working", sOK
	case store.StatusIdle:
		return "○", "idle", sDim
	case teamview.StatusWaiting:
		return "⚑", "waiting", sWarn
	case store.StatusShutdown:
		return "·", "shut down", sDim
	case teamview.StatusDead:
		return "✗", "dead", sErr
	}
	return "◌", status, sDim
}

// chatLines is the conversation with the lead.
func (m *Model) chatLines() []string {
	w := m.mainWidth() - 1
	var out []string
	entries := m.entries()
	if len(entries) == 0 {
		out = append(out, "")
		out = append(out, strings.Split(sDim.Render(wrap("Tell the lead what you want done. It creates a team, puts tasks on the board and spawns teammates; they appear on the right. @name messages a teammate, /tasks shows the board, /help lists everything.", w)), "\n")...)
		if m.demo {
			out = []string{"", sDim.Render("The demo starts…")}
		}
		return out
	}
	var prev entryKind = -1
	for i := range entries {
		e := &entries[i]
		if !(e.kind == entryTool && (prev == entryTool || prev == entryToolErr)) && !(e.kind == entryToolErr && prev == entryTool) {
			out = append(out, "")
		}
		prev = e.kind
		switch e.kind {
		case entryUser:
			out = append(out, prefixed(sUser.Render("› "), "  ", wrap(e.text, w-2), sUser)...)
		case entryToMember:
			out = append(out, prefixed(sUser.Render("› @"+e.who+" "), "  ", wrap(e.text, w-2-len(e.who)-2), sUser)...)
		case entryLead:
			out = append(out, m.md.render(e, w)...)
		case entryTool:
			out = append(out, sDim.Render("  ⚙ "+text.OneLine(e.text, w-4)))
		case entryToolErr:
			out = append(out, prefixed(sErr.Render("  ✗ "), "    ", wrap(e.text, w-4), sErr)...)
		case entryFromTeam:
			out = append(out, sAccent.Render("✉ "+e.who+" → team-lead"))
			out = append(out, prefixed(sDim.Render("│ "), sDim.Render("│ "), wrap(e.text, w-2), lipgloss.NewStyle())...)
		case entryRequest:
			out = append(out, prefixed(sWarn.Render("⚑ "+e.who+" "), "  ", wrap(e.text, w-2), lipgloss.NewStyle())...)
		case entryNote:
			out = append(out, prefixed(sDim.Render("· "), "  ", wrap(e.text, w-2), sDim)...)
		case entryError:
			out = append(out, prefixed(sErr.Render("✗ "), "  ", wrap(e.text, w-2), sErr)...)
		}
	}
	m.md.prune(entries)
	return out
}

// prefixed puts first before the first line of text and rest before the
// others, styling the text.
func prefixed(first, rest, text string, style lipgloss.Style) []string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		p := rest
		if i == 0 {
			p = first
		}
		lines[i] = p + style.Render(l)
	}
	return lines
}

// tasksLines is the board.
func (m *Model) tasksLines() []string {
	w := m.mainWidth() - 1
	board := m.team.Board()
	tasks := board.Tasks
	c := m.team.Counts()
	out := []string{"", sBold.Render(fmt.Sprintf(" TASK BOARD · %d/%d done", c.Done, c.Total)), ""}
	if len(tasks) == 0 && len(board.Corrupt) == 0 {
		return append(out, sDim.Render(wrap(" No tasks yet. The lead puts them on the board as it plans the work.", w)))
	}
	rightW := min(18, w/3)
	for _, t := range tasks {
		glyph, style := "○", sDim
		right := "pending"
		switch {
		case t.Status == store.TaskCompleted:
			glyph, style, right = "✓", sOK, "done"
		case t.Status == store.TaskInProgress:
			glyph, style, right = "●", sWarn, "in progress"
		case len(t.BlockedBy) > 0:
			glyph, right = "◌", "waits for #"+strings.Join(t.BlockedBy, ",#")
		}
		if t.Owner != "" {
			right = t.Owner
			if t.Status == store.TaskCompleted {
				right += " ✓"
			}
		}
		left := fmt.Sprintf(" %s #%s %s", style.Render(glyph), t.ID, t.Subject)
		out = append(out, fit(left, w-rightW-1)+" "+sDim.Render(fit(text.OneLine(right, rightW), rightW)))
	}
	for _, c := range board.Corrupt {
		out = append(out, prefixed(sErr.Render(" ✗ "), "   ", wrap(fmt.Sprintf("#%s corrupt: %s (%s)", c.ID, c.Err, c.Path), w-3), sErr)...)
	}
	out = append(out, "", sDim.Render(" ○ pending  ◌ blocked  ● in progress  ✓ done  ✗ corrupt"))
	return append(out, m.mergeLines(w)...)
}

// mergeLines is the merge queue of teammates in worktrees, in completion
// order, under the board (nothing when no task went through it).
func (m *Model) mergeLines(w int) []string {
	q := m.team.MergeQueue()
	if len(q) == 0 {
		return nil
	}
	waiting := 0
	for _, e := range q {
		if e.Status == "queued" {
			waiting++
		}
	}
	out := []string{"", sBold.Render(fmt.Sprintf(" MERGE QUEUE · %d waiting", waiting)), ""}
	rightW := min(24, w/3)
	for _, e := range q {
		glyph, style, right := "…", sWarn, "queued"
		switch e.Status {
		case "merged":
			glyph, style, right = "✓", sOK, "merged"
			if e.How != "" {
				right += ", " + e.How
			}
		case "conflict":
			glyph, style, right = "✗", sErr, "conflict → "+e.Owner
		case "failed":
			glyph, style, right = "✗", sErr, "failed"
		case "no changes":
			glyph, style, right = "–", sDim, "no changes"
		}
		left := fmt.Sprintf(" %s #%s %s (%s)", style.Render(glyph), e.Task, e.Branch, e.Subject)
		out = append(out, fit(left, w-rightW-1)+" "+sDim.Render(fit(text.OneLine(right, rightW), rightW)))
		if len(e.Files) > 0 {
			out = append(out, sDim.Render(fit("     in "+strings.Join(e.Files, ", "), w)))
		}
		if e.Error != "" {
			out = append(out, sErr.Render(fit("     "+text.OneLine(e.Error, w-5), w)))
		}
	}
	return out
}

// teamLines is the roster in full and the timeline of what members did and
// told each other.
func (m *Model) teamLines() []string {
	w := m.mainWidth() - 1
	out := []string{"", sBold.Render(" MEMBERS")}
	for _, mem := range m.team.Roster() {
		_, word, style := statusLook(mem.Status)
		task := ""
		if mem.Task != "" {
			task = "#" + mem.Task
		}
		role := mem.Role
		if mem.Name == store.LeadName {
			role = "lead"
		}
		line := fmt.Sprintf(" %s %s %s %s %s", fit(mem.Name, 12), fit(text.OneLine(role, 10), 10), style.Render(fit(word, 9)), fit(task, 4), tokens(mem.Tokens)+" tok"+cacheNote(mem))
		out = append(out, fit(line, w))
	}
	out = append(out, "", sBold.Render(" TIMELINE"))
	timeline := m.timeline()
	if len(timeline) == 0 {
		out = append(out, sDim.Render(" Nothing yet."))
	}
	for _, e := range timeline {
		head := sDim.Render(" "+e.At.Local().Format("15:04:05")) + " " + sAccent.Render(fit(e.Who, 10)) + " "
		body := wrap(e.Text, w-21)
		out = append(out, prefixed(head, strings.Repeat(" ", 21), body, lipgloss.NewStyle())...)
	}
	return out
}

func (m *Model) inboxLines() []string {
	w := m.mainWidth() - 1
	out := []string{"", sBold.Render(fmt.Sprintf(" INBOX %s · %d waiting", m.inboxName, len(m.inbox)))}
	if len(m.inbox) == 0 {
		out = append(out, sDim.Render(" Empty: everything sent to "+m.inboxName+" has been read."))
	}
	for _, msg := range m.inbox {
		head := fmt.Sprintf(" %s %s → %s", msg.Timestamp.Local().Format("15:04:05"), msg.From, msg.To)
		if msg.Type != store.TypeMessage {
			head += " [" + msg.Type + "]"
		}
		out = append(out, "", sAccent.Render(text.OneLine(head, w)))
		out = append(out, prefixed("   ", "   ", wrap(msg.Content, w-3), lipgloss.NewStyle())...)
	}
	return out
}

func (m *Model) helpLines() []string {
	w := m.mainWidth() - 1
	rows := [][2]string{
		{"text", "goes to the lead"},
		{"@name text", "goes straight to a teammate"},
		{"/tasks", "the task board"},
		{"/team", "members and the timeline of what they did and said"},
		{"/inbox [name]", "messages waiting for a member (default the lead)"},
		{"/compact [focus]", "summarise the lead's conversation to free context"},
		{"/help", "this list"},
		{"/quit", "stop the team and leave (also ctrl+c)"},
		{"Enter", "send · alt+enter or ctrl+j: new line"},
		{"Esc", "stop the lead's turn; back to the chat"},
		{"Tab", "chat → tasks → team"},
		{"Shift+Tab", "the lead's permission mode: default → acceptEdits → plan"},
		{"PgUp/PgDn", "scroll"},
		{"y / n / f", "answer a request: allow, deny, deny with feedback"},
	}
	for _, c := range m.commands {
		rows = append(rows, [2]string{strings.TrimSpace("/" + c.Name + " " + c.ArgumentHint), text.OneLine(c.Description, w)})
	}
	out := []string{"", sBold.Render(" COMMANDS AND KEYS")}
	for _, r := range rows {
		out = append(out, fit(" "+sAccent.Render(fit(r[0], 17))+" "+r[1], w))
	}
	return out
}

// fit truncates or pads s to exactly w cells.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if ansi.StringWidth(s) > w {
		s = ansi.Truncate(s, w, "…")
	}
	if n := w - ansi.StringWidth(s); n > 0 {
		s += strings.Repeat(" ", n)
	}
	return s
}

// rule is a horizontal line with text in it.
func rule(text string, w int) string {
	line := "─" + text
	if n := w - ansi.StringWidth(line); n > 0 {
		line += strings.Repeat("─", n)
	}
	return sDim.Render(fit(line, w))
}

func wrap(s string, w int) string {
	if w < 4 {
		w = 4
	}
	return ansi.Wrap(strings.TrimRight(s, "\n"), w, "")
}

// elapsed formats a duration the way a person reads it: 4s, 1m05s.
func elapsed(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Minute {
		return fmt.Sprintf("%ds", int(d.Seconds()))
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// cacheNote is a member's prompt-cache hit ratio beside its tokens, once
// it has made a call: the share of its input read from the cache.
func cacheNote(mem teamview.Member) string {
	if mem.InputTokens == 0 {
		return ""
	}
	return fmt.Sprintf(", %.0f%% cached", 100*mem.CacheHitRatio())
}

// tokens formats a token count: 950, 12.3k, 1.2M.
func tokens(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 10_000:
		return fmt.Sprintf("%dk", n/1000)
	case n >= 1000:
		return fmt.Sprintf("%.1fk", float64(n)/1000)
	}
	return fmt.Sprint(n)
}
