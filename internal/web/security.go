package web

import (
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
	"sync"
)

// contentSecurityPolicy allows scripts, styles and connections from the
// server itself only: no inline script or style, no frames, no plugins.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// cookieName holds a logged-in browser's session.
const cookieName = "troupe_web"

// auth decides who may see and who may act. A browser logs in once (a
// one-time code in a URL, or the token posted to /login) and then holds
// an HttpOnly SameSite=Strict cookie naming its session; a client sends
// the token as a bearer header. Each session has its CSRF token, which
// every action form carries.
type auth struct {
	token    string
	loopback bool

	mu       sync.Mutex
	codes    map[string]bool   // one-time login codes not yet used
	sessions map[string]string // cookie value -> CSRF token
}

func newAuth(token string, loopback bool) *auth {
	return &auth{token: token, loopback: loopback, codes: map[string]bool{}, sessions: map[string]string{}}
}

// oneTimeCode makes a login code good for one use.
func (a *auth) oneTimeCode() string {
	c := randomHex(16)
	a.mu.Lock()
	a.codes[c] = true
	a.mu.Unlock()
	return c
}

// useCode consumes a one-time code.
func (a *auth) useCode(c string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c == "" || !a.codes[c] {
		return false
	}
	delete(a.codes, c)
	return true
}

// tokenOK compares a presented token with the server's in constant time.
func (a *auth) tokenOK(t string) bool {
	return a.token != "" && t != "" && subtle.ConstantTimeCompare([]byte(t), []byte(a.token)) == 1
}

// newSession starts a browser session and returns its cookie value.
func (a *auth) newSession() string {
	id := randomHex(24)
	a.mu.Lock()
	a.sessions[id] = randomHex(24)
	a.mu.Unlock()
	return id
}

// who is what a request proves: a bearer token, or a session (with its
// CSRF token).
type who struct {
	bearer  bool
	session string
	csrf    string
}

func (w who) authed() bool { return w.bearer || w.session != "" }

func (a *auth) identify(r *http.Request) who {
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") && a.tokenOK(strings.TrimPrefix(h, "Bearer ")) {
		return who{bearer: true}
	}
	if c, err := r.Cookie(cookieName); err == nil {
		a.mu.Lock()
		csrf, ok := a.sessions[c.Value]
		a.mu.Unlock()
		if ok {
			return who{session: c.Value, csrf: csrf}
		}
	}
	return who{}
}

// mayView: loopback serves anyone on the machine; elsewhere the token is
// needed.
func (a *auth) mayView(w who) bool { return a.token == "" || a.loopback || w.authed() }

// csrfOK checks an action's CSRF token; a bearer client needs none (a
// browser cannot send the header cross-site).
func (w who) csrfOK(r *http.Request) bool {
	if w.bearer {
		return true
	}
	got := r.PostFormValue("csrf")
	return w.csrf != "" && got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(w.csrf)) == 1
}

// secure wraps every response with the security headers, refuses a Host
// that does not belong to a loopback server (DNS rebinding), and refuses a
// viewer without the token where one is needed.
func (s *Server) secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if s.loopback && !loopbackHost(r.Host) {
			http.Error(w, "this dashboard answers on loopback names only", http.StatusMisdirectedRequest)
			return
		}
		if r.URL.Path == "/login" || strings.HasPrefix(r.URL.Path, "/static/") {
			next.ServeHTTP(w, r)
			return
		}
		if !s.auth.mayView(s.auth.identify(r)) {
			if r.Header.Get("Accept") == "text/event-stream" || r.Method != http.MethodGet {
				http.Error(w, "token required", http.StatusUnauthorized)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="troupe"`)
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
			_ = s.pages.render(w, "login", loginPage{})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// login takes a one-time code (GET, from the printed URL) or the token
// (POST, from the login form) and sets the session cookie.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	ok := false
	switch r.Method {
	case http.MethodGet:
		if r.URL.Query().Get("code") == "" {
			_ = s.pages.render(w, "login", loginPage{})
			return
		}
		ok = s.auth.useCode(r.URL.Query().Get("code"))
	case http.MethodPost:
		ok = s.auth.tokenOK(r.PostFormValue("token"))
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if !ok {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		_ = s.pages.render(w, "login", loginPage{Failed: true})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.auth.newSession(), Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}
