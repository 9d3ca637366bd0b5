package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/usage"
	"github.com/troupe-dev/troupe/internal/web"
)

// defaultWebAddr is where `troupe web` listens unless told otherwise:
// loopback, so nothing off the machine sees the team without a token.
const defaultWebAddr = "127.0.0.1:7777"

// webFlags configure the dashboard: `troupe web`'s own, or --web beside a
// run.
type webFlags struct {
	addr    string
	actions bool
	token   string
}

// add declares the flags; beside names the address flag --web (beside a
// run, off when empty) instead of --addr.
func (f *webFlags) add(fs *pflag.FlagSet, beside bool) {
	if beside {
		fs.StringVar(&f.addr, "web", "", "serve the live web dashboard on this address beside the run (loopback, e.g. 127.0.0.1:7777; any other address needs a token)")
	} else {
		fs.StringVar(&f.addr, "addr", defaultWebAddr, "address to listen on (any address but loopback requires a token)")
	}
	fs.BoolVar(&f.actions, "web-actions", false, "let the dashboard answer permission and plan requests, message members and stop them (needs the token)")
	fs.StringVar(&f.token, "web-token", "", "the dashboard's token (default: a random one, printed); required off loopback")
}

func (a *app) webCmd() *cobra.Command {
	var f webFlags
	cmd := &cobra.Command{
		Use:   "web",
		Short: "Serve the live web dashboard of this workspace's teams",
		Long: `Serves a dashboard of the workspace's teams, live and archived: for a team its
roster, board, timeline, transcripts and usage, updated live from the team's
journal. It binds to loopback unless --addr says otherwise; any other address
needs the token (printed with a link that logs a browser in once, or given
with --web-token), sent as "Authorization: Bearer TOKEN" by other clients.
With --web-actions the page answers permission and plan requests, messages
members (from: human) and stops them; actions always need the token.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.openStore(false)
			if err != nil {
				return err
			}
			defer s.Close()
			dir, _ := a.Workspace()
			setStopNotice("troupe: stopping the web dashboard")
			stop, err := a.startWeb(a.ctx, f, s, web.StoreActor{}, nil, dir)
			if err != nil {
				return err
			}
			<-a.ctx.Done()
			return stop()
		},
	}
	f.add(cmd.Flags(), false)
	return cmd
}

// startWeb serves the dashboard on f.addr until the returned stop is
// called; it prints where (and the login link when a token is needed) on
// stderr.
func (a *app) startWeb(ctx context.Context, f webFlags, st store.Store, actor web.Actor, running func(string) map[string]bool, workspace string) (stop func() error, err error) {
	loop, err := web.IsLoopback(f.addr)
	if err != nil {
		return nil, withCode(ExitUsage, fmt.Errorf("--web address %q: %w", f.addr, err))
	}
	var prices usage.Prices
	if workspace != "" {
		if prices, err = usage.LoadPrices(workspace); err != nil {
			return nil, withCode(ExitError, err)
		}
	}
	stateDir, _ := a.StateDir()
	srv, err := web.New(web.Config{Store: st, Addr: f.addr, Token: f.token, Actions: f.actions, Actor: actor, Prices: prices,
		Running: running, ArchiveIDs: archiveIDs(stateDir)})
	if err != nil {
		return nil, withCode(ExitUsage, err)
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return nil, withCode(ExitError, fmt.Errorf("web dashboard: %w", err))
	}
	base := "http://" + ln.Addr().String()
	printWebBanner(a.stderr, srv, base, loop, f.token != "")
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	return func() error {
		cancel()
		err := <-done
		srv.Close()
		return err
	}, nil
}

func printWebBanner(w io.Writer, srv *web.Server, base string, loop, given bool) {
	fmt.Fprintf(w, "troupe: web dashboard on %s\n", base)
	if srv.Token() == "" {
		return
	}
	fmt.Fprintf(w, "troupe: log a browser in once with %s\n", srv.LoginURL(base))
	if !given {
		fmt.Fprintf(w, "troupe: web token (Authorization: Bearer …): %s\n", srv.Token())
	}
	if !loop {
		fmt.Fprintln(w, "troupe: the dashboard is off loopback: it is plain HTTP, put it behind TLS on an untrusted network")
	}
}

// archiveIDs lists the archives of a file store's state directory (the
// store can open any of them by id, but has no list of them all).
func archiveIDs(stateDir string) func(context.Context) ([]string, error) {
	return func(context.Context) ([]string, error) {
		ents, err := os.ReadDir(filepath.Join(stateDir, "archive"))
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		var ids []string
		for _, e := range ents {
			if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
				ids = append(ids, e.Name())
			}
		}
		return ids, nil
	}
}

// sessionActor answers from the dashboard through the session running
// beside it, so the lead knows the request is answered; what the session
// does not hold (a request it never saw) goes through the store.
type sessionActor struct {
	sess *team.Session
	web.StoreActor
}

func (s sessionActor) Answer(ctx context.Context, t store.Team, req web.Request, approve bool, feedback string) error {
	if err := s.sess.AnswerAsHuman(ctx, req.ID, approve, feedback); err == nil {
		return nil
	}
	return s.StoreActor.Answer(ctx, t, req, approve, feedback)
}

func (s sessionActor) Send(ctx context.Context, t store.Team, to, text string) error {
	if own, err := s.sess.Team(); err != nil || own.Name() != t.Name() {
		return s.StoreActor.Send(ctx, t, to, text) // another team of the workspace
	}
	return s.sess.SendAsHuman(ctx, to, text)
}

// checkBeside refuses dashboard flags without --web, before anything
// starts.
func (f webFlags) checkBeside() error {
	if f.addr == "" && (f.actions || f.token != "") {
		return withCode(ExitUsage, errors.New("--web-actions and --web-token go with --web ADDR"))
	}
	return nil
}

// webBeside starts the dashboard beside a run when --web was given; the
// returned stop is safe to call when it was not.
func (a *app) webBeside(f webFlags, st store.Store, sess *team.Session, running func(string) map[string]bool, workspace string) (func(), error) {
	if err := f.checkBeside(); err != nil {
		return nil, err
	}
	if f.addr == "" {
		return func() {}, nil
	}
	stop, err := a.startWeb(a.ctx, f, st, sessionActor{sess: sess}, running, workspace)
	if err != nil {
		return nil, err
	}
	return func() { _ = stop() }, nil
}

func runningSet(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}
