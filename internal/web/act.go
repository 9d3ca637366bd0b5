package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strings"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/teamview"
)

func escape(s string) string { return template.HTMLEscapeString(s) }

// maxForm bounds an action's form.
const maxForm = 64 << 10

// action guards a POST: actions enabled, the token (bearer or a logged-in
// session), the session's CSRF token; then runs do on the live team.
func (s *Server) action(do func(ctx context.Context, r *http.Request, ref teamRef, h *hub) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.cfg.Actions {
			actionReply(w, r, http.StatusForbidden, "", errors.New("actions are off: start the dashboard with --web-actions"))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		id := s.auth.identify(r)
		if !id.authed() {
			actionReply(w, r, http.StatusUnauthorized, "", errors.New("token required"))
			return
		}
		if !id.csrfOK(r) {
			actionReply(w, r, http.StatusForbidden, "", errors.New("bad or missing CSRF token"))
			return
		}
		ref := teamRef{Name: r.PathValue("team")}
		h, err := s.hub(r.Context(), ref)
		if err != nil {
			code := http.StatusNotFound
			if errors.Is(err, errBadName) {
				code = http.StatusBadRequest
			}
			actionReply(w, r, code, "", err)
			return
		}
		done, err := do(r.Context(), r, ref, h)
		if err != nil {
			actionReply(w, r, http.StatusBadRequest, "", err)
			return
		}
		if !strings.Contains(r.Header.Get("Accept"), "application/json") {
			http.Redirect(w, r, ref.Path(), http.StatusSeeOther)
			return
		}
		actionReply(w, r, http.StatusOK, done, nil)
	}
}

func actionReply(w http.ResponseWriter, r *http.Request, code int, done string, err error) {
	if !strings.Contains(r.Header.Get("Accept"), "application/json") && err != nil {
		http.Error(w, err.Error(), code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	body := map[string]string{"done": done}
	if err != nil {
		body = map[string]string{"error": err.Error()}
	}
	_ = json.NewEncoder(w).Encode(body)
}

// member checks that name is a member of the team's view.
func member(h *hub, name string) error {
	if err := validName(name); err != nil {
		return fmt.Errorf("%w: %v", errBadName, err)
	}
	known := false
	h.read(func(v *teamview.View, _ int, _ bool) { _, known = v.Member(name) })
	if !known {
		return fmt.Errorf("%s is not a member of %s", name, h.ref.Name)
	}
	return nil
}

func (s *Server) answer(ctx context.Context, r *http.Request, _ teamRef, h *hub) (string, error) {
	id := r.PostFormValue("request_id")
	approve := r.PostFormValue("approve") == "true"
	var req *Request
	h.read(func(v *teamview.View, _ int, _ bool) {
		for _, p := range v.Pending(false) {
			if p.ID == id && (p.Kind == teamevent.ProtocolPlanRequest || p.Kind == teamevent.ProtocolPermission) {
				req = &Request{ID: p.ID, Kind: p.Kind, From: p.From}
			}
		}
	})
	if req == nil {
		return "", fmt.Errorf("no pending request %q", id)
	}
	if err := s.cfg.Actor.Answer(ctx, h.t, *req, approve, strings.TrimSpace(r.PostFormValue("feedback"))); err != nil {
		return "", err
	}
	if approve {
		return "approved", nil
	}
	return "denied", nil
}

func (s *Server) send(ctx context.Context, r *http.Request, _ teamRef, h *hub) (string, error) {
	to, text := r.PostFormValue("to"), strings.TrimSpace(r.PostFormValue("text"))
	if err := member(h, to); err != nil {
		return "", err
	}
	if text == "" {
		return "", errors.New("empty message")
	}
	if err := s.cfg.Actor.Send(ctx, h.t, to, text); err != nil {
		return "", err
	}
	return "sent to " + to, nil
}

func (s *Server) stop(ctx context.Context, r *http.Request, _ teamRef, h *hub) (string, error) {
	name := r.PostFormValue("member")
	if err := member(h, name); err != nil {
		return "", err
	}
	if name == store.LeadName {
		return "", errors.New("the lead is stopped from its own terminal, not from here")
	}
	if err := s.cfg.Actor.Stop(ctx, h.t, name); err != nil {
		return "", err
	}
	return "asked " + name + " to shut down", nil
}
