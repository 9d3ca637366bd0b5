package tui

// The chat renders the lead's markdown itself, over goldmark's parser (linked
// already for the web dashboard), instead of through glamour: glamour links
// chroma, whose lexer and style registries are built at package init, 25-60 ms
// in every troupe process (`troupe agent` and `troupe --version` included)
// though only this UI ever renders markdown. Code blocks are shown plain, in
// one colour, without syntax highlighting.

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	gtext "github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// markdown renders the lead's text, caching each entry's rendering (by its
// key, for its width and length: streamed text only grows).
type markdown struct {
	cache map[string]rendered
}

type rendered struct {
	width, length int
	text          string
}

func newMarkdown() *markdown { return &markdown{cache: map[string]rendered{}} }

func (md *markdown) render(e *entry, w int) []string {
	if c, ok := md.cache[e.key]; ok && c.width == w && c.length == len(e.text) {
		return strings.Split(c.text, "\n")
	}
	lines := renderMarkdown(e.text, w)
	md.cache[e.key] = rendered{width: w, length: len(e.text), text: strings.Join(lines, "\n")}
	return lines
}

// prune forgets the renderings of entries no longer in the conversation
// (the transcript is bounded), once they outnumber it.
func (md *markdown) prune(entries []entry) {
	if len(md.cache) <= 2*len(entries)+64 {
		return
	}
	keep := make(map[string]rendered, len(entries))
	for _, e := range entries {
		if c, ok := md.cache[e.key]; ok {
			keep[e.key] = c
		}
	}
	md.cache = keep
}

// mdParser is built on first use: a process that never shows the chat
// never pays for it.
var mdParser = sync.OnceValue(func() parser.Parser {
	return goldmark.New(goldmark.WithExtensions(extension.Table, extension.Strikethrough, extension.TaskList)).Parser()
})

