package web

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/teamview"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// assets are the files under /static/: the only files the server serves.
func assets() http.Handler {
	sub, _ := fs.Sub(assetFS, "assets")
	return http.StripPrefix("/static/", http.FileServerFS(sub))
}

type pages struct{ t *template.Template }

func newPages() (*pages, error) {
	t, err := template.New("").Funcs(template.FuncMap{
		"stamp":    func(t time.Time) string { return stamp(t) },
		"clock":    func(t time.Time) string { return clock(t) },
		"tokens":   humanTokens,
		"usd":      func(f float64) string { return fmt.Sprintf("$%.4f", f) },
		"pct":      func(f float64) string { return fmt.Sprintf("%.0f%%", f*100) },
		"kindName": kindName,
	}).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("web: templates: %w", err)
	}
	return &pages{t: t}, nil
}

func (p *pages) render(w io.Writer, name string, data any) error {
	if rw, ok := w.(http.ResponseWriter); ok {
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
	}
	var b bytes.Buffer
	if err := p.t.ExecuteTemplate(&b, name, data); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

func (p *pages) fragment(name string, data any) string {
	var b strings.Builder
	if err := p.t.ExecuteTemplate(&b, name, data); err != nil {
		return "<p class=\"error\">" + template.HTMLEscapeString(err.Error()) + "</p>"
	}
	return b.String()
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Local().Format("2006-01-02 15:04")
}

func clock(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Local().Format("15:04:05")
}

func humanTokens(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 10_000:
		return fmt.Sprintf("%.0fk", float64(n)/1e3)
	case n >= 1000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

func kindName(k string) string {
	switch k {
	case teamevent.ProtocolPlanRequest:
		return "plan approval"
	case teamevent.ProtocolPermission:
		return "permission"
	}
	return strings.ReplaceAll(k, "_", " ")
}

// markdown renders model text. Raw HTML in it is dropped (goldmark's
// default, never WithUnsafe) and so are links to dangerous schemes
// (javascript:, vbscript:, file:, data: other than images).
var markdown = goldmark.New(goldmark.WithExtensions(extension.GFM),
	goldmark.WithParserOptions(parser.WithASTTransformers(util.Prioritized(imagesAsLinks{}, 100))))

// imagesAsLinks turns the model's images into links to them: a page shows
// no image a model chose, which could fetch anything or track a reader.
type imagesAsLinks struct{}

func (imagesAsLinks) Transform(doc *ast.Document, _ text.Reader, _ parser.Context) {
	var images []*ast.Image
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if img, ok := n.(*ast.Image); ok && entering {
			images = append(images, img)
		}
		return ast.WalkContinue, nil
	})
	for _, img := range images {
		link := ast.NewLink()
		link.Destination, link.Title = img.Destination, img.Title
		for c := img.FirstChild(); c != nil; {
			next := c.NextSibling()
			link.AppendChild(link, c)
			c = next
		}
		if parent := img.Parent(); parent != nil {
			parent.ReplaceChild(parent, img, link)
		}
	}
}

func renderMarkdown(src string) template.HTML {
	var b bytes.Buffer
	if err := markdown.Convert([]byte(src), &b); err != nil {
		return template.HTML("<pre>" + template.HTMLEscapeString(src) + "</pre>") //nolint:gosec // escaped
	}
	return template.HTML(b.String()) //nolint:gosec // goldmark without unsafe HTML
}

// --- the board's dependency graph ---

