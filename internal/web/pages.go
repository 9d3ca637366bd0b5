package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/teamview"
)

// Handler returns the dashboard's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /static/", assets())
	mux.HandleFunc("/login", s.login)
	mux.HandleFunc("GET /{$}", s.teams)
	for _, kind := range []string{"t", "a"} {
		archive := kind == "a"
		ref := func(r *http.Request) teamRef { return teamRef{Archive: archive, Name: r.PathValue("team")} }
		mux.HandleFunc("GET /"+kind+"/{team}", func(w http.ResponseWriter, r *http.Request) { s.team(w, r, ref(r)) })
		mux.HandleFunc("GET /"+kind+"/{team}/timeline", func(w http.ResponseWriter, r *http.Request) { s.timeline(w, r, ref(r)) })
		mux.HandleFunc("GET /"+kind+"/{team}/transcript/{member}", func(w http.ResponseWriter, r *http.Request) { s.transcript(w, r, ref(r)) })
		mux.HandleFunc("GET /"+kind+"/{team}/events", func(w http.ResponseWriter, r *http.Request) { s.events(w, r, ref(r)) })
	}
	mux.HandleFunc("POST /t/{team}/answer", s.action(s.answer))
	mux.HandleFunc("POST /t/{team}/send", s.action(s.send))
	mux.HandleFunc("POST /t/{team}/stop", s.action(s.stop))
	return s.secure(mux)
}

// page is what every page's layout needs.
type page struct {
	Title   string
	Ref     *teamRef
	Stream  string // the page's event stream, if live
	Actions bool
	CSRF    string
}

type loginPage struct {
	page
	Failed bool
}

func (s *Server) pageFor(r *http.Request, title string, ref *teamRef) page {
	p := page{Title: title, Ref: ref}
	if s.cfg.Actions && ref != nil && !ref.Archive {
		if w := s.auth.identify(r); w.authed() {
			p.Actions, p.CSRF = true, w.csrf
		}
	}
	return p
}

func (s *Server) fail(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, store.ErrTeamNotFound), errors.Is(err, store.ErrArchiveNotFound), errors.Is(err, errNotFound):
		code = http.StatusNotFound
	case errors.Is(err, errBadName):
		code = http.StatusBadRequest
	}
	http.Error(w, err.Error(), code)
}

var (
	errNotFound = errors.New("not found")
	errBadName  = errors.New("bad name")
)

// --- the team list ---

type teamsPage struct {
	page
	Live     []store.Roster
	Corrupt  []store.Corrupt
	Archives []store.Archive
}

func (s *Server) teams(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	list, err := s.cfg.Store.Teams(ctx)
	if err != nil {
		s.fail(w, err)
		return
	}
	p := teamsPage{page: s.pageFor(r, "teams", nil), Live: list.Rosters, Corrupt: list.Corrupt}
	seen := map[string]bool{}
	add := func(as []store.Archive) {
		for _, a := range as {
			if !seen[a.ID] {
				seen[a.ID] = true
				p.Archives = append(p.Archives, a)
			}
		}
	}
	for _, ro := range list.Rosters {
		if as, err := s.cfg.Store.Archives(ctx, ro.Name); err == nil {
			add(as)
		}
	}
	if s.cfg.ArchiveIDs != nil {
		ids, _ := s.cfg.ArchiveIDs(ctx)
		names := map[string]bool{}
		for _, id := range ids {
			if t, err := s.cfg.Store.OpenArchive(ctx, id); err == nil {
				names[t.Name()] = true
			}
		}
		for n := range names {
			if as, err := s.cfg.Store.Archives(ctx, n); err == nil {
				add(as)
			}
		}
	}
	slices.SortFunc(p.Archives, func(a, b store.Archive) int { return b.ArchivedAt.Compare(a.ArchivedAt) })
	_ = s.pages.render(w, "teams", p)
}

// --- one team ---

type column struct {
	Status, Title string
	Tasks         []card
}

// card is a task on the board with the tasks it waited for that no longer
// block it (BlockedBy holds those that still do).
type card struct {
	store.Task
	After []dep
}

type dep struct {
	ID   string
	Done bool
}

