package nats

import (
	"context"
	"testing"

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