// depGraph draws the tasks as boxes in columns by depth (a task sits right
// of everything that blocks it) with an arrow from each blocker, coloured
// by status. Nil when no task depends on another.
func depGraph(tasks []store.Task, deps map[[2]string]bool) template.HTML {
	byID := map[string]store.Task{}
	for _, t := range tasks {
		byID[t.ID] = t
	}
	edges := map[[2]string]bool{}
	for e := range deps {
		_, a := byID[e[0]]
		_, b := byID[e[1]]
		if a && b {
			edges[e] = true
		}
	}
	if len(edges) == 0 {
		return ""
	}
	into := map[string][]string{}
	for e := range edges {
		into[e[1]] = append(into[e[1]], e[0])
	}
	depth := map[string]int{}
	var depthOf func(id string, seen map[string]bool) int
	depthOf = func(id string, seen map[string]bool) int {
		if d, ok := depth[id]; ok {
			return d
		}
		if seen[id] {
			return 0 // a cycle the store should have refused: draw it flat
		}
		seen[id] = true
		d := 0
		for _, p := range into[id] {
			d = max(d, depthOf(p, seen)+1)
		}
		depth[id] = d
		return d
	}
	cols := map[int][]string{}
	maxDepth := 0
	for _, t := range tasks {
		d := depthOf(t.ID, map[string]bool{})
		cols[d] = append(cols[d], t.ID)
		maxDepth = max(maxDepth, d)
	}
	const bw, bh, gx, gy, pad = 170, 34, 50, 12, 8
	pos := map[string][2]int{}
	rows := 0
	for d := 0; d <= maxDepth; d++ {
		ids := cols[d]
		sort.Slice(ids, func(i, j int) bool { return store.TaskNum(ids[i]) < store.TaskNum(ids[j]) })
		for i, id := range ids {
			pos[id] = [2]int{pad + d*(bw+gx), pad + i*(bh+gy)}
		}
		rows = max(rows, len(ids))
	}
	w, h := pad*2+(maxDepth+1)*(bw+gx)-gx, pad*2+rows*(bh+gy)-gy
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart deps-graph" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="task dependencies">`, w, h, w, h)
	b.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#868e96"/></marker></defs>`)
	keys := make([][2]string, 0, len(edges))
	for e := range edges {
		keys = append(keys, e)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return strings.Compare(a[0]+"/"+a[1], b[0]+"/"+b[1]) })
	for _, e := range keys {
		p, q := pos[e[0]], pos[e[1]]
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#868e96" stroke-width="1.5" marker-end="url(#arrow)"/>`,
			p[0]+bw, p[1]+bh/2, q[0], q[1]+bh/2)
	}
	for _, t := range tasks {
		p := pos[t.ID]
		fill, stroke := "#fff", "#adb5bd"
		switch t.Status {
		case store.TaskCompleted:
			fill, stroke = "#ebfbee", "#2f9e44"
		case store.TaskInProgress:
			fill, stroke = "#fff4e6", "#e8590c"
		}
		label := "#" + t.ID + " " + t.Subject
		if r := []rune(label); len(r) > 24 {
			label = string(r[:23]) + "…"
		}
		fmt.Fprintf(&b, `<a href="#task-%s"><rect x="%d" y="%d" width="%d" height="%d" rx="5" fill="%s" stroke="%s"/><text x="%d" y="%d">%s</text></a>`,
			template.HTMLEscapeString(t.ID), p[0], p[1], bw, bh, fill, stroke, p[0]+8, p[1]+bh/2+4, template.HTMLEscapeString(label))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // every text escaped above
}

// --- the usage chart ---

// usageRow is one member's usage: its calls, coordination and work
// tokens, cost.
type usageRow struct {
	Member             string
	Color              int
	Calls              int
	Coordination, Work int64
	Cost               float64
}

