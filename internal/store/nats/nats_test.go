package nats

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/store/storetest"
)

// startServer starts a real embedded JetStream server on a random loopback
// port with its files in a temporary directory.
func startServer(t *testing.T, dir string) *server.Server {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	srv, err := StartServer(ServerConfig{Host: "127.0.0.1", Port: -1, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv
}

func openStore(t *testing.T, url string) *Store {
	t.Helper()
	s, err := Open(context.Background(), url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// damage writes bytes no reader can parse where a task or a roster is.
type damage struct{}

func (damage) CorruptTask(t *testing.T, s store.Store, team, id string) {
	t.Helper()
	ns := s.(*Store)
	tm, err := ns.OpenTeam(context.Background(), team)
	if err != nil {
		t.Fatal(err)
	}
	b := &board{t: tm}
	if _, err := ns.tasks.Put(context.Background(), b.taskKey(id), []byte(`{"id": "`+id+`", "subj`)); err != nil {
		t.Fatal(err)
	}
}

func (damage) CorruptRoster(t *testing.T, s store.Store, team string) {
	t.Helper()
	if _, err := s.(*Store).teams.Put(context.Background(), kvKeyTeam(team), []byte(`{"gen": "x", "roster": {`)); err != nil {
		t.Fatal(err)
	}
}

func TestConformance(t *testing.T) {
	storetest.RunWith(t, func(t *testing.T) func() store.Store {
		srv := startServer(t, "")
		return func() store.Store { return openStore(t, srv.ClientURL()) }
	}, storetest.Options{Damage: damage{}})
}

// TestHeartbeatKeys: a change of heartbeats alone goes to the members'
// heartbeat keys and leaves the roster's revision alone; ReadRoster shows
// the later heartbeat; a heartbeat moved back on purpose (a member marked
// stale) is written to the roster and wins over the key.
func TestHeartbeatKeys(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t, "")
	s := openStore(t, srv.ClientURL())
	defer s.Close()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st, err := s.CreateTeam(ctx, store.Roster{Name: "hb", Members: []store.Member{{Name: "w", Status: store.StatusIdle, HeartbeatAt: t0}}})
	if err != nil {
		t.Fatal(err)
	}
	tm := st.(*Team)
	rev := func() uint64 {
		t.Helper()
		_, seq, _, err := s.readTeam(ctx, "hb")
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	set := func(at time.Time) {
		t.Helper()
		if _, err := tm.UpdateRoster(ctx, func(r *store.Roster) error {
			m, _ := r.Member("w")
			m.HeartbeatAt = at
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	heartbeat := func() time.Time {
		t.Helper()
		r, err := tm.ReadRoster(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := r.Member("w")
		return m.HeartbeatAt
	}
	before := rev()
	set(t0.Add(time.Minute))
	if diff := cmp.Diff([]any{before, t0.Add(time.Minute)}, []any{rev(), heartbeat()}); diff != "" {
		t.Errorf("after a beat: roster revision, heartbeat (-want +got):\n%s", diff)
	}
	set(t0.Add(-time.Hour))
	if got := heartbeat(); !got.Equal(t0.Add(-time.Hour)) || rev() == before {
		t.Errorf("after marking stale: heartbeat %s (want %s), roster revision %d (want a new one)", got, t0.Add(-time.Hour), rev())
	}
}