// teamPage is the overview: counts, pending requests, roster, board,
// usage. Its fragments are what the overview's stream sends.
type teamPage struct {
	page
	Gone      bool
	State     string
	Counts    teamview.Counts
	Pending   []teamview.Pending
	Roster    []teamview.Member
	Names     []string
	Columns   []column
	Corrupt   []store.Corrupt
	Merges    []teamview.MergeEntry
	Graph     template.HTML
	Chart     template.HTML
	UsageRows []usageRow
}

func (s *Server) teamData(p page, v *teamview.View, deps map[[2]string]bool, gone bool) teamPage {
	d := teamPage{page: p, Gone: gone, State: v.State(), Counts: v.Counts(), Roster: v.Roster()}
	for _, pr := range v.Pending(false) {
		if pr.Kind == teamevent.ProtocolPlanRequest || pr.Kind == teamevent.ProtocolPermission {
			d.Pending = append(d.Pending, pr)
		}
	}
	for _, m := range d.Roster {
		if m.Status != store.StatusShutdown {
			d.Names = append(d.Names, m.Name)
		}
	}
	b := v.Board()
	d.Corrupt = b.Corrupt
	d.Merges = v.MergeQueue()
	for _, c := range []column{{Status: store.TaskPending, Title: "pending"}, {Status: store.TaskInProgress, Title: "in progress"}, {Status: store.TaskCompleted, Title: "completed"}} {
		for _, t := range b.Column(c.Status) {
			cd := card{Task: t}
			for _, x := range b.Tasks {
				if deps[[2]string{x.ID, t.ID}] && !slices.Contains(t.BlockedBy, x.ID) {
					cd.After = append(cd.After, dep{ID: x.ID, Done: x.Status == store.TaskCompleted})
				}
			}
			c.Tasks = append(c.Tasks, cd)
		}
		d.Columns = append(d.Columns, c)
	}
	d.Graph = depGraph(b.Tasks, deps)
	order := make([]string, 0, len(d.Roster))
	for _, m := range d.Roster {
		order = append(order, m.Name)
	}
	d.Chart, d.UsageRows = usageChart(v.Usage(""), order)
	return d
}

func (s *Server) team(w http.ResponseWriter, r *http.Request, ref teamRef) {
	h, err := s.hub(r.Context(), ref)
	if err != nil {
		s.fail(w, err)
		return
	}
	p := s.pageFor(r, ref.Name, &ref)
	if !ref.Archive { // an archive does not change
		p.Stream = ref.Path() + "/events?view=overview"
	}
	var d teamPage
	h.read(func(v *teamview.View, _ int, gone bool) { d = s.teamData(p, v, h.depsLocked(), gone) })
	_ = s.pages.render(w, "team", d)
}

// --- the timeline ---

// maxEntries bounds the entries a timeline page shows (the newest).
const maxEntries = 500

type timelinePage struct {
	page
	Member, Type string
	Names, Types []string
	Entries      []teamview.Entry
	Cut          int
}

func (s *Server) timelineData(p page, v *teamview.View, q url.Values) timelinePage {
	d := timelinePage{page: p, Member: q.Get("member"), Type: q.Get("type"), Types: teamevent.Types()}
	for _, m := range v.Roster() {
		d.Names = append(d.Names, m.Name)
	}
	if !slices.Contains(d.Names, store.HumanName) {
		d.Names = append(d.Names, store.HumanName)
	}
	f := teamview.Filter{Member: d.Member}
	if d.Type != "" {
		f.Types = []string{d.Type}
	}
	d.Entries = v.Timeline(f)
	if over := len(d.Entries) - maxEntries; over > 0 {
		d.Cut, d.Entries = over, d.Entries[over:]
	}
	return d
}

func (s *Server) timeline(w http.ResponseWriter, r *http.Request, ref teamRef) {
	h, err := s.hub(r.Context(), ref)
	if err != nil {
		s.fail(w, err)
		return
	}
	p := s.pageFor(r, ref.Name+" timeline", &ref)
	q := timelineQuery(r.URL.Query())
	if !ref.Archive { // an archive does not change
		p.Stream = ref.Path() + "/events?" + q.Encode()
	}
	var d timelinePage
	h.read(func(v *teamview.View, _ int, _ bool) { d = s.timelineData(p, v, q) })
	_ = s.pages.render(w, "timeline", d)
}

// timelineQuery keeps only the timeline's own parameters.
func timelineQuery(in url.Values) url.Values {
	q := url.Values{"view": {"timeline"}}
	if m := in.Get("member"); m != "" {
		q.Set("member", m)
	}
	if t := in.Get("type"); t != "" {
		q.Set("type", t)
	}
	return q
}

