package nats

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/troupe-dev/troupe/internal/store"
)

// TestHubRestartKeepsAcks: messages acked before the server restarts are
// never handed out again; those handed out but not acked are, to a reader
// that starts after it; nothing is lost, and the client that lived through
// the restart keeps working.
func TestHubRestartKeepsAcks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	srv, err := StartServer(ServerConfig{Port: -1, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	url := srv.ClientURL()
	port := srv.Addr().(*net.TCPAddr).Port
	s := openStore(t, url)
	defer s.Close()
	tm, err := s.CreateTeam(ctx, store.Roster{Name: "t", Members: []store.Member{{Name: "alice"}}})
	if err != nil {
		t.Fatal(err)
	}
	mb := tm.Mailbox()
	for i := range 6 {
		if _, err := mb.Send(ctx, store.Message{ID: fmt.Sprint("m", i), From: "human", To: "alice", Content: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := mb.Receive(ctx, "alice")
	if err != nil || len(got) != 6 {
		t.Fatalf("Receive = %d messages, %v", len(got), err)
	}
	if err := mb.Ack(ctx, "alice", "m2"); err != nil {
		t.Fatal(err)
	}

	srv.Shutdown()
	srv.WaitForShutdown()
	srv, err = StartServer(ServerConfig{Port: port, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()

	// The client that lived through the restart sends again (it
	// reconnects on its own) and hands out only what is new to it.
	for {
		_, err := mb.Send(ctx, store.Message{ID: "m6", From: "human", To: "alice", Content: "6"})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("send after the restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // reconnecting: a retry, not a wait for a result
	}
	again, err := mb.Receive(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"6"}, contents(again)); diff != "" {
		t.Errorf("same client after the restart (-want +got):\n%s", diff)
	}
	// A reader started after the restart (the old one gone) gets every
	// unacked message once.
	s.Close()
	s2 := openStore(t, url)
	defer s2.Close()
	tm2, err := s2.Team(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := tm2.Mailbox().Receive(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"3", "4", "5", "6"}, contents(fresh)); diff != "" {
		t.Errorf("new reader after the restart (-want +got):\n%s", diff)
	}
}

func contents(ms []store.Message) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.Content)
	}
	return out
}

// freePort returns a loopback port free when asked.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startCluster starts n embedded servers routed into one JetStream cluster.
func startCluster(t *testing.T, n int) []*server.Server {
	t.Helper()
	ports := make([]int, n)
	var routes []string
	for i := range ports {
		ports[i] = freePort(t)
		routes = append(routes, "nats-route://127.0.0.1:"+strconv.Itoa(ports[i]))
	}
	srvs := make([]*server.Server, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range srvs {
		wg.Go(func() {
			srvs[i], errs[i] = StartServer(ServerConfig{
				Port: -1, Dir: t.TempDir(), ServerName: fmt.Sprint("n", i),
				ClusterName: "troupe", ClusterHost: "127.0.0.1", ClusterPort: ports[i], Routes: routes,
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		t.Cleanup(func() { srvs[i].Shutdown(); srvs[i].WaitForShutdown() })
	}
	// JetStream needs a meta leader before the first bucket is made.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := false
		for _, s := range srvs {
			if s.JetStreamIsLeader() {
				ok = true
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no JetStream meta leader after 30s")
		}
		time.Sleep(20 * time.Millisecond) // the server offers no leader-elected event
	}
	return srvs
}

// retry runs op until it succeeds, fails for good, or ctx ends: while a
// node dies, requests time out or find no leader for a while.
func retry[T any](ctx context.Context, op func() (T, error), final func(error) bool) (T, error) {
	for {
		v, err := op()
		if err == nil || final(err) || ctx.Err() != nil {
			return v, err
		}
		time.Sleep(20 * time.Millisecond) // back off before the retry
	}
}

// TestClusterNodeKilledMidRun: three servers keep every bucket and stream
// on all three; one is shut down while clients on every node claim tasks
// and exchange messages. No task is claimed twice, none is left unclaimed,
// no message is lost and none is handed out twice.
func TestClusterNodeKilledMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srvs := startCluster(t, 3)
	var urls []string
	for _, s := range srvs {
		urls = append(urls, strings.TrimPrefix(s.ClientURL(), "nats://"))
	}
	all := strings.Join(urls, ",")
	openR3 := func() *Store {
		var s *Store
		var err error
		s, err = retry(ctx, func() (*Store, error) {
			// One attempt's requests get a deadline of their own: a
			// bucket's creation the new cluster never answers (a loaded
			// machine, a leader still settling) is tried again, not
			// waited for until the whole test's deadline.
			actx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			return Open(actx, all, Options{Replicas: 3})
		}, func(error) bool { return false })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	lead := openR3()
	const tasks, msgs, claimers = 60, 200, 6
	tm, err := lead.CreateTeam(ctx, store.Roster{Name: "c", Members: []store.Member{{Name: "alice"}}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range tasks {
		if _, err := tm.Tasks().Create(ctx, store.Task{Subject: fmt.Sprint("task ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	final := func(err error) bool {
		return errors.Is(err, store.ErrNoTask) || errors.Is(err, store.ErrUnknownMember) || errors.Is(err, store.ErrClosed)
	}

	var mu sync.Mutex
	claimedBy := map[string][]string{}
	received := map[string]int{}
	var wg sync.WaitGroup
	halfway := make(chan struct{})
	var once sync.Once
	for w := range claimers {
		c := openR3()
		ct, err := c.Team(ctx, "c")
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			owner := fmt.Sprint("w", w)
			for {
				got, err := retry(ctx, func() (store.Task, error) { return ct.Tasks().ClaimNext(ctx, owner) }, final)
				if errors.Is(err, store.ErrNoTask) {
					return
				}
				if err != nil {
					t.Errorf("%s: ClaimNext: %v", owner, err)
					return
				}
				mu.Lock()
				claimedBy[got.ID] = append(claimedBy[got.ID], owner)
				if len(claimedBy) == tasks/3 {
					once.Do(func() { close(halfway) })
				}
				mu.Unlock()
			}
		})
	}
	sender := openR3()
	st, _ := sender.Team(ctx, "c")
	wg.Go(func() {
		for i := range msgs {
			id := fmt.Sprint("msg-", i)
			_, err := retry(ctx, func() (store.Message, error) {
				return st.Mailbox().Send(ctx, store.Message{ID: id, From: "human", To: "alice", Content: id})
			}, final)
			if err != nil {
				t.Errorf("send %s: %v", id, err)
				return
			}
		}
	})
	reader := openR3()
	rt, _ := reader.Team(ctx, "c")
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			mu.Lock()
			n := len(received)
			mu.Unlock()
			if n >= msgs || ctx.Err() != nil {
				return
			}
			ms, err := retry(ctx, func() ([]store.Message, error) { return rt.Mailbox().Receive(ctx, "alice") }, final)
			if err != nil {
				t.Errorf("receive: %v", err)
				return
			}
			mu.Lock()
			for _, m := range ms {
				received[m.ID]++
			}
			mu.Unlock()
			last := ms[len(ms)-1].ID
			if _, err := retry(ctx, func() (struct{}, error) { return struct{}{}, rt.Mailbox().Ack(ctx, "alice", last) }, final); err != nil {
				t.Errorf("ack: %v", err)
				return
			}
		}
	}()

	select {
	case <-halfway:
	case <-ctx.Done():
		t.Fatal("claims never reached a third of the board")
	}
	srvs[0].Shutdown()
	wg.Wait()
	<-readDone

	lost, dup, double := 0, 0, 0
	for i := range msgs {
		switch n := received[fmt.Sprint("msg-", i)]; {
		case n == 0:
			lost++
		case n > 1:
			dup += n - 1
		}
	}
	for _, owners := range claimedBy {
		if len(owners) > 1 {
			double++
		}
	}
	board, err := retry(ctx, func() ([]store.Task, error) { return rt.Tasks().List(ctx) }, final)
	if err != nil {
		t.Fatal(err)
	}
	unclaimed := 0
	for _, tk := range board {
		if tk.Owner == "" || tk.Status != store.TaskInProgress {
			unclaimed++
		}
		if owners := claimedBy[tk.ID]; len(owners) == 1 && owners[0] != tk.Owner {
			t.Errorf("task %s: claimed by %s, owned by %s", tk.ID, owners[0], tk.Owner)
		}
	}
	t.Logf("lost=%d duplicated=%d double_claims=%d unclaimed=%d claims=%d", lost, dup, double, unclaimed, len(claimedBy))
	if lost != 0 || dup != 0 || double != 0 || unclaimed != 0 {
		t.Errorf("lost=%d duplicated=%d double_claims=%d unclaimed=%d, want all 0", lost, dup, double, unclaimed)
	}
}
