package team

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/store"
	natsstore "github.com/troupe-dev/troupe/internal/store/nats"
)

// beaterEnv makes TestNatsBeaterProcess the body of a teammate process that
// only beats: "URL TEAM MEMBER".
const beaterEnv = "TROUPE_TEST_NATS_BEATER"

// TestNatsBeaterProcess is not a test: run by TestNatsKilledMemberReaped as
// a child process, it beats for a member as a teammate process does, until
// it is killed.
func TestNatsBeaterProcess(t *testing.T) {
	args := strings.Fields(os.Getenv(beaterEnv))
	if len(args) != 3 {
		return // not a child
	}
	ctx := context.Background()
	st, err := natsstore.Open(ctx, args[0], natsstore.Options{})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	tm, err := st.Team(ctx, args[1])
	if err != nil {
		fmt.Println("team:", err)
		os.Exit(2)
	}
	if _, err := tm.UpdateRoster(ctx, func(r *store.Roster) error {
		if m, ok := r.Member(args[2]); ok {
			m.HeartbeatAt = time.Now().UTC()
		}
		return nil
	}); err != nil {
		fmt.Println("beat:", err)
		os.Exit(2)
	}
	fmt.Println("beating")
	beat(ctx, tm, func() []string { return []string{args[2]} }, nil)
}

// TestNatsKilledMemberReaped: on the nats store a member's liveness is its
// heartbeat key. While the key lives the member is alive, though the
// roster's own heartbeat is an hour old; once its process is killed the key
// expires after the TTL (the lease), the store reports the expiry, and the
// supervisor reaps the member: its in-progress task is back on the board.
func TestNatsKilledMemberReaped(t *testing.T) {
	if os.Getenv(beaterEnv) != "" {
		return
	}
	srv, err := natsstore.StartServer(natsstore.ServerConfig{Host: "127.0.0.1", Port: -1, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := natsstore.Open(ctx, srv.ClientURL(), natsstore.Options{HeartbeatTTL: Lease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	old := time.Now().UTC().Add(-time.Hour)
	tm, err := st.CreateTeam(ctx, store.Roster{Name: "reap", Members: []store.Member{
		{Name: store.LeadName, Status: store.StatusWorking},
		{Name: "w", Status: store.StatusWorking, HeartbeatAt: old},
	}})
	if err != nil {
		t.Fatal(err)
	}
	task, err := tm.Tasks().Create(ctx, store.Task{Subject: "build it"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Tasks().Claim(ctx, task.ID, "w"); err != nil {
		t.Fatal(err)
	}
	deaths, err := tm.(*natsstore.Team).WatchDeaths(ctx)
	if err != nil {
		t.Fatal(err)
	}

	child := exec.Command(os.Args[0], "-test.run=^TestNatsBeaterProcess$")
	child.Env = append(os.Environ(), beaterEnv+"="+srv.ClientURL()+" reap w")
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "beating\n" {
		_ = child.Process.Kill()
		_ = child.Wait()
		t.Fatalf("beater process said %q, want beating", line)
	}

	cfg := &Config{}
	cfg.Logger = slog.New(slog.DiscardHandler)
	sv := newSupervisor(cfg, emitter{agent: store.LeadName, log: slog.New(slog.DiscardHandler)}, func() []byte { return nil })
	r, err := tm.ReadRoster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := r.Member("w"); Dead(*m, time.Now()) {
		t.Fatalf("w is dead while it beats: heartbeat %s", m.HeartbeatAt)
	}
	if note, ok := sv.reapDead(ctx, tm); ok {
		t.Fatalf("reaped a beating member: %v", note)
	}

	if err := child.Process.Kill(); err != nil { // kill -9
		t.Fatal(err)
	}
	_ = child.Wait()
	select {
	case who := <-deaths:
		if who != "w" {
			t.Fatalf("heartbeat of %q expired, want w", who)
		}
	case <-ctx.Done():
		t.Fatal("the heartbeat key of the killed member never expired")
	}
	note, ok := sv.reapDead(ctx, tm)
	if !ok || !strings.Contains(note.Text, "w is dead") {
		t.Fatalf("reapDead after the TTL = %q, %v; want w reaped", note.Text, ok)
	}
	got, err := tm.Tasks().Get(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([2]string{store.TaskPending, ""}, [2]string{got.Status, got.Owner}); diff != "" {
		t.Errorf("task of the reaped member (-want +got):\n%s", diff)
	}
}