// --- a transcript ---

// maxTranscript bounds the transcript lines a page shows (the newest).
const maxTranscript = 400

type transcriptPage struct {
	page
	Member string
	Items  []item
}

// item is one message of a transcript; its parts are text (markdown for
// the model's, verbatim otherwise) and folded tool calls and results.
type item struct {
	Who, Class string
	At         time.Time
	Parts      []part
}

type part struct {
	Tool    bool
	Error   bool
	Summary string
	Body    string
	HTML    template.HTML
}

// transcriptLine is a transcript entry as the team writes it: a message of
// the conversation, or a marker (type spawn or compaction).
type transcriptLine struct {
	TS   time.Time `json:"ts"`
	Type string    `json:"type,omitempty"`
	llm.Message
}

// maxBody bounds a tool input or result shown in a fold.
const maxBody = 8000

func clip(s string) string {
	if len(s) > maxBody {
		return s[:maxBody] + fmt.Sprintf("\n… (%d more bytes)", len(s)-maxBody)
	}
	return s
}

func transcriptItems(lines []json.RawMessage, member string) []item {
	if over := len(lines) - maxTranscript; over > 0 {
		lines = lines[over:]
	}
	var out []item
	for _, raw := range lines {
		var l transcriptLine
		if err := json.Unmarshal(raw, &l); err != nil {
			continue // a foreign line: the rest still shows
		}
		switch l.Type {
		case "spawn":
			out = append(out, item{Who: "— spawned —", Class: "marker", At: l.TS})
			continue
		case "compaction":
			out = append(out, item{Who: "— compacted —", Class: "marker", At: l.TS})
			continue
		case "":
		default:
			continue
		}
		it := item{Who: member, Class: string(l.Role), At: l.TS}
		if l.Role == llm.RoleUser {
			it.Who = "to " + member
		}
		for _, b := range l.Content {
			switch b.Type {
			case llm.BlockText:
				if l.Role == llm.RoleAssistant {
					it.Parts = append(it.Parts, part{HTML: renderMarkdown(b.Text)})
				} else {
					it.Parts = append(it.Parts, part{Body: clip(b.Text)})
				}
			case llm.BlockToolUse:
				it.Parts = append(it.Parts, part{Tool: true, Summary: "⚙ " + teamview.ToolLine(b.Name, b.Input), Body: clip(indentJSON(b.Input))})
			case llm.BlockToolResult:
				sum := "↳ result"
				if b.IsError {
					sum = "↳ error"
				}
				if first, _, _ := strings.Cut(strings.TrimSpace(b.Content), "\n"); first != "" {
					sum += ": " + short(first, 100)
				}
				it.Parts = append(it.Parts, part{Tool: true, Error: b.IsError, Summary: sum, Body: clip(b.Content)})
			}
		}
		if len(it.Parts) > 0 {
			out = append(out, it)
		}
	}
	return out
}

func indentJSON(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

func (s *Server) transcriptData(ctx context.Context, p page, t store.Team, member string) (transcriptPage, error) {
	lines, err := t.Transcripts().Read(ctx, member)
	if err != nil {
		return transcriptPage{}, err
	}
	return transcriptPage{page: p, Member: member, Items: transcriptItems(lines, member)}, nil
}

func (s *Server) transcript(w http.ResponseWriter, r *http.Request, ref teamRef) {
	member := r.PathValue("member")
	if err := validName(member); err != nil {
		s.fail(w, fmt.Errorf("%w: %v", errBadName, err))
		return
	}
	h, err := s.hub(r.Context(), ref)
	if err != nil {
		s.fail(w, err)
		return
	}
	known := false
	h.read(func(v *teamview.View, _ int, _ bool) { _, known = v.Member(member) })
	if !known {
		s.fail(w, fmt.Errorf("member %s of %s: %w", member, ref.Name, errNotFound))
		return
	}
	p := s.pageFor(r, ref.Name+" "+member, &ref)
	if !ref.Archive { // an archive does not change
		p.Stream = ref.Path() + "/events?" + url.Values{"view": {"transcript"}, "member": {member}}.Encode()
	}
	d, err := s.transcriptData(r.Context(), p, h.t, member)
	if err != nil {
		s.fail(w, err)
		return
	}
	_ = s.pages.render(w, "transcript", d)
}
