package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/store/file"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/web"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hostile is text a model or a message could carry to break out of the
// page.
const hostile = "<script>alert(1)</script> [x](javascript:alert(1)) <img src=x onerror=alert(2)>"

// fixture is a file store with one team: a lead, a teammate "dev" with a
// hostile transcript, a task, a pending plan request from dev.
type fixture struct {
	st   *file.Store
	team store.Team
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, err := file.Open(t.TempDir(), file.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	tm, err := st.CreateTeam(ctx, store.Roster{Name: "demo-team", Description: hostile})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tm.UpdateRoster(ctx, func(r *store.Roster) error {
		r.Members = append(r.Members, store.Member{Name: "dev", Role: hostile, Status: store.StatusWorking, Model: "m1"})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Tasks().Create(ctx, store.Task{Subject: "first " + hostile}); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Tasks().Create(ctx, store.Task{Subject: "second", BlockedBy: []string{"1"}}); err != nil {
		t.Fatal(err)
	}
	f := &fixture{st: st, team: tm}
	f.journal(t, "dev", teamevent.Spawn{Member: "dev", Role: "dev", Model: "m1"})
	f.journal(t, "dev", teamevent.Send{From: "dev", To: "team-lead", MsgType: "message", Summary: hostile, Content: hostile})
	f.journal(t, "dev", teamevent.Protocol{Kind: teamevent.ProtocolPlanRequest, RequestID: "plan-1", Member: "dev"})
	for _, m := range []llm.Message{
		{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("do it " + hostile)}},
		{Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock("Done: " + hostile), {Type: llm.BlockToolUse, ID: "tu1", Name: "bash", Input: json.RawMessage(`{"command":"echo \"<script>\""}`)}}},
		{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockToolResult, ToolUseID: "tu1", Content: hostile}}},
	} {
		line, _ := json.Marshal(struct {
			TS time.Time `json:"ts"`
			llm.Message
		}{time.Now(), m})
		if err := tm.Transcripts().Append(ctx, "dev", line); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *fixture) journal(t *testing.T, agent string, ev teamevent.Event) {
	t.Helper()
	e, err := teamevent.Encode(agent, ev)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.team.Journal().Append(context.Background(), e); err != nil {
		t.Fatal(err)
	}
}

// serve starts the dashboard on an httptest server; addr is the address
// the server believes it listens on (what decides loopback).
func serve(t *testing.T, f *fixture, cfg web.Config) (*web.Server, *httptest.Server) {
	t.Helper()
	cfg.Store = f.st
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	s, err := web.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		s.Close()
	})
	return s, ts
}

func get(t *testing.T, c *http.Client, u string, header ...string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// TestHostileTextIsEscaped: nothing a model or a message says becomes
// markup or a script link, on any page or in the live updates.
func TestHostileTextIsEscaped(t *testing.T) {
	f := newFixture(t)
	_, ts := serve(t, f, web.Config{})
	for _, path := range []string{"/", "/t/demo-team", "/t/demo-team/timeline", "/t/demo-team/transcript/dev"} {
		code, body, h := get(t, ts.Client(), ts.URL+path)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		checkSafe(t, path, body)
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("GET %s: CSP %q", path, csp)
		}
	}
	// The transcript folds the tool call and shows the model's markdown.
	_, body, _ := get(t, ts.Client(), ts.URL+"/t/demo-team/transcript/dev")
	if !strings.Contains(body, "<details class=\"tool\"><summary>⚙ bash") {
		t.Errorf("transcript: no folded tool call in\n%s", body)
	}
	// The live stream's fragments are as safe.
	msg := firstUpdate(t, ts.Client(), ts.URL+"/t/demo-team/events?view=overview")
	for id, frag := range msg.Frags {
		checkSafe(t, "stream "+id, frag)
	}
	msg = firstUpdate(t, ts.Client(), ts.URL+"/t/demo-team/events?view=transcript&member=dev")
	checkSafe(t, "stream transcript", msg.Frags["transcript"])
}

var scriptTag = regexp.MustCompile(`<script[^>]*>`)