// renderMarkdown lays markdown out in lines of at most w cells, styled for
// a dark terminal, without leading or trailing blank lines.
func renderMarkdown(src string, w int) []string {
	if w < 1 {
		w = 1
	}
	b := []byte(printable(src))
	r := &mdRenderer{src: b}
	lines := r.blocks(mdParser().Parse(gtext.NewReader(b)), w, true, 0)
	for i, l := range lines {
		// Only lists and quotes nested deeper than the width allows get
		// here.
		if ansi.StringWidth(l) > w {
			lines[i] = ansi.Truncate(l, w, "…")
		}
	}
	for len(lines) > 0 && lines[0] == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// printable keeps what the model wrote from driving the terminal (escape
// sequences, carriage returns) or confusing widths: control characters but
// tab and newline, and invalid UTF-8, become U+FFFD.
func printable(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if r < 0x20 || (r >= 0x7f && r < 0xa0) {
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

// attr is a set of inline attributes; a run of text has one.
type attr uint8

const (
	aBold attr = 1 << iota
	aItalic
	aStrike
	aCode
	aLink
	aDim
	aHead
)

var (
	codeColor = lipgloss.Color("#FFA657")
	linkColor = lipgloss.Color("#58A6FF")
)

// mdStyles holds one style per attribute set, made on first use.
var mdStyles sync.Map // attr -> lipgloss.Style

func styleOf(a attr) lipgloss.Style {
	if s, ok := mdStyles.Load(a); ok {
		return s.(lipgloss.Style)
	}
	s := lipgloss.NewStyle()
	if a&(aBold|aHead) != 0 {
		s = s.Bold(true)
	}
	if a&aItalic != 0 {
		s = s.Italic(true)
	}
	if a&aStrike != 0 {
		s = s.Strikethrough(true)
	}
	switch {
	case a&aCode != 0:
		s = s.Foreground(codeColor)
	case a&aLink != 0:
		s = s.Foreground(linkColor).Underline(true)
	case a&aHead != 0:
		s = s.Foreground(accent)
	case a&aDim != 0:
		s = s.Foreground(grey)
	}
	mdStyles.Store(a, s)
	return s
}

// run is text with one set of attributes; "\n" is a hard line break.
type run struct {
	text string
	a    attr
}

type mdRenderer struct {
	src []byte
}

// blocks renders the block children of n at width w, with a blank line
// between them when loose. depth counts the lists n is in.
func (r *mdRenderer) blocks(n ast.Node, w int, loose bool, depth int) []string {
	var out []string
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		lines := r.block(c, w, depth)
		if len(lines) == 0 {
			continue
		}
		if len(out) > 0 && loose {
			out = append(out, "")
		}
		out = append(out, lines...)
	}
	return out
}

func (r *mdRenderer) block(n ast.Node, w, depth int) []string {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		return r.wrap(r.inlines(n, 0, nil), w)
	case *ast.Heading:
		runs := []run{{strings.Repeat("#", n.Level) + " ", aHead}}
		return r.wrap(r.inlines(n, aHead, runs), w)
	case *ast.ThematicBreak:
		return []string{styleOf(aDim).Render(strings.Repeat("─", w))}
	case *ast.CodeBlock, *ast.FencedCodeBlock:
		return r.code(n, w)
	case *ast.Blockquote:
		bar := styleOf(aDim).Render("│ ")
		inner := r.blocks(n, max(1, w-2), true, depth)
		for i, l := range inner {
			inner[i] = bar + l
		}
		return inner
	case *ast.List:
		return r.list(n, w, depth)
	case *ast.HTMLBlock:
		var runs []run
		r.rawLines(n, func(l string) { runs = append(runs, run{l, aDim}, run{"\n", aDim}) })
		if n.HasClosure() {
			runs = append(runs, run{string(n.ClosureLine.Value(r.src)), aDim})
		}
		return r.wrap(runs, w)
	case *east.Table:
		return r.table(n, w)
	}
	if n.FirstChild() != nil && n.FirstChild().Type() == ast.TypeBlock {
		return r.blocks(n, w, true, depth)
	}
	return r.wrap(r.inlines(n, 0, nil), w)
}

// rawLines calls f with each source line of a block, without its line end.
func (r *mdRenderer) rawLines(n ast.Node, f func(string)) {
	lines := n.Lines()
	for i := 0; i < lines.Len(); i++ {
		seg := lines.At(i)
		f(strings.TrimRight(string(seg.Value(r.src)), "\r\n"))
	}
}

// code renders a code block verbatim, two cells in, cut (not word-wrapped)
// at the width.
func (r *mdRenderer) code(n ast.Node, w int) []string {
	indent := "  "
	if w < 8 {
		indent = ""
	}
	var lines []string
	r.rawLines(n, func(l string) {
		l = strings.TrimRight(strings.ReplaceAll(l, "\t", "    "), " ")
		for _, part := range cut(l, w-len(indent)) {
			if part == "" {
				lines = append(lines, "")
				continue
			}
			lines = append(lines, indent+styleOf(aCode).Render(strings.TrimRight(part, " ")))
		}
	})
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// cut splits a line of plain text into pieces of at most w cells (one
// character when not even that fits), keeping its spaces.
func cut(s string, w int) []string {
	if w < 1 {
		w = 1
	}
	out := []string{}
	for ansi.StringWidth(s) > w {
		head := ansi.Truncate(s, w, "")
		if head == "" {
			_, size := utf8.DecodeRuneInString(s)
			head = s[:size]
		}
		out = append(out, head)
		s = s[len(head):]
	}
	return append(out, s)
}

var bullets = []string{"• ", "◦ ", "▪ "}

func (r *mdRenderer) list(l *ast.List, w, depth int) []string {
	count := 0
	for c := l.FirstChild(); c != nil; c = c.NextSibling() {
		count++
	}
	numWidth := len(strconv.Itoa(l.Start + count - 1))
	var out []string
	i := 0
	for item := l.FirstChild(); item != nil; item = item.NextSibling() {
		marker := bullets[depth%len(bullets)]
		if l.IsOrdered() {
			marker = fmt.Sprintf("%*d. ", numWidth, l.Start+i)
		}
		i++
		mw := ansi.StringWidth(marker)
		inner := r.blocks(item, max(1, w-mw), !l.IsTight, depth+1)
		if len(inner) == 0 {
			inner = []string{""}
		}
		if len(out) > 0 && !l.IsTight {
			out = append(out, "")
		}
		pad := strings.Repeat(" ", mw)
		for j, line := range inner {
			switch {
			case j == 0:
				out = append(out, marker+line)
			case line == "":
				out = append(out, "")
			default:
				out = append(out, pad+line)
			}
		}
	}
	return out
}

// inlines appends the runs of n's inline children, with attributes a added.
func (r *mdRenderer) inlines(n ast.Node, a attr, out []run) []run {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Text:
			v := c.Segment.Value(r.src)
			if !c.IsRaw() {
				v = unescape(v)
			}
			s := string(v)
			if a&aCode != 0 {
				s = strings.ReplaceAll(s, "\n", " ")
			}
			out = append(out, run{s, a})
			switch {
			case c.HardLineBreak():
				out = append(out, run{"\n", a})
			case c.SoftLineBreak():
				out = append(out, run{" ", a})
			}
		case *ast.String:
			out = append(out, run{string(c.Value), a})
		case *ast.CodeSpan:
			out = r.inlines(c, a|aCode, out)
		case *ast.Emphasis:
			if c.Level >= 2 {
				out = r.inlines(c, a|aBold, out)
			} else {
				out = r.inlines(c, a|aItalic, out)
			}
		case *east.Strikethrough:
			out = r.inlines(c, a|aStrike, out)
		case *ast.Link:
			start := len(out)
			out = r.inlines(c, a|aLink, out)
			if dest := string(c.Destination); dest != "" && dest != plain(out[start:]) {
				out = append(out, run{" (" + dest + ")", a | aDim})
			}
		case *ast.AutoLink:
			out = append(out, run{string(c.Label(r.src)), a | aLink})
		case *ast.Image:
			alt := plain(r.inlines(c, 0, nil))
			out = append(out, run{"[image: " + alt + "]", a | aDim})
			if dest := string(c.Destination); dest != "" {
				out = append(out, run{" (" + dest + ")", a | aDim})
			}
		case *ast.RawHTML:
			for i := 0; i < c.Segments.Len(); i++ {
				seg := c.Segments.At(i)
				out = append(out, run{strings.ReplaceAll(string(seg.Value(r.src)), "\n", " "), a | aDim})
			}
		case *east.TaskCheckBox:
			box := "[ ] "
			if c.IsChecked {
				box = "[x] "
			}
			out = append(out, run{box, a})
		default:
			out = r.inlines(c, a, out)
		}
	}
	return out
}

