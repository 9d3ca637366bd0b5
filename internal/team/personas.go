package team

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/pattern"
	"github.com/troupe-dev/troupe/internal/persona"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// formation is what TeamCreate decides from seed 004's rules: the pattern
// and, when it plays characters, the theme and its cast.
type formation struct {
	pattern  string          // the name recorded ("" : none)
	pat      pattern.Pattern // its definition when known
	known    bool
	theme    persona.Theme
	cast     []persona.Character
	recent   []persona.Entry // the theme history read at formation
	histNote string          // why the history could not be read
}

// themed reports whether the team plays characters.
func (f formation) themed() bool { return len(f.cast) > 0 }

// form applies the pattern (the one asked, else the configured default,
// else fixed-theme) and, for a pattern with personas, picks the theme: the
// one the lead or user named, or, when the workspace has themes of its
// own, the one least recently used in the history. The built-in example
// theme is played only when named, so a workspace that never set up
// themes gets no characters unasked.
func (r *Rules) form(askedPattern, askedTheme string, characters []string) (formation, error) {
	var f formation
	f.pattern = strings.TrimSpace(askedPattern)
	if f.pattern == "" && r != nil {
		f.pattern = r.DefaultPattern
	}
	if r == nil || r.Patterns == nil {
		return f, nil
	}
	if f.pattern == "" {
		f.pattern = pattern.DefaultName
	}
	f.pat, f.known = r.Patterns.Lookup(f.pattern)
	if f.known {
		f.pattern = f.pat.Name
	}
	if r.Themes == nil || (!f.known && askedTheme == "") || (f.known && !f.pat.Personas && askedTheme == "") {
		return f, nil
	}
	if strings.TrimSpace(askedTheme) == "" && len(characters) == 0 && !r.Themes.HasUser() {
		return f, nil
	}
	if hist, err := r.History.Read(); err != nil {
		f.histNote = err.Error()
	} else {
		f.recent = hist
	}
	th, err := r.Themes.Pick(askedTheme, f.recent)
	if err != nil {
		return f, err
	}
	n := f.pat.MaxSize
	if n == 0 {
		n = f.pat.Size + 1
	}
	cast, err := persona.Cast(th, characters, n, f.recent)
	if err != nil {
		return f, err
	}
	// The lead plays the theme's lead character when one is cast.
	for i, c := range cast {
		if strings.EqualFold(c.Role, "lead") && i > 0 && !namedFirst(characters) {
			cast[0], cast[i] = cast[i], cast[0]
			break
		}
	}
	f.theme, f.cast = th, cast
	return f, nil
}

// teammatesText is how many teammates a pattern wants ("3-5 teammates").
func teammatesText(p pattern.Pattern) string {
	switch {
	case p.MinSize > 0 && p.MaxSize > p.MinSize:
		return fmt.Sprintf("%d-%d teammates", p.MinSize-1, p.MaxSize-1)
	case p.MinSize > 0:
		return fmt.Sprintf("%d teammates", p.MinSize-1)
	}
	return fmt.Sprintf("%d teammates", p.Size)
}

func namedFirst(characters []string) bool {
	return len(characters) > 0 && strings.TrimSpace(characters[0]) != ""
}

// roster returns the team's recorded pattern, theme and cast, the lead
// playing the first character.
func (f formation) roster(r *store.Roster) {
	r.Pattern = f.pattern
	if !f.themed() {
		return
	}
	r.Theme = f.theme.Name
	for i, c := range f.cast {
		p := store.Persona{Name: c.Name, Role: c.Role, Voice: c.Voice}
		if i == 0 {
			p.Member = store.LeadName
		}
		r.Personas = append(r.Personas, p)
	}
}