func checkSafe(t *testing.T, where, body string) {
	t.Helper()
	for _, tag := range scriptTag.FindAllString(body, -1) {
		if tag != `<script src="/static/app.js" defer>` {
			t.Errorf("%s: a script tag %q in the page", where, tag)
		}
	}
	for _, bad := range []string{"javascript:", "onerror=alert", "<img"} {
		if strings.Contains(strings.ToLower(body), bad) && !strings.Contains(body, "&lt;img") {
			t.Errorf("%s: %q in the page", where, bad)
		}
		if bad == "javascript:" && regexp.MustCompile(`href="\s*javascript:`).MatchString(body) {
			t.Errorf("%s: a javascript: link in the page", where)
		}
	}
	if !strings.Contains(body, "&lt;script&gt;") && strings.Contains(where, "transcript") {
		t.Errorf("%s: the hostile text is not shown escaped", where)
	}
}

type update struct {
	V     int               `json:"v"`
	TS    int64             `json:"ts"`
	Frags map[string]string `json:"frags"`
}

func firstUpdate(t *testing.T, c *http.Client, u string) update {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", u, resp.StatusCode)
	}
	u2, err := readUpdate(bufio.NewReader(resp.Body))
	if err != nil {
		t.Fatal(err)
	}
	return u2
}

func readUpdate(r *bufio.Reader) (update, error) {
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return update{}, err
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var u update
			err := json.Unmarshal([]byte(data), &u)
			return u, err
		}
	}
}

// TestMarkdownDropsScriptLinks: the model's markdown is rendered, its
// javascript: link is not.
func TestMarkdownDropsScriptLinks(t *testing.T) {
	f := newFixture(t)
	_, ts := serve(t, f, web.Config{})
	_, body, _ := get(t, ts.Client(), ts.URL+"/t/demo-team/transcript/dev")
	if strings.Contains(body, `href="javascript:`) {
		t.Errorf("a javascript: link survived:\n%s", body)
	}
	if !strings.Contains(body, "<p>Done: ") {
		t.Errorf("the model's markdown is not rendered:\n%s", body)
	}
}

