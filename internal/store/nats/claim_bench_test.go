package nats

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/store/file"
)

// BenchmarkClaims measures the store alone, in one process: the claim
// phase of `troupe bench store` (every claimer tries every task, in its own
// random order), without the start of the child
// processes that dominates that command's figures on a loaded machine.
//
//	go test ./internal/store/nats/ -run '^$' -bench Claims -benchtime 3x
// Each client is its own Store (its own connection, or its own handle on
// the state directory), as separate processes would have.

func benchStores(b *testing.B, backend string, n int) []store.Store {
	b.Helper()
	var out []store.Store
	switch backend {
	case "file":
		dir := b.TempDir()
		for range n {
			s, err := file.Open(dir, file.Options{})
			if err != nil {
				b.Fatal(err)
			}
			out = append(out, s)
		}
	case "nats":
		srv, err := StartServer(ServerConfig{Host: "127.0.0.1", Port: -1, Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
		for range n {
			s, err := Open(context.Background(), srv.ClientURL(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			out = append(out, s)
		}
	}
	b.Cleanup(func() {
		for _, s := range out {
			_ = s.Close()
		}
	})
	return out
}

// BenchmarkClaims: claims/s with 4 claimers (1 client × 4 goroutines) and
// 16 (4 clients × 4), 300 tasks a round; double claims fail it.
func BenchmarkClaims(b *testing.B) {
	const tasks = 300
	for _, backend := range []string{"file", "nats"} {
		for _, clients := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/%dx4", backend, clients), func(b *testing.B) {
				ctx := context.Background()
				stores := benchStores(b, backend, clients)
				var total time.Duration
				claims := 0
				for round := 0; b.Loop(); round++ {
					name := fmt.Sprintf("claims%d", round)
					lead, err := stores[0].CreateTeam(ctx, store.Roster{Name: name})
					if err != nil {
						b.Fatal(err)
					}
					for range tasks {
						if _, err := lead.Tasks().Create(ctx, store.Task{Subject: "t"}); err != nil {
							b.Fatal(err)
						}
					}
					teams := make([]store.Team, clients)
					for i, s := range stores {
						if teams[i], err = s.Team(ctx, name); err != nil {
							b.Fatal(err)
						}
						// Each client's first read of the board, as a
						// member's first look at it.
						if _, err := teams[i].Tasks().Get(ctx, "1"); err != nil {
							b.Fatal(err)
						}
					}
					var (
						mu   sync.Mutex
						won  = map[string][]string{}
						ferr error
						wg   sync.WaitGroup
					)
					began := time.Now()
					for c := range clients {
						for g := range 4 {
							wg.Go(func() {
								owner := fmt.Sprintf("c%d-g%d", c, g)
								rng := rand.New(rand.NewPCG(uint64(round), uint64(c*4+g)))
								for _, k := range rng.Perm(tasks) {
									id := strconv.Itoa(k + 1)
									_, err := teams[c].Tasks().Claim(ctx, id, owner)
									mu.Lock()
									switch {
									case err == nil:
										won[id] = append(won[id], owner)
									case !errors.Is(err, store.ErrClaimed) && !errors.Is(err, store.ErrNotPending) && ferr == nil:
										ferr = err
									}
									mu.Unlock()
								}
							})
						}
					}
					wg.Wait()
					total += time.Since(began)
					if ferr != nil {
						b.Fatal(ferr)
					}
					for id, w := range won {
						if len(w) != 1 {
							b.Fatalf("task %s claimed by %v", id, w)
						}
					}
					if len(won) != tasks {
						b.Fatalf("%d of %d tasks claimed", len(won), tasks)
					}
					claims += len(won)
				}
				b.ReportMetric(float64(claims)/total.Seconds(), "claims/s")
			})
		}
	}
}
