// Package web is troupe's live dashboard: one page per workspace listing
// its teams, live and archived, and for a team its roster, board, timeline,
// transcripts, usage chart and the requests waiting for a human, kept live
// with server-sent events fed by the store's journal watch.
//
// Pages are rendered on the server with html/template (every model and
// message text escaped; markdown rendered by goldmark with raw HTML and
// dangerous links dropped); the only script is one embedded file, so the
// Content-Security-Policy allows no inline script. Actions (answering
// requests, messaging and stopping members) exist only when the server is
// built with them, and need the token and a CSRF token.
//
// It reads teams through store and teamview only: it must never depend on
// the team wing, the terminal UI or the CLI. What it does to a live team
// goes through an Actor (StoreActor writes to the mailbox as the human).
package web

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/usage"
)

// Config configures a Server.
type Config struct {
	// Store holds the teams shown.
	Store store.Store
	// Addr is where the server listens; it decides whether a token is
	// required (any address that is not loopback).
	Addr string
	// Token authorises a browser (through a login) or a client (as a
	// bearer header). Required off loopback and with Actions; New makes
	// one when it is empty and needed (see Server.Token).
	Token string
	// Actions enables answering requests, messaging and stopping members.
	Actions bool
	// Actor performs the actions; nil: a StoreActor on Store.
	Actor Actor
	// Prices price the usage (nil: costs stay 0).
	Prices usage.Prices
	// ArchiveIDs lists the store's archived teams (nil: none listed; an
	// archive can still be opened by its id).
	ArchiveIDs func(ctx context.Context) ([]string, error)
	// Running names the teammates whose runtime is up, when the server
	// runs beside the team (nil: unknown).
	Running func(team string) map[string]bool
	Logger  *slog.Logger
}

// Server serves the dashboard. Its hubs (one per team watched) live until
// Close.
type Server struct {
	cfg      Config
	loopback bool
	pages    *pages
	auth     *auth

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	hubs map[string]*hub
}

// ErrNeedToken is returned by New for an address off loopback given no
// way to make a token.
var ErrNeedToken = errors.New("a token is required off loopback")

// New builds a server. It makes a token when one is needed and none was
// given.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("web: no store")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Actor == nil {
		cfg.Actor = StoreActor{}
	}
	loop, err := IsLoopback(cfg.Addr)
	if err != nil {
		return nil, err
	}
	if cfg.Token == "" && (!loop || cfg.Actions) {
		cfg.Token = randomHex(24)
	}
	p, err := newPages()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, loopback: loop, pages: p, ctx: ctx, cancel: cancel, hubs: map[string]*hub{}}
	s.auth = newAuth(cfg.Token, loop)
	return s, nil
}

// Token is the token clients need ("" when none is needed).
func (s *Server) Token() string { return s.cfg.Token }

// LoginURL returns a URL under base that logs a browser in once: it sets
// the session cookie and forgets the code. "" when no token is needed.
func (s *Server) LoginURL(base string) string {
	if s.cfg.Token == "" {
		return ""
	}
	return strings.TrimRight(base, "/") + "/login?code=" + s.auth.oneTimeCode()
}

// Serve serves on ln until ctx ends, then shuts down.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return s.ctx }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-ctx.Done():
		case <-s.ctx.Done():
		}
		s.cancel() // ends the event streams, so Shutdown does not wait on them
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err := srv.Serve(ln)
	s.cancel()
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Close stops the hubs and waits for them.
func (s *Server) Close() error {
	s.cancel()
	s.wg.Wait()
	return nil
}

// IsLoopback reports whether addr (host:port, or a host) listens on
// loopback only. An empty host listens everywhere.
func IsLoopback(addr string) (bool, error) {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	if host == "localhost" {
		return true, nil
	}
	if host == "" {
		return false, nil
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	if ip == nil {
		// A name that is not localhost may resolve anywhere.
		return false, nil
	}
	return ip.IsLoopback(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// teamRef names what a page shows: a live team by name, or an archive.
type teamRef struct {
	Archive bool
	Name    string // the team's name, or the archive's id
}

// Path is where the team's pages live.
func (r teamRef) Path() string {
	if r.Archive {
		return "/a/" + r.Name
	}
	return "/t/" + r.Name
}

func (r teamRef) key() string { return r.Path() }

// open opens the team a ref names.
func (s *Server) open(ctx context.Context, r teamRef) (store.Team, error) {
	if r.Archive {
		return s.cfg.Store.OpenArchive(ctx, r.Name)
	}
	return s.cfg.Store.Team(ctx, r.Name)
}

// hub returns the live hub of a team, starting it on first use.
func (s *Server) hub(ctx context.Context, r teamRef) (*hub, error) {
	s.mu.Lock()
	h, ok := s.hubs[r.key()]
	if ok && h.ended() {
		// The team it followed is gone; a team of that name now is
		// another one.
		delete(s.hubs, r.key())
		ok = false
	}
	s.mu.Unlock()
	if ok {
		select {
		case <-h.ready:
			return h, h.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err := validName(r.Name); err != nil {
		return nil, fmt.Errorf("%w: %v", errBadName, err)
	}
	t, err := s.open(ctx, r)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if h, ok = s.hubs[r.key()]; !ok {
		h = newHub(s, r, t)
		s.hubs[r.key()] = h
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			h.run(s.ctx)
		}()
	}
	s.mu.Unlock()
	select {
	case <-h.ready:
		if h.err != nil {
			s.mu.Lock()
			if s.hubs[r.key()] == h {
				delete(s.hubs, r.key())
			}
			s.mu.Unlock()
		}
		return h, h.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// validName refuses a name that could not be a team's, a member's or an
// archive's: it is never used to build a path, but it is refused early.
func validName(n string) error {
	if n == "" || len(n) > 200 || n == "." || n == ".." || strings.ContainsAny(n, "/\\\x00") || strings.Contains(n, "..") {
		return fmt.Errorf("bad name %q", n)
	}
	return nil
}
