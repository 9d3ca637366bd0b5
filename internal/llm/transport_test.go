package llm

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestTunedTransportKeepsConnections: eight agents calling one API at once,
// three times over, reuse their eight connections through a tuned
// transport; net/http's default keeps two and opens new ones every round.
func TestTunedTransportKeepsConnections(t *testing.T) {
	const agents, rounds = 8, 3
	count := func(tune bool) int64 {
		var opened atomic.Int64
		var arrived sync.WaitGroup
		var gate chan struct{}
		var mu sync.Mutex
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Every round's calls are in flight at once: each waits for
			// the others before it is answered.
			mu.Lock()
			g := gate
			mu.Unlock()
			arrived.Done()
			<-g
			_, _ = io.WriteString(w, "ok")
		}))
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				opened.Add(1)
			}
		}
		srv.Start()
		defer srv.Close()
		tr := http.DefaultTransport.(*http.Transport).Clone()
		defer tr.CloseIdleConnections()
		if tune {
			TuneTransport(tr)
		}
		client := &http.Client{Transport: tr}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for range rounds {
			mu.Lock()
			gate = make(chan struct{})
			mu.Unlock()
			arrived.Add(agents)
			var done sync.WaitGroup
			for range agents {
				done.Go(func() {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
					resp, err := client.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				})
			}
			arrived.Wait()
			close(gate)
			done.Wait()
		}
		return opened.Load()
	}
	// A connection goes back to the pool just after its body is read: a
	// call of the next round may dial rather than wait for it, at most
	// once a round. Untuned, each round after the first opens at least
	// agents-2.
	if got, most := count(true), int64(agents+rounds-1); got > most {
		t.Errorf("tuned: %d connections opened for %d agents over %d rounds, want at most %d", got, agents, rounds, most)
	}
	if got, least := count(false), int64(2*agents); got < least {
		t.Errorf("untuned: %d connections opened, want at least %d; the test no longer tells the two apart", got, least)
	}
}