// TestTokenOffLoopback: a server that says it listens off loopback shows
// nothing without the token; the bearer header, the one-time login link
// (once) and the token posted to /login let a client in.
func TestTokenOffLoopback(t *testing.T) {
	f := newFixture(t)
	s, ts := serve(t, f, web.Config{Addr: "0.0.0.0:7777", Token: "sekrit"})
	if s.Token() != "sekrit" {
		t.Fatalf("token %q", s.Token())
	}
	code, body, h := get(t, ts.Client(), ts.URL+"/t/demo-team")
	if code != http.StatusUnauthorized || strings.Contains(body, "demo-team") {
		t.Errorf("no token: %d, body names the team: %v", code, strings.Contains(body, "demo-team"))
	}
	if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") || !strings.Contains(body, `action="/login"`) {
		t.Errorf("no token: the login page is %q:\n%s", ct, body)
	}
	if code, _, _ := get(t, ts.Client(), ts.URL+"/t/demo-team/events?view=overview", "Accept", "text/event-stream"); code != http.StatusUnauthorized {
		t.Errorf("stream without token: %d", code)
	}
	if code, _, _ := get(t, ts.Client(), ts.URL+"/t/demo-team", "Authorization", "Bearer wrong"); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d", code)
	}
	if code, _, _ := get(t, ts.Client(), ts.URL+"/t/demo-team", "Authorization", "Bearer sekrit"); code != http.StatusOK {
		t.Errorf("bearer token: %d", code)
	}
	// A one-time link logs a browser in, with an HttpOnly SameSite=Strict
	// cookie; the same link a second time does not.
	link := s.LoginURL(ts.URL)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Transport: ts.Client().Transport}
	code, _, _ = get(t, browser, link)
	if code != http.StatusOK {
		t.Fatalf("login link: %d", code)
	}
	if code, _, _ := get(t, browser, ts.URL+"/t/demo-team"); code != http.StatusOK {
		t.Errorf("logged-in browser: %d", code)
	}
	resp, err := ts.Client().Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the login link a second time: %d", resp.StatusCode)
	}
	noRedirect := &http.Client{Transport: ts.Client().Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = noRedirect.Get(s.LoginURL(ts.URL))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cookie := resp.Header.Get("Set-Cookie")
	for _, want := range []string{"HttpOnly", "SameSite=Strict"} {
		if !strings.Contains(cookie, want) {
			t.Errorf("cookie %q lacks %s", cookie, want)
		}
	}
	resp, err = noRedirect.PostForm(ts.URL+"/login", url.Values{"token": {"sekrit"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Set-Cookie") == "" {
		t.Errorf("token posted to /login: %d, cookie %q", resp.StatusCode, resp.Header.Get("Set-Cookie"))
	}
}

// TestLoopbackByDefault: on loopback anyone on the machine sees the team,
// a token exists only for actions, and a foreign Host (DNS rebinding) is
// refused.
func TestLoopbackByDefault(t *testing.T) {
	f := newFixture(t)
	s, ts := serve(t, f, web.Config{})
	if s.Token() != "" {
		t.Errorf("a token without actions on loopback: %q", s.Token())
	}
	if code, _, _ := get(t, ts.Client(), ts.URL+"/t/demo-team"); code != http.StatusOK {
		t.Errorf("loopback view: %d", code)
	}
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/t/demo-team", nil)
	req.Host = "evil.example:7777"
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("foreign Host: %d", resp.StatusCode)
	}
	for _, tc := range []struct {
		addr string
		want bool
	}{{"127.0.0.1:7777", true}, {"localhost:1", true}, {"[::1]:80", true}, {"0.0.0.0:7777", false}, {":7777", false}, {"example.com:80", false}, {"192.168.1.2:80", false}} {
		got, err := web.IsLoopback(tc.addr)
		if err != nil || got != tc.want {
			t.Errorf("IsLoopback(%q) = %v, %v; want %v", tc.addr, got, err, tc.want)
		}
	}
}

// TestActions: without --web-actions nothing is done; with it, an action
// needs the token and the session's CSRF token; a good one answers the
// plan request as the human.
func TestActions(t *testing.T) {
	ctx := context.Background()
	t.Run("off", func(t *testing.T) {
		f := newFixture(t)
		_, ts := serve(t, f, web.Config{})
		resp, err := ts.Client().PostForm(ts.URL+"/t/demo-team/answer", url.Values{"request_id": {"plan-1"}, "approve": {"true"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("actions off: %d", resp.StatusCode)
		}
	})
	f := newFixture(t)
	s, ts := serve(t, f, web.Config{Actions: true})
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Transport: ts.Client().Transport}
	// Loopback shows the page to anyone, but without the login it has no
	// action and a post is refused.
	_, body, _ := get(t, browser, ts.URL+"/t/demo-team")
	if strings.Contains(body, "/answer") {
		t.Errorf("actions offered without login")
	}
	post := func(c *http.Client, form url.Values) int {
		t.Helper()
		resp, err := c.PostForm(ts.URL+"/t/demo-team/answer", form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(browser, url.Values{"request_id": {"plan-1"}, "approve": {"true"}}); code != http.StatusUnauthorized {
		t.Errorf("no login: %d", code)
	}
	if code, _, _ := get(t, browser, s.LoginURL(ts.URL)); code != http.StatusOK {
		t.Fatalf("login: %d", code)
	}
	_, body, _ = get(t, browser, ts.URL+"/t/demo-team")
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token in the logged-in page:\n%s", body)
	}
	// The wrong token differs from the right one in its first digit (a
	// fixed "00" prefix was the right token once in 256 runs).
	wrong := "0" + m[1][1:]
	if m[1][0] == '0' {
		wrong = "1" + m[1][1:]
	}
	for _, tc := range []struct {
		name string
		csrf []string
	}{{"no csrf", nil}, {"wrong csrf", []string{wrong}}, {"empty csrf", []string{""}}} {
		if code := post(browser, url.Values{"request_id": {"plan-1"}, "approve": {"true"}, "csrf": tc.csrf}); code != http.StatusForbidden {
			t.Errorf("%s: %d", tc.name, code)
		}
	}
	if got, _ := f.team.Mailbox().Peek(ctx, "dev"); len(got) != 0 {
		t.Fatalf("a refused action sent %v", got)
	}
	if code := post(browser, url.Values{"request_id": {"plan-1"}, "approve": {"true"}, "csrf": {m[1]}, "feedback": {"ok"}}); code != http.StatusOK {
		t.Fatalf("good action: %d", code)
	}
	got, err := f.team.Mailbox().Peek(ctx, "dev")
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	want := []store.Message{{Type: store.TypePlanApprovalResponse, From: store.HumanName, To: "dev", RequestID: "plan-1", Approve: &yes, Feedback: "ok",
		Content: "The human approved your request."}}
	if d := cmp.Diff(want, got, cmpIgnoreIDTime); d != "" {
		t.Errorf("answer sent (-want +got):\n%s", d)
	}
	// A bearer client needs no CSRF token (a browser cannot send the
	// header cross-site); messaging and stopping work the same way.
	for _, tc := range []struct {
		path string
		form url.Values
		want string
	}{
		{"/t/demo-team/send", url.Values{"to": {"dev"}, "text": {"hello " + hostile}}, store.TypeMessage},
		{"/t/demo-team/stop", url.Values{"member": {"dev"}}, store.TypeShutdownRequest},
	} {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+tc.path, strings.NewReader(tc.form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+s.Token())
		req.Header.Set("Accept", "application/json")
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("POST %s: %d", tc.path, resp.StatusCode)
		}
	}
	got, _ = f.team.Mailbox().Peek(ctx, "dev")
	var types []string
	for _, m := range got {
		types = append(types, m.Type)
	}
	if d := cmp.Diff([]string{store.TypePlanApprovalResponse, store.TypeMessage, store.TypeShutdownRequest}, types); d != "" {
		t.Errorf("dev's inbox (-want +got):\n%s", d)
	}
}

var cmpIgnoreIDTime = cmp.FilterPath(func(p cmp.Path) bool {
	s := p.Last().String()
	return s == ".ID" || s == ".Timestamp" || s == ".MAC"
}, cmp.Ignore())

// TestPathTraversal: names that climb out of the team, and static paths
// that climb out of the assets, are refused; nothing outside the embedded
// assets is served.
func TestPathTraversal(t *testing.T) {
	f := newFixture(t)
	_, ts := serve(t, f, web.Config{})
	for _, tc := range []struct {
		path string
		want []int
	}{
		{"/static/../../../../etc/passwd", []int{http.StatusNotFound, http.StatusBadRequest}},
		{"/static/..%2f..%2f..%2fetc%2fpasswd", []int{http.StatusNotFound, http.StatusBadRequest}},
		{"/static/app.js", []int{http.StatusOK}},
		{"/t/..%2f..%2fetc/timeline", []int{http.StatusNotFound, http.StatusBadRequest}},
		{"/t/demo-team/transcript/..%2f..%2f..%2fetc%2fpasswd", []int{http.StatusNotFound, http.StatusBadRequest}},
		{"/t/demo-team/transcript/%2e%2e", []int{http.StatusNotFound, http.StatusBadRequest}},
		{"/a/..%2fteams%2fdemo-team", []int{http.StatusNotFound, http.StatusBadRequest}},
		{"/t/demo-team/events?view=transcript&member=../../x", []int{http.StatusBadRequest}},
		{"/t/nobody", []int{http.StatusNotFound}},
	} {
		code, body, _ := get(t, ts.Client(), ts.URL+tc.path)
		ok := false
		for _, w := range tc.want {
			ok = ok || code == w
		}
		if !ok {
			t.Errorf("GET %s: %d, want one of %v", tc.path, code, tc.want)
		}
		if strings.Contains(body, "root:") {
			t.Errorf("GET %s served a system file", tc.path)
		}
	}
}

// TestLive: an event appended to the journal reaches an open stream, well
// within the 100 ms the page promises, without anything polling.
func TestLive(t *testing.T) {
	f := newFixture(t)
	_, ts := serve(t, f, web.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/t/demo-team/events?view=overview", nil)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	first, err := readUpdate(r)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(first.Frags["board"], "owner: dev") {
		t.Fatal("claimed before the claim")
	}
	if _, err := f.team.Tasks().Claim(ctx, "1", "dev"); err != nil {
		t.Fatal(err)
	}
	f.journal(t, "dev", teamevent.Claim{Task: "1", Owner: "dev"})
	for {
		u, err := readUpdate(r)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(u.Frags["board"], "owner: dev") {
			if u.TS != 0 {
				t.Logf("update %d arrived %v after its event", u.V, time.Since(time.Unix(0, u.TS)))
			}
			break
		}
	}
}

// TestBoardAndUsage: the board shows the dependency as a link and an
// arrow, and the usage chart splits coordination from work per member.
func TestBoardAndUsage(t *testing.T) {
	f := newFixture(t)
	f.journal(t, "team-lead", teamevent.Usage{AgentName: "team-lead", InputTokens: 1000, OutputTokens: 200, Model: "m1", Kind: teamevent.UsageCoordination})
	f.journal(t, "dev", teamevent.Usage{AgentName: "dev", InputTokens: 3000, OutputTokens: 500, Model: "m1", Kind: teamevent.UsageWork})
	_, ts := serve(t, f, web.Config{})
	_, body, _ := get(t, ts.Client(), ts.URL+"/t/demo-team")
	for _, want := range []string{
		`<div class="deps blocked">blocked by <a href="#task-1">#1</a>`,
		`<svg class="chart deps-graph"`,
		`marker-end="url(#arrow)"`,
		`<svg class="chart usage-chart"`,
		`<title>dev</title>`,
		`<td class="num">1.2k</td><td class="num">0</td>`, // the lead: coordination only
		`<td class="num">0</td><td class="num">3.5k</td>`, // dev: work only
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the overview lacks %q", want)
		}
	}
	// The timeline filters by member and type.
	_, body, _ = get(t, ts.Client(), ts.URL+"/t/demo-team/timeline?member=dev&type=protocol")
	if n := strings.Count(body, `<tr class="t-`); n != 1 || !strings.Contains(body, `<tr class="t-protocol">`) {
		t.Errorf("timeline member=dev type=protocol: %d rows\n%s", n, body)
	}
}

// TestTeamEndsAndComesBack: a team archived while watched ends its
// streams (the page says so), and a new team of the same name is shown
// afresh, not the old one.
func TestTeamEndsAndComesBack(t *testing.T) {
	f := newFixture(t)
	_, ts := serve(t, f, web.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/t/demo-team/events?view=overview", nil)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if _, err := readUpdate(r); err != nil {
		t.Fatal(err)
	}
	// As the team wing does: the deletion is journaled, then the team
	// archived.
	f.journal(t, "team-lead", teamevent.TeamDelete{})
	if _, err := f.st.ArchiveTeam(ctx, "demo-team"); err != nil {
		t.Fatal(err)
	}
	var last update
	for {
		u, err := readUpdate(r)
		if err != nil {
			break // the stream ended with the team
		}
		last = u
	}
	if !strings.Contains(last.Frags["counts"], "team ended") {
		t.Errorf("last update before the stream ended: %q", last.Frags["counts"])
	}
	if _, err := f.st.CreateTeam(ctx, store.Roster{Name: "demo-team", Description: "the second one"}); err != nil {
		t.Fatal(err)
	}
	_, body, _ := get(t, ts.Client(), ts.URL+"/t/demo-team")
	if strings.Contains(body, "team ended") || strings.Contains(body, `data-member="dev"`) {
		t.Errorf("the new team is shown as the old one:\n%s", body)
	}
	_, body, _ = get(t, ts.Client(), ts.URL+"/")
	if !strings.Contains(body, `href="/a/demo-team-`) {
		t.Errorf("the archive is not listed:\n%s", body)
	}
}

// TestMergeQueueOnBoard: the merge queue of teammates in worktrees, read
// from the tasks' metadata, is shown under the board with each branch's
// outcome and conflicting files.
func TestMergeQueueOnBoard(t *testing.T) {
	f := newFixture(t)
	if _, err := f.team.Tasks().Update(context.Background(), "1", func(x *store.Task) error {
		x.Status, x.Owner = store.TaskInProgress, "dev"
		x.Metadata = map[string]any{"merge": map[string]any{"owner": "dev", "branch": "troupe/demo-team/dev", "status": "conflict",
			"conflicts": []any{map[string]any{"file": "api/posts.go"}}, "at": time.Now().UTC().Format(time.RFC3339Nano)}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_, ts := serve(t, f, web.Config{})
	_, body, _ := get(t, ts.Client(), ts.URL+"/t/demo-team")
	for _, want := range []string{
		`<h3>merge queue</h3>`,
		`<tr class="merge m-conflict"><td><a href="#task-1">#1</a>`,
		`<td><code>troupe/demo-team/dev</code></td><td>dev</td><td>conflict</td><td>conflicts in <code>api/posts.go</code>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the overview lacks %q", want)
		}
	}
}
