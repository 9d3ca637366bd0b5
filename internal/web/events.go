package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/troupe-dev/troupe/internal/teamview"
)

// An update is one server-sent event: {"v": the version of the team's
// view, "ts": the time of the oldest journal event it folds in (Unix
// nanoseconds, 0 for none: how late the update is), "gone": the team
// ended, "frags": {element id: its HTML}} with only the sections that
// changed since what this client was last sent.

// keepAlive is how often an idle stream gets a comment, so proxies and
// the browser keep it open.
const keepAlive = 25 * time.Second

// events streams a page's updates: one at once, then one per change of the
// team's view. The stream is fed by the hub, which wakes on the store's
// watch; nothing here polls.
func (s *Server) events(w http.ResponseWriter, r *http.Request, ref teamRef) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	q := r.URL.Query()
	view := q.Get("view")
	member := q.Get("member")
	switch view {
	case "overview":
		q = url.Values{"view": {view}}
	case "timeline":
		q = timelineQuery(q)
	case "transcript":
		if err := validName(member); err != nil {
			s.fail(w, fmt.Errorf("%w: %v", errBadName, err))
			return
		}
		q = url.Values{"view": {view}, "member": {member}}
	default:
		http.Error(w, "view must be overview, timeline or transcript", http.StatusBadRequest)
		return
	}
	h, err := s.hub(r.Context(), ref)
	if err != nil {
		s.fail(w, err)
		return
	}
	p := s.pageFor(r, "", &ref)
	key := q.Encode() + "|" + p.CSRF
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	wake, stop := h.subscribe()
	defer stop()
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	sent := -1
	have := map[string]int{} // fragment id -> the revision this client has
	for {
		r0, version, gone := h.cached(key, func(v *teamview.View, ver int, oldest time.Time, g bool) map[string]string {
			return s.renderFrags(s.ctx, h, p, q, v, g)
		})
		if version != sent {
			if msg := r0.message(have); msg != nil {
				if _, err := w.Write(msg); err != nil {
					return
				}
				fl.Flush()
			}
			sent = version
		}
		if gone {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-wake:
		case <-tick.C:
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

// message is the SSE message that brings a client holding the fragment
// revisions have up to this version (and notes what it then holds); nil
// when nothing it shows changed.
func (r *rendered) message(have map[string]int) []byte {
	var b []byte
	b = fmt.Appendf(b, "id: %d\nevent: update\ndata: {\"v\":%d,\"ts\":%d", r.version, r.version, r.ts)
	if r.gone {
		b = append(b, `,"gone":true`...)
	}
	b = append(b, `,"frags":{`...)
	n := 0
	for _, f := range r.frags {
		if rev, ok := have[f.id]; ok && rev == f.rev {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, f.json...)
		have[f.id] = f.rev
		n++
	}
	if n == 0 && !r.gone {
		return nil
	}
	return append(b, "}}\n\n"...)
}

// renderFrags renders one page's sections, by element id. It runs under
// the hub's lock, once per version and query.
func (s *Server) renderFrags(ctx context.Context, h *hub, p page, q url.Values, v *teamview.View, gone bool) map[string]string {
	frags := map[string]string{}
	switch q.Get("view") {
	case "overview":
		d := s.teamData(p, v, h.depsLocked(), gone)
		for _, id := range []string{"counts", "pending", "roster", "board", "usage"} {
			frags[id] = s.pages.fragment(id, d)
		}
	case "timeline":
		frags["timeline"] = s.pages.fragment("entries", s.timelineData(p, v, q))
	case "transcript":
		d, err := s.transcriptData(ctx, p, h.t, q.Get("member"))
		if err != nil {
			frags["transcript"] = `<p class="error">` + escape(err.Error()) + `</p>`
		} else {
			frags["transcript"] = s.pages.fragment("items", d)
		}
	}
	return frags
}