// describe is what TeamCreate tells the lead of the team's rules: the
// pattern, its size and roles, whether the lead may work, the cast and
// how to play it.
func (f formation) describe() string {
	var b strings.Builder
	switch {
	case f.pattern == "":
	case !f.known:
		fmt.Fprintf(&b, "\nPattern %q is not known, so it enforces nothing (your tools stay as they are).", f.pattern)
	default:
		p := f.pat
		fmt.Fprintf(&b, "\nPattern %s: %s Team size: %s, you included: spawn %s.", p.Name, p.Description, p.SizeText(), teammatesText(p))
		var roles []string
		for _, ro := range p.Roles {
			roles = append(roles, ro.Name)
		}
		if len(roles) > 0 {
			fmt.Fprintf(&b, " Roles: %s.", strings.Join(roles, ", "))
		}
		if p.ManageOnly() {
			b.WriteString(" You only manage: you break the work down, assign it and report; your editing and command tools are refused (delegate mode). Teammates do all the work.")
		} else {
			b.WriteString(" You may work too, alongside the teammates.")
		}
	}
	if !f.themed() {
		return b.String()
	}
	title := f.theme.Name
	if f.theme.Title != "" {
		title = f.theme.Title + " (" + f.theme.Name + ")"
	}
	fmt.Fprintf(&b, "\nTheme: %s. You play %s", title, f.cast[0].Name)
	if f.cast[0].Voice != "" {
		fmt.Fprintf(&b, " (voice: %s)", f.cast[0].Voice)
	}
	b.WriteString(". The characters for your teammates, given in spawn order (each teammate is told its own):")
	for _, c := range f.cast[1:] {
		fmt.Fprintf(&b, "\n- %s", c.Name)
		if c.Role != "" {
			fmt.Fprintf(&b, " (%s)", c.Role)
		}
		if c.Voice != "" {
			fmt.Fprintf(&b, ": %s", c.Voice)
		}
	}
	b.WriteString("\n" + characterRules)
	if len(f.recent) > 0 {
		fmt.Fprintf(&b, "\nRecently used (avoid them next time): %s.", recentText(f.recent, 3))
	}
	return b.String()
}

// characterRules are seed 004's rules of playing characters.
const characterRules = `Stay in character in everything you say to the user and the teammates, plain acknowledgements too ("waiting", "checking"): that is where characters slip. Messages still go to internal names ("team-lead", the teammate's name), never to a character's. No character name or theme word may reach a commit message, a file, a PR or issue text: the runtime refuses them (CLAUDE.md, .claude/team-themes/ and docs/specs/agentic/teams/ excepted).`

func recentText(h []persona.Entry, n int) string {
	var out []string
	for i, e := range h {
		if i == n {
			break
		}
		s := e.Theme
		if len(e.Characters) > 0 {
			s += " (" + strings.Join(e.Characters, ", ") + ")"
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}

// record puts the formed team first in the theme history: seed 004 writes
// it when the team is formed, so the next lead avoids it. A team that plays
// no characters has nothing to avoid and is not written: the history is the
// user's, outside the workspace, and stays about themes.
func (r *Rules) record(f formation, team, workspace string) error {
	if r == nil || r.History == nil || !f.themed() {
		return nil
	}
	e := persona.Entry{Pattern: f.pattern, Theme: f.theme.Name, Team: team, Workspace: workspace, Time: time.Now().UTC()}
	for i, c := range f.cast {
		e.Characters = append(e.Characters, c.Name)
		if i == 0 {
			e.Lead = c.Name
		}
	}
	return r.History.Prepend(e)
}

// playTheme adds the words of the theme a team plays to the artifact guard
// for this run ("": the team is gone, they are taken off).
func (r *Rules) playTheme(name string, cast []store.Persona) {
	if r == nil || r.Guard == nil {
		return
	}
	if name == "" {
		r.Guard.SetRunWords(nil)
		return
	}
	var words []string
	if th, ok := r.Themes.Lookup(name); ok {
		words = th.GuardWords()
	}
	for _, p := range cast {
		words = append(words, p.Name)
	}
	r.Guard.SetRunWords(words)
}

// castMember gives member the first free persona of the roster, one cast
// for its role preferred; false when the team plays none or all are taken.
func castMember(r *store.Roster, member, role string) (store.Persona, bool) {
	if p, ok := r.PersonaOf(member); ok {
		return p, true
	}
	free := -1
	for i, p := range r.Personas {
		if p.Member != "" {
			continue
		}
		if free < 0 {
			free = i
		}
		if role != "" && strings.EqualFold(p.Role, role) {
			free = i
			break
		}
	}
	if free < 0 {
		return store.Persona{}, false
	}
	r.Personas[free].Member = member
	return r.Personas[free], true
}

// releasePersona frees the persona a member played, so that a teammate
// spawned again under another name can play it.
func releasePersona(r *store.Roster, member string) {
	for i := range r.Personas {
		if r.Personas[i].Member == member {
			r.Personas[i].Member = ""
		}
	}
}

// personaInstructions is what a teammate playing p is told.
func personaInstructions(p store.Persona, lead store.Persona) string {
	s := fmt.Sprintf("You play the character %s", p.Name)
	if p.Voice != "" {
		s += " (voice: " + p.Voice + ")"
	}
	s += "."
	if lead.Name != "" {
		s += fmt.Sprintf(" The lead plays %s.", lead.Name)
	}
	return s + " " + characterRules
}

// teammatePersona is the persona section of member's prompt ("": none).
func teammatePersona(r store.Roster, member string) string {
	p, ok := r.PersonaOf(member)
	if !ok {
		return ""
	}
	lead, _ := r.PersonaOf(store.LeadName)
	return personaInstructions(p, lead)
}

// leadRules is the part of the lead's system prompt that says which
// pattern a team gets unless it names another, which themes there are and
// which were used recently. It is made once, when the session starts, so
// the prompt stays the same between turns.
func (r *Rules) leadRules() string {
	if r == nil || r.Patterns == nil {
		return ""
	}
	var b strings.Builder
	def := r.DefaultPattern
	if def == "" {
		def = pattern.DefaultName
	}
	if p, ok := r.Patterns.Lookup(def); ok {
		def = p.Name
	}
	b.WriteString("Team patterns (give TeamCreate a pattern, or the default applies):")
	for _, p := range r.Patterns.All() {
		lead := "you may work too"
		if p.ManageOnly() {
			lead = "you only manage"
		}
		mark := ""
		if p.Name == def {
			mark = " (default)"
		}
		fmt.Fprintf(&b, "\n- %s%s: %s; %s.", p.Name, mark, p.SizeText(), lead)
	}
	if names := r.Themes.Names(); len(names) > 0 {
		fmt.Fprintf(&b, "\nPersona themes (TeamCreate theme, and characters if you or the user choose them): %s.", strings.Join(names, ", "))
		if h, err := r.History.Read(); err == nil && len(h) > 0 {
			fmt.Fprintf(&b, " Recently used, newest first (prefer others): %s.", recentText(h, 3))
		}
	}
	return b.String()
}

// announcements are the tasks a teammate has told the lead it takes: seed
// 004 has a member report its intent before it claims a task itself.
type announcements struct {
	mu  sync.Mutex
	ids map[string]bool
}

// note records the tasks a message to the lead names ("#3", "task 3").
func (a *announcements) note(content string) {
	ids := taskRefs(content)
	if len(ids) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ids == nil {
		a.ids = map[string]bool{}
	}
	for _, id := range ids {
		a.ids[id] = true
	}
}

func (a *announcements) has(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ids[id]
}

// taskRefs finds the task ids a text names as "#N" or "task N".
func taskRefs(text string) []string {
	var out []string
	fields := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return r == ' ' || r == '\n' || r == '\t' || r == ',' || r == '.' || r == ':' || r == ';' || r == '(' || r == ')' || r == '!' || r == '?'
	})
	digits := func(s string) bool {
		if s == "" {
			return false
		}
		for _, r := range s {
			if r < '0' || r > '9' {
				return false
			}
		}
		return true
	}
	for i, f := range fields {
		switch {
		case strings.HasPrefix(f, "#") && digits(f[1:]):
			out = append(out, f[1:])
		case f == "task" && i+1 < len(fields) && digits(fields[i+1]): // "task #4" is found by its "#4"
			out = append(out, fields[i+1])
		}
	}
	return out
}