// unescape resolves backslash escapes and character references, as an HTML
// renderer would.
func unescape(v []byte) []byte {
	return util.ResolveNumericReferences(util.ResolveEntityNames(util.UnescapePunctuations(v)))
}

func plain(runs []run) string {
	var b strings.Builder
	for _, r := range runs {
		b.WriteString(r.text)
	}
	return b.String()
}

// wrap lays runs out in lines of at most w cells, breaking at spaces, and
// inside a word only when the word alone is wider than a line. Runs of
// spaces become one space; a space takes the attributes of the run it was
// in.
func (r *mdRenderer) wrap(runs []run, w int) []string {
	if w < 1 {
		w = 1
	}
	var (
		lines    [][]run
		cur      []run
		curW     int
		word     []run
		wordW    int
		space    = false
		spaceA   attr
		breakNow = func() {
			lines = append(lines, cur)
			cur, curW = nil, 0
		}
	)
	flush := func() {
		if wordW == 0 {
			return
		}
		if curW > 0 && space && curW+1+wordW > w {
			breakNow()
		}
		if curW > 0 && space {
			cur = append(cur, run{" ", spaceA})
			curW++
		}
		space = false
		for _, p := range word {
			s := p.text
			for s != "" {
				sw := ansi.StringWidth(s)
				if curW+sw <= w {
					cur = append(cur, run{s, p.a})
					curW += sw
					break
				}
				head := ansi.Truncate(s, w-curW, "")
				if head == "" {
					if curW > 0 {
						breakNow()
						continue
					}
					// Not one character fits: put one on the line anyway.
					_, size := utf8.DecodeRuneInString(s)
					head = s[:size]
				}
				cur = append(cur, run{head, p.a})
				breakNow()
				s = s[len(head):]
			}
		}
		word, wordW = word[:0], 0
	}
	for _, rn := range runs {
		s := rn.text
		for s != "" {
			i := strings.IndexAny(s, " \n")
			if i < 0 {
				i = len(s)
			}
			if i > 0 {
				word = append(word, run{s[:i], rn.a})
				wordW += ansi.StringWidth(s[:i])
			}
			if i == len(s) {
				break
			}
			flush()
			if s[i] == '\n' {
				breakNow()
				space = false
			} else {
				if !space {
					spaceA = rn.a
				}
				space = true
			}
			s = s[i+1:]
		}
	}
	flush()
	if len(cur) > 0 || len(lines) == 0 {
		lines = append(lines, cur)
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = renderRuns(l)
	}
	return out
}

