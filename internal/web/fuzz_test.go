package web

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// FuzzTranscript: any transcript line (from disk, written by a model's
// turn) renders without a panic, and the HTML a browser would parse from
// it has no script element, no event handler attribute and no script
// link.
func FuzzTranscript(f *testing.F) {
	f.Add(`{"ts":"2026-01-01T00:00:00Z","role":"assistant","content":[{"type":"text","text":"<script>alert(1)</script> [x](javascript:alert(1))"}]}`)
	f.Add(`{"role":"assistant","content":[{"type":"text","text":"<a href=\"javascript:alert(1)\">x</a> ![i](javascript:x) [y](JAVASCRIPT:z) <img src=x onerror=alert(1)>"}]}`)
	f.Add(`{"role":"assistant","content":[{"type":"tool_use","name":"bash","input":{"command":"</pre><script>"}}]}`)
	f.Add(`{"role":"user","content":[{"type":"tool_result","content":"<img src=x onerror=alert(1)>","is_error":true}]}`)
	f.Add(`{"type":"spawn"}`)
	f.Add(`not json`)
	p, err := newPages()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line string) {
		items := transcriptItems([]json.RawMessage{json.RawMessage(line)}, "dev")
		out := p.fragment("items", transcriptPage{Member: "dev", Items: items})
		if why := unsafeHTML(out); why != "" {
			t.Fatalf("%s in the rendered transcript of %q:\n%s", why, line, out)
		}
	})
}

// unsafeHTML says what in s a browser would run: a script element, an
// on* attribute, a javascript: or vbscript: URL ("" for nothing).
func unsafeHTML(s string) string {
	z := html.NewTokenizer(strings.NewReader(s))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			if z.Err() == io.EOF {
				return ""
			}
			return "a tokenizer error: " + z.Err().Error()
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		tok := z.Token()
		switch tok.Data {
		case "script", "iframe", "object", "embed", "style", "img":
			return "a <" + tok.Data + "> element"
		}
		for _, a := range tok.Attr {
			if strings.HasPrefix(strings.ToLower(a.Key), "on") {
				return "an " + a.Key + " attribute"
			}
			v := strings.ToLower(strings.Join(strings.Fields(a.Val), ""))
			if (a.Key == "href" || a.Key == "src") && (strings.HasPrefix(v, "javascript:") || strings.HasPrefix(v, "vbscript:") || strings.HasPrefix(v, "data:")) {
				return "a " + a.Key + "=" + a.Val
			}
		}
	}
}
