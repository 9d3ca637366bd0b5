package file

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
)

func TestZZClaimProf(t *testing.T) {
	tm := newTestTeam(t, "/dev/shm/zzclaim"+strconv.Itoa(rand.IntN(1e9)))
	ctx := context.Background()
	for range 1000 {
		tm.Tasks().Create(ctx, store.Task{Subject: "bench"})
	}
	began := time.Now()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for _, k := range rng.Perm(1000) {
				tm.Tasks().Claim(ctx, strconv.Itoa(k+1), "g"+strconv.Itoa(g))
			}
		})
	}
	wg.Wait()
	t.Logf("%v", time.Since(began))
}