// renderRuns styles a line's runs, merging neighbours with the same
// attributes.
func renderRuns(runs []run) string {
	var b strings.Builder
	for i := 0; i < len(runs); {
		j := i + 1
		text := runs[i].text
		for j < len(runs) && runs[j].a == runs[i].a {
			text += runs[j].text
			j++
		}
		if runs[i].a == 0 {
			b.WriteString(text)
		} else {
			b.WriteString(styleOf(runs[i].a).Render(text))
		}
		i = j
	}
	return b.String()
}

// table renders a table with its columns fitted to the width: a column
// keeps its natural width when it can, and the widest give way first,
// their cells wrapped. Too narrow for that, each row is one wrapped line.
func (r *mdRenderer) table(t *east.Table, w int) []string {
	var rows [][][]run
	header := 0
	for row := t.FirstChild(); row != nil; row = row.NextSibling() {
		var cells [][]run
		for c := row.FirstChild(); c != nil; c = c.NextSibling() {
			a := attr(0)
			if _, ok := row.(*east.TableHeader); ok {
				a = aBold
			}
			cells = append(cells, r.inlines(c, a, nil))
		}
		if _, ok := row.(*east.TableHeader); ok {
			header = len(rows) + 1
		}
		rows = append(rows, cells)
	}
	cols := 0
	for _, row := range rows {
		cols = max(cols, len(row))
	}
	if cols == 0 {
		return nil
	}
	sep := styleOf(aDim).Render(" │ ")
	natural := make([]int, cols)
	for _, row := range rows {
		for i, cell := range row {
			natural[i] = max(natural[i], ansi.StringWidth(plain(cell)))
		}
	}
	avail := w - 3*(cols-1)
	if avail < 3*cols {
		var out []string
		for _, row := range rows {
			var runs []run
			for i, cell := range row {
				if i > 0 {
					runs = append(runs, run{" | ", aDim})
				}
				runs = append(runs, cell...)
			}
			out = append(out, r.wrap(runs, w)...)
		}
		return out
	}
	widths := fitColumns(natural, avail)
	align := t.Alignments
	var out []string
	for ri, row := range rows {
		cellLines := make([][]string, cols)
		height := 1
		for i := range cols {
			var cell []run
			if i < len(row) {
				cell = row[i]
			}
			cellLines[i] = r.wrap(cell, widths[i])
			height = max(height, len(cellLines[i]))
		}
		for h := range height {
			var b strings.Builder
			for i := range cols {
				if i > 0 {
					b.WriteString(sep)
				}
				s := ""
				if h < len(cellLines[i]) {
					s = cellLines[i][h]
				}
				gap := max(0, widths[i]-ansi.StringWidth(s))
				var al east.Alignment
				if i < len(align) {
					al = align[i]
				}
				switch al {
				case east.AlignRight:
					s = strings.Repeat(" ", gap) + s
				case east.AlignCenter:
					s = strings.Repeat(" ", gap/2) + s + strings.Repeat(" ", gap-gap/2)
				default:
					s += strings.Repeat(" ", gap)
				}
				b.WriteString(s)
			}
			out = append(out, strings.TrimRight(b.String(), " "))
		}
		if ri+1 == header {
			parts := make([]string, cols)
			for i, cw := range widths {
				parts[i] = strings.Repeat("─", cw)
			}
			out = append(out, styleOf(aDim).Render(strings.Join(parts, "─┼─")))
		}
	}
	return out
}

// fitColumns shares avail cells among columns of the given natural widths:
// the columns narrower than an even share keep their width, the others
// split what is left.
func fitColumns(natural []int, avail int) []int {
	widths := make([]int, len(natural))
	total := 0
	for _, n := range natural {
		total += max(n, 1)
	}
	if total <= avail {
		for i, n := range natural {
			widths[i] = max(n, 1)
		}
		return widths
	}
	fixed := make([]bool, len(natural))
	left, open := avail, len(natural)
	for changed := true; changed && open > 0; {
		changed = false
		share := left / open
		for i, n := range natural {
			if !fixed[i] && n <= share {
				widths[i], fixed[i] = max(n, 1), true
				left -= widths[i]
				open--
				changed = true
			}
		}
	}
	if open == 0 {
		return widths
	}
	share, extra := left/open, left%open
	for i := range natural {
		if fixed[i] {
			continue
		}
		widths[i] = max(share, 1)
		if extra > 0 {
			widths[i]++
			extra--
		}
	}
	return widths
}