// claimNoticeSummary starts the summary of the runtime's own "I am taking
// task #N" to the lead.
const claimNoticeSummary = "taking task #"

// claimNotice reports whether m is the runtime's notice that a teammate
// takes a task: the lead reads it with its next wake, as it reads idle
// notifications, rather than spending a turn on each claim.
func claimNotice(m store.Message) bool {
	return m.Type == store.TypeMessage && m.TaskID != "" && m.Summary == claimNoticeSummary+m.TaskID
}

// announceClaim tells the lead, as the teammate, that it takes task t,
// unless it already said so: the claim then never reaches the board before
// the lead has heard of it.
func (b *binding) announceClaim(ctx context.Context, t store.Team, task store.Task) error {
	ev, err := b.announceClaimLater(ctx, t, task)
	if ev != nil {
		b.em.emit(ctx, t, ev)
	}
	return err
}

// announceClaimLater is announceClaim with the message's journal event
// handed back instead of journaled (nil when nothing was sent): an idle
// claim journals it with the claim that follows, in one append.
func (b *binding) announceClaimLater(ctx context.Context, t store.Team, task store.Task) (teamevent.Event, error) {
	if b.lead || b.announced.has(task.ID) {
		return nil, nil
	}
	sent, err := t.Mailbox().Send(ctx, store.Message{Type: store.TypeMessage, From: b.self, To: store.LeadName, TaskID: task.ID,
		Content: fmt.Sprintf("I am taking task #%s (%s), which is in my area.", task.ID, task.Subject), Summary: claimNoticeSummary + task.ID})
	if err != nil {
		return nil, err
	}
	b.announced.note("#" + task.ID)
	return teamevent.Sent(sent), nil
}