// usageChart draws each member's cumulative tokens over time (a line per
// member) and, beside it, one bar per member split into coordination and
// work tokens.
func usageChart(points []teamview.UsagePoint, order []string) (template.HTML, []usageRow) {
	if len(points) == 0 {
		return "", nil
	}
	colors := map[string]int{}
	for _, n := range order {
		if _, ok := colors[n]; !ok {
			colors[n] = len(colors) % 8
		}
	}
	rows := map[string]*usageRow{}
	var names []string
	t0, t1 := points[0].At, points[0].At
	var top int64 = 1
	for _, p := range points {
		if _, ok := colors[p.Member]; !ok {
			colors[p.Member] = len(colors) % 8
		}
		r, ok := rows[p.Member]
		if !ok {
			r = &usageRow{Member: p.Member, Color: colors[p.Member]}
			rows[p.Member] = r
			names = append(names, p.Member)
		}
		r.Calls++
		r.Cost += p.CostUSD
		if p.Kind == teamevent.UsageCoordination {
			r.Coordination += p.Tokens
		} else {
			r.Work += p.Tokens
		}
		if p.At.Before(t0) {
			t0 = p.At
		}
		if p.At.After(t1) {
			t1 = p.At
		}
		top = max(top, p.TotalTokens)
	}
	slices.SortFunc(names, func(a, b string) int { return colors[a] - colors[b] })
	const w, h, left, bottom, top0, lineW = 900, 230, 56, 24, 10, 560
	span := t1.Sub(t0).Seconds()
	if span <= 0 {
		span = 1
	}
	x := func(t time.Time) float64 { return left + (lineW-left-10)*t.Sub(t0).Seconds()/span }
	y := func(v int64) float64 { return float64(h-bottom) - float64(h-bottom-top0)*float64(v)/float64(top) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart usage-chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="tokens over time per member">`, w, h, w, h)
	// Axes and a few gridlines.
	for i := 0; i <= 4; i++ {
		v := top * int64(i) / 4
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e9ecef"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`,
			left, y(v), lineW-10, y(v), left-4, y(v)+4, humanTokens(v))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text><text x="%d" y="%d" text-anchor="end">%s</text>`,
		left, h-6, clock(t0), lineW-10, h-6, fmt.Sprintf("%s (+%s)", clock(t1), t1.Sub(t0).Round(time.Second)))
	for _, n := range names {
		var pts []string
		for _, p := range points {
			if p.Member == n {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.At), y(p.TotalTokens)))
			}
		}
		if len(pts) == 1 {
			pts = append(pts, pts[0])
		}
		fmt.Fprintf(&b, `<polyline class="series c%d" fill="none" stroke="%s" stroke-width="2" points="%s"><title>%s</title></polyline>`,
			colors[n], palette[colors[n]], strings.Join(pts, " "), template.HTMLEscapeString(n))
	}
	// Coordination vs work, one bar per member.
	bx := lineW + 20
	var most int64 = 1
	for _, r := range rows {
		most = max(most, r.Coordination+r.Work)
	}
	barH := math.Min(28, float64(h-top0-bottom)/float64(max(1, len(names)))-6)
	fmt.Fprintf(&b, `<text x="%d" y="%d">coordination</text><rect x="%d" y="%d" width="10" height="10" fill="#adb5bd"/><text x="%d" y="%d">work</text><rect x="%d" y="%d" width="10" height="10" fill="#495057"/>`,
		bx, top0+8, bx+76, top0, bx+100, top0+8, bx+132, top0)
	barMax := float64(w - bx - 90)
	for i, n := range names {
		r := rows[n]
		yy := float64(top0+18) + float64(i)*(barH+6)
		cw := barMax * float64(r.Coordination) / float64(most)
		ww := barMax * float64(r.Work) / float64(most)
		fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%.1f" height="%.1f" fill="#adb5bd"/><rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#495057"/>`,
			bx+80, yy, cw, barH, float64(bx+80)+cw, yy, ww, barH)
		fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="8" height="%.1f" fill="%s"/><text x="%d" y="%.1f">%s</text>`,
			bx, yy, barH, palette[colors[n]], bx+12, yy+barH/2+4, template.HTMLEscapeString(short(n, 11)))
	}
	b.WriteString(`</svg>`)
	out := make([]usageRow, 0, len(names))
	for _, n := range names {
		out = append(out, *rows[n])
	}
	return template.HTML(b.String()), out //nolint:gosec // every text escaped above
}

var palette = []string{"#3b5bdb", "#e8590c", "#2f9e44", "#ae3ec9", "#1098ad", "#f08c00", "#c2255c", "#5c940d"}

func short(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
