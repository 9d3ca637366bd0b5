package nats

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
)

// TestBigBoard: a board of 5000 tasks, more than one multi-get answers
// (1024 keys), is listed whole, by the client that wrote it and by a fresh
// one (whose reads go to the server), and claims still work on it.
func TestBigBoard(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 5000 tasks; not run with -short")
	}
	const n = 5000
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, err := StartServer(ServerConfig{Port: -1, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	s := openStore(t, srv.ClientURL())
	defer s.Close()
	tm, err := s.CreateTeam(ctx, store.Roster{Name: "big", Members: []store.Member{{Name: "alice"}}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		task, err := tm.Tasks().Create(ctx, store.Task{Subject: fmt.Sprint("task ", i)})
		if err != nil {
			t.Fatalf("create task %d: %v", i, err)
		}
		if want := fmt.Sprint(i); task.ID != want {
			t.Fatalf("task %d got id %s", i, task.ID)
		}
	}
	fresh := openStore(t, srv.ClientURL())
	defer fresh.Close()
	ft, err := fresh.Team(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		tm   store.Team
	}{{"writer", tm}, {"fresh client", ft}} {
		t.Run(tc.name, func(t *testing.T) {
			list, err := tc.tm.Tasks().List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != n || list[0].ID != "1" || list[n-1].ID != fmt.Sprint(n) {
				t.Fatalf("List = %d tasks", len(list))
			}
			b, err := tc.tm.Tasks().Board(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Tasks) != n || len(b.Corrupt) != 0 {
				t.Fatalf("Board = %d tasks, %d corrupt", len(b.Tasks), len(b.Corrupt))
			}
		})
	}
	// A fresh client claims and creates on the big board.
	got, err := ft.Tasks().ClaimNext(ctx, "alice")
	if err != nil || got.ID != "1" {
		t.Fatalf("ClaimNext = %s, %v", got.ID, err)
	}
	next, err := ft.Tasks().Create(ctx, store.Task{Subject: "one more"})
	if err != nil || next.ID != fmt.Sprint(n+1) {
		t.Fatalf("Create on the big board = %s, %v", next.ID, err)
	}
}
