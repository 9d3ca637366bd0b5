package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/troupe-dev/troupe/internal/teamview"
)

// update is one server-sent event: the version of the team's view, the
// time of the oldest journal event it folds in (Unix nanoseconds, 0 for
// none: how late the update is), and the page's sections rendered anew.
type update struct {
	V     int               `json:"v"`
	TS    int64             `json:"ts"`
	Gone  bool              `json:"gone,omitempty"`
	Frags map[string]string `json:"frags"`
}

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
	for {
		msg, version, gone := h.cached(key, func(v *teamview.View, ver int, oldest time.Time, g bool) []byte {
			return s.renderUpdate(s.ctx, h, p, q, v, ver, oldest, g)
		})
		if version != sent {
			if _, err := w.Write(msg); err != nil {
				return
			}
			fl.Flush()
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

// renderUpdate renders one page's sections as an SSE message. It runs
// under the hub's lock, once per version and query.
func (s *Server) renderUpdate(ctx context.Context, h *hub, p page, q url.Values, v *teamview.View, version int, oldest time.Time, gone bool) []byte {
	u := update{V: version, Gone: gone, Frags: map[string]string{}}
	if !oldest.IsZero() {
		u.TS = oldest.UnixNano()
	}
	switch q.Get("view") {
	case "overview":
		d := s.teamData(p, v, h.depsLocked(), gone)
		for _, id := range []string{"counts", "pending", "roster", "board", "usage"} {
			u.Frags[id] = s.pages.fragment(id, d)
		}
	case "timeline":
		u.Frags["timeline"] = s.pages.fragment("entries", s.timelineData(p, v, q))
	case "transcript":
		d, err := s.transcriptData(ctx, p, h.t, q.Get("member"))
		if err != nil && !errors.Is(err, context.Canceled) {
			u.Frags["transcript"] = `<p class="error">` + escape(err.Error()) + `</p>`
		} else {
			u.Frags["transcript"] = s.pages.fragment("items", d)
		}
	}
	b, _ := json.Marshal(u)
	return fmt.Appendf(nil, "id: %d\nevent: update\ndata: %s\n\n", version, b)
}
