package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/usage"
	"github.com/troupe-dev/troupe/internal/web"
)

// chromiumPath is Debian's chromium, which CI installs (.ci/run).
const chromiumPath = "/usr/bin/chromium"

// browserFlags are what a headless Chromium needs in a container and
// nothing it does not: no sandbox (no user namespaces), no GPU, nothing
// reaching off the machine.
var browserFlags = []chromedp.ExecAllocatorOption{
	chromedp.ExecPath(chromiumPath),
	chromedp.Headless,
	chromedp.NoSandbox,
	chromedp.DisableGPU,
	chromedp.NoFirstRun,
	chromedp.NoDefaultBrowserCheck,
	chromedp.Flag("disable-background-networking", true),
	chromedp.Flag("disable-component-update", true),
	chromedp.Flag("disable-sync", true),
	chromedp.Flag("disable-dev-shm-usage", true),
	chromedp.WindowSize(1280, 800),
}

// TestWebDashboardInBrowser plays the demo's team on the bundled script
// (model latency 100 ms) with the dashboard beside it and watches it in a
// real headless Chromium: the three teammates appear, the backend's plan
// is approved from the page (the plan requests go to the human), and the
// four cards reach completed. It saves a 1280×800 screenshot in
// $TROUPE_TEST_ARTIFACTS (or the test's temporary directory).
func TestWebDashboardInBrowser(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("no Chromium at %s (apt-get install chromium; CI installs it): %v", chromiumPath, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	a := &app{ctx: ctx, stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, rawStdout: io.Discard, workspace: t.TempDir()}
	d, err := a.startDemo(100*time.Millisecond, team.ModeInProcess)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()

	created := make(chan string, 1)
	var planAsked sync.Once
	plans := make(chan struct{})
	d.cfg.OnEvent = func(ev store.Event) {
		if ev.Type == "team_create" {
			select {
			case created <- ev.Team:
			default:
			}
		}
	}
	// A human is attached (the page): plan requests are theirs to answer.
	d.cfg.HumanRequests = func(m store.Message) bool {
		if m.Type != store.TypePlanApprovalRequest {
			return false
		}
		planAsked.Do(func() { close(plans) })
		return true
	}
	sess, err := team.NewSession(d.cfg)
	if err != nil {
		t.Fatal(err)
	}
	it := team.NewInteractive(sess, func(team.Update) {})
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- it.Run(runCtx) }()
	defer func() {
		stopRun()
		<-ran
		sess.Close()
	}()

	srv, err := web.New(web.Config{Store: d.env.Store, Addr: "127.0.0.1:0", Actions: true, Actor: sessionActor{sess: sess},
		Prices: usage.DefaultPrices(), Running: func(string) map[string]bool { return runningSet(it.Running()) }})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srvCtx, stopSrv := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(srvCtx, ln) }()
	defer func() {
		stopSrv()
		<-served
		srv.Close()
	}()
	base := "http://" + ln.Addr().String()

	it.Submit(demoGoal)
	var name string
	select {
	case name = <-created:
	case <-ctx.Done():
		t.Fatal("the team was never created")
	}

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, browserFlags...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	// The browser lives as long as the context of the first call: the
	// steps' own time limits go on later calls.
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		start := time.Now()
		sctx, cancel := context.WithTimeout(bctx, 2*time.Minute)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			dctx, cancel := context.WithTimeout(bctx, 10*time.Second)
			defer cancel()
			html, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`document.querySelector('main') ? document.querySelector('main').outerHTML : document.documentElement.outerHTML`))
			t.Fatalf("%s: %v\npage:\n%s", what, err, html)
		}
		t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
	}
	step("log in and open the team",
		chromedp.Navigate(srv.LoginURL(base)),
		chromedp.WaitVisible(`body`),
		chromedp.Navigate(base+"/t/"+name),
		chromedp.WaitVisible(`#roster`),
	)
	step("three teammates appear",
		chromedp.WaitVisible(`#roster tr[data-member="analyst"]`),
		chromedp.WaitVisible(`#roster tr[data-member="backend"]`),
		chromedp.WaitVisible(`#roster tr[data-member="frontend"]`),
	)
	select {
	case <-plans:
	case <-ctx.Done():
		t.Fatal("the backend never asked for its plan's approval")
	}
	step("approve the backend's plan from the page",
		chromedp.WaitVisible(`#pending button.approve`),
		chromedp.SendKeys(`#pending input[name="feedback"]`, "Fine, go ahead."),
		chromedp.Click(`#pending button.approve`),
		// Answered, the request leaves the page.
		chromedp.WaitNotPresent(`#pending button.approve`),
	)
	step("four cards reach completed",
		chromedp.Poll[chromedp.Void](`document.querySelectorAll('#board .col-completed .card').length === 4`),
	)
	completed, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('#board .col-completed .card').length`))
	if err != nil || completed != 4 {
		t.Errorf("%d completed cards (%v), want 4", completed, err)
	}
	// The work has a price: the page shows what it cost, not $0.
	priced, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`/\$(?!0\.0000)\d+\.\d{4}/.test(document.body.innerText)`))
	if err != nil || !priced {
		t.Errorf("the page shows no cost above $0.0000 (%v)", err)
	}
	png, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("TROUPE_TEST_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "web-dashboard.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot (%d bytes): %s", len(png), shot)
	// The approval reached the backend as the human's, through the lead's
	// session: the journal says who approved.
	tm, err := d.env.Store.Team(ctx, name)
	if err != nil {
		as, aerr := d.env.Store.Archives(ctx, name)
		if aerr != nil || len(as) == 0 {
			t.Fatalf("team %s: %v; archives: %v %v", name, err, as, aerr)
		}
		if tm, err = d.env.Store.OpenArchive(ctx, as[len(as)-1].ID); err != nil {
			t.Fatal(err)
		}
	}
	events, err := tm.Journal().Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var answers []string
	for _, e := range events {
		if ev, err := teamevent.Decode(e); err == nil {
			if p, ok := ev.Event.(teamevent.Protocol); ok && p.Kind == store.TypePlanApprovalResponse {
				answers = append(answers, fmt.Sprintf("%s approve=%v", ev.Agent, p.Approve != nil && *p.Approve))
			}
		}
	}
	if len(answers) == 0 || answers[0] != "human approve=true" {
		t.Errorf("plan answers in the journal: %v, want the human's approval first", answers)
	}
}
