package web

import (
	"context"
	"log/slog"
	"testing"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/store/file"
)

// presenceTeam is a team whose store reports presence, counting the asks.
type presenceTeam struct {
	store.Team
	asks int
}

func (p *presenceTeam) Presence(context.Context) ([]store.Presence, error) {
	p.asks++
	return []store.Presence{{Member: "dev", Host: "build-1", PID: 7}}, nil
}

// TestPresenceAskedOnRosterChange checks that a refresh asks the store
// where members are only when the roster's members or processes changed
// (or presenceEvery passed): on NATS each ask is a round trip per member.
func TestPresenceAskedOnRosterChange(t *testing.T) {
	ctx := context.Background()
	st, err := file.Open(t.TempDir(), file.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tm, err := st.CreateTeam(ctx, store.Roster{Name: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	pt := &presenceTeam{Team: tm}
	h := newHub(&Server{cfg: Config{Logger: slog.New(slog.DiscardHandler)}}, teamRef{Name: "t1"}, pt)
	for range 3 {
		if err := h.refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if pt.asks != 1 {
		t.Fatalf("three refreshes of an unchanged roster asked %d times, want 1", pt.asks)
	}
	if _, err := tm.UpdateRoster(ctx, func(r *store.Roster) error {
		r.Members = append(r.Members, store.Member{Name: "dev", PID: 7})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := h.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if pt.asks != 2 {
		t.Fatalf("a refresh after a member joined asked %d times in all, want 2", pt.asks)
	}
	h.presenceAt = h.presenceAt.Add(-presenceEvery)
	if err := h.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if pt.asks != 3 {
		t.Fatalf("a refresh after presenceEvery asked %d times in all, want 3", pt.asks)
	}
}
