package cli

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"
)

// TestWebCommand: troupe web serves the workspace on loopback, prints
// where and, with --web-actions, the token and a login link that works
// once; it stops when its context ends.
func TestWebCommand(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pr, pw := io.Pipe()
	exited := make(chan int, 1)
	go func() {
		exited <- Main(ctx, []string{"web", "--addr", "127.0.0.1:0", "--web-actions", "--workspace", t.TempDir()}, strings.NewReader(""), io.Discard, pw)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	var base, login, token string
	for lines.Scan() {
		l := lines.Text()
		if v, ok := strings.CutPrefix(l, "troupe: web dashboard on "); ok {
			base = v
		}
		if v, ok := strings.CutPrefix(l, "troupe: log a browser in once with "); ok {
			login = v
		}
		if v, ok := strings.CutPrefix(l, "troupe: web token (Authorization: Bearer …): "); ok {
			token = v
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if base == "" || login == "" || len(token) < 32 {
		t.Fatalf("banner: base %q login %q token %q", base, login, token)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	for _, tc := range []struct {
		url  string
		want int
	}{{base + "/", 200}, {base + "/t/nobody", 404}, {login, 200}, {login, 401}} {
		resp, err := c.Get(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s: %d, want %d", tc.url, resp.StatusCode, tc.want)
		}
	}
	cancel()
	if code := <-exited; code != 0 {
		t.Errorf("troupe web exited %d", code)
	}
}
