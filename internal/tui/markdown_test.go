package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/google/go-cmp/cmp"
)

func TestRenderMarkdown(t *testing.T) {
	tests := []struct {
		name string
		src  string
		w    int
		want []string
	}{
		{"paragraphs wrap at words", "I'll split this into **two tasks** and *one* `code span`.\n\nSecond\nparagraph.", 24, []string{
			"I'll split this into two",
			"tasks and one code span.",
			"",
			"Second paragraph.",
		}},
		{"headings keep their marks", "# Plan\n\n## Steps\ntext", 40, []string{"# Plan", "", "## Steps", "", "text"}},
		{"a word wider than the line is cut", "see https://example.com/a/very/long/path ok", 16, []string{
			"see",
			"https://example.",
			"com/a/very/long/",
			"path ok",
		}},
		{"links show where they go", "a [link](https://x.y/z), <https://a.b> and [https://c.d](https://c.d)", 80, []string{
			"a link (https://x.y/z), https://a.b and https://c.d",
		}},
		{"escapes and entities", `A &amp; B \*not em\* ~~gone~~ &#65;`, 80, []string{"A & B *not em* gone A"}},
		{"hard break", "one  \ntwo\\\nthree", 80, []string{"one", "two", "three"}},
		{"tight lists nest", "1. the API\n2. the frontend\n   - nested\n   - a nested item that wraps\n\n- [x] done\n- [ ] todo", 24, []string{
			"1. the API",
			"2. the frontend",
			"   ◦ nested",
			"   ◦ a nested item that",
			"     wraps",
			"",
			"• [x] done",
			"• [ ] todo",
		}},
		{"loose list", "- one\n\n- two\n\n  more of two", 40, []string{"• one", "", "• two", "", "  more of two"}},
		{"numbers align", "8. h\n9. i\n10. j", 40, []string{" 8. h", " 9. i", "10. j"}},
		{"quote", "> quoted *text*\n> more\n>\n> again", 40, []string{"│ quoted text more", "│ ", "│ again"}},
		{"code keeps its spaces and is cut, not wrapped", "```go\nfunc main() {\n\tprintln(\"hi\")   // x\n\n}\n```\n\n    indented code", 20, []string{
			"  func main() {",
			"      println(\"hi\")",
			"    // x",
			"",
			"  }",
			"",
			"  indented code",
		}},
		{"table fits", "| Name | Role | N |\n|---|:-:|--:|\n| alice | backend | 12 |\n| bob | frontend | 3 |", 40, []string{
			"Name  │   Role   │  N",
			"──────┼──────────┼───",
			"alice │ backend  │ 12",
			"bob   │ frontend │  3",
		}},
		{"table columns give way, widest first", "| a | notes |\n|---|---|\n| x | one two three four five six |", 20, []string{
			"a │ notes",
			"──┼─────────────────",
			"x │ one two three",
			"  │ four five six",
		}},
		{"table too narrow for columns", "| a | b | c |\n|---|---|---|\n| x | y | z |", 10, []string{"a | b | c", "x | y | z"}},
		{"rule spans the width", "a\n\n---\n\nb", 6, []string{"a", "", "──────", "", "b"}},
		{"html is shown as written", "<div>\nhi\n</div>\n\ntext <b>bold</b>", 40, []string{"<div>", "hi", "</div>", "", "text <b>bold</b>"}},
		{"image", "![a cat](cat.png)", 40, []string{"[image: a cat] (cat.png)"}},
		{"empty", "", 40, nil},
		{"streamed half a fence", "text\n\n```\ncode so fa", 40, []string{"text", "", "  code so fa"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, l := range renderMarkdown(tt.src, tt.w) {
				got = append(got, ansi.Strip(l))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("renderMarkdown(%q, %d) (-want +got):\n%s", tt.src, tt.w, diff)
			}
		})
	}
}

// TestRenderMarkdownStyles: emphasis, code and links are styled, and a
// style never runs past the end of a line.
func TestRenderMarkdownStyles(t *testing.T) {
	lines := renderMarkdown("**bold words that wrap** and `code` and [a link](u)", 12)
	joined := strings.Join(lines, "\n")
	for _, want := range []string{"\x1b[1mbold words", "\x1b[1mthat wrap", "code", "\x1b[4"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no %q in %q", want, joined)
		}
	}
	for _, l := range lines {
		last := l[max(0, strings.LastIndex(l, "\x1b[")):]
		if strings.HasPrefix(last, "\x1b[") && !strings.HasPrefix(last, "\x1b[m") && !strings.HasPrefix(last, "\x1b[0m") {
			t.Errorf("line %q leaves a style open", l)
		}
	}
}

func FuzzRenderMarkdown(f *testing.F) {
	for _, s := range []string{
		"# h\n\ntext **b** *i* `c` [l](u)\n\n1. a\n2. b\n   - c\n\n> q\n\n```\ncode\n```\n\n| a | b |\n|---|---|\n| c | d |",
		"- - - - - - - - - - - x",
		"> > > > > > > > deep",
		"| 語 | 🇯🇵 |\n|--|--|\n| 日本語のテキスト | x |",
		"\t\tcode\twith tabs",
	} {
		f.Add(s, 10)
		f.Add(s, 1)
	}
	f.Fuzz(func(t *testing.T, src string, w int) {
		if w < 1 || w > 300 {
			return
		}
		for _, l := range renderMarkdown(src, w) {
			if got := ansi.StringWidth(l); got > w {
				t.Fatalf("line %q is %d cells wide, more than %d", ansi.Strip(l), got, w)
			}
		}
	})
}
