package file

// Multi-process tests: the test binary re-executes itself as children
// (TestMain sees childEnv) that use the store concurrently with each other
// and with the parent, and are killed with SIGKILL part-way.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/troupe-dev/troupe/internal/store"
)

const childEnv = "TROUPE_STORE_TEST_CHILD"

// runChild is the body of a child process; it returns the exit code.
func runChild(mode string) int {
	dir := os.Getenv("TROUPE_T_DIR")
	n, _ := strconv.Atoi(os.Getenv("TROUPE_T_N"))
	id, _ := strconv.Atoi(os.Getenv("TROUPE_T_ID"))
	switch mode {
	case "fsize":
		return fsizeChild(dir, n)
	case "readonly":
		return readOnlyChild(dir)
	}
	s, err := Open(dir, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	ctx := context.Background()
	tm, err := s.Team(ctx, "t1")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	switch mode {
	case "send":
		for i := range n {
			_, err := tm.Mailbox().Send(ctx, store.Message{From: "bob", To: "alice", Content: fmt.Sprintf("%d/%d", id, i)})
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
	case "read":
		// Print every message handed out (one write per line, before the
		// ack), then ack. The parent kills us when it has seen enough.
		for {
			ms, err := tm.Mailbox().Receive(ctx, "alice")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			for _, m := range ms {
				os.Stdout.WriteString(m.ID + " " + m.Content + "\n")
			}
			if err := tm.Mailbox().Ack(ctx, "alice", ms[len(ms)-1].ID); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
	case "claim":
		var wg sync.WaitGroup
		var mu sync.Mutex
		failed := false
		for g := range 4 {
			wg.Go(func() {
				owner := fmt.Sprintf("p%d-g%d", id, g)
				rng := rand.New(rand.NewPCG(uint64(id), uint64(g)))
				for _, k := range rng.Perm(n) {
					t, err := tm.Tasks().Claim(ctx, strconv.Itoa(k+1), owner)
					mu.Lock()
					switch {
					case err == nil:
						fmt.Fprintf(out, "%s %s\n", t.ID, owner)
					case !errors.Is(err, store.ErrNotPending):
						fmt.Fprintln(os.Stderr, err)
						failed = true
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if failed {
			return 1
		}
	case "roster":
		for i := range n {
			_, err := tm.UpdateRoster(ctx, func(r *store.Roster) error {
				r.Members = append(r.Members, store.Member{Name: fmt.Sprintf("p%d-%d", id, i), Status: store.StatusIdle})
				return nil
			})
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown child mode", mode)
		return 2
	}
	return 0
}

// child starts the test binary as a child in mode.
func child(t *testing.T, dir, mode string, id, n int) (*exec.Cmd, io.ReadCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, "TROUPE_T_DIR="+dir,
		fmt.Sprintf("TROUPE_T_N=%d", n), fmt.Sprintf("TROUPE_T_ID=%d", id))
	cmd.Stderr = &prefixWriter{t: t, prefix: fmt.Sprintf("%s %d: ", mode, id)}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, out
}

type prefixWriter struct {
	t      *testing.T
	prefix string
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s%s", w.prefix, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func newTestTeam(t *testing.T, dir string, members ...string) *Team {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	r := store.Roster{Name: "t1"}
	for _, m := range members {
		r.Members = append(r.Members, store.Member{Name: m})
	}
	if _, err := s.CreateTeam(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	tm, err := s.OpenTeam("t1")
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// 8 processes send to one inbox while its reader, in another process,
// consumes; the reader is killed with SIGKILL twice and restarted. Every
// message must be delivered, and none twice once repeats of an id (handed
// out, not acked when killed) are folded.
func TestMultiProcessInboxSurvivesKilledReader(t *testing.T) {
	t.Parallel()
	senders, each := 8, 500
	if testing.Short() {
		each = 200
	}
	total := senders * each
	dir := t.TempDir()
	newTestTeam(t, dir, "alice", "bob")

	var sendCmds []*exec.Cmd
	for i := range senders {
		cmd, out := child(t, dir, "send", i, each)
		go io.Copy(io.Discard, out)
		sendCmds = append(sendCmds, cmd)
	}

	byID := map[string]string{}   // id -> content
	contents := map[string]bool{} // content -> seen
	repeats := 0
	killAt := []int{total / 3, 2 * total / 3}
	for len(contents) < total {
		cmd, out := child(t, dir, "read", 0, 0)
		sc := bufio.NewScanner(out)
		killed := false
		for sc.Scan() {
			id, content, ok := strings.Cut(sc.Text(), " ")
			if !ok {
				continue // a line cut by the kill
			}
			if prev, dup := byID[id]; dup {
				if prev != content {
					t.Fatalf("id %s carried %q and %q", id, prev, content)
				}
				repeats++
				continue
			}
			byID[id] = content
			if contents[content] {
				t.Fatalf("content %q delivered under two ids", content)
			}
			contents[content] = true
			if killed {
				continue
			}
			if len(killAt) > 0 && len(contents) >= killAt[0] {
				// SIGKILL. What the reader printed before it died is still
				// read (it may have acked it already): only the pipe ends
				// the loop.
				killAt = killAt[1:]
				cmd.Process.Kill()
				killed = true
				continue
			}
			if len(contents) == total {
				cmd.Process.Kill()
				break
			}
		}
		err := cmd.Wait()
		if !killed && len(contents) < total {
			t.Fatalf("reader ended with %d of %d messages: %v", len(contents), total, err)
		}
	}
	for _, cmd := range sendCmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("sender: %v", err)
		}
	}
	for w := range senders {
		for i := range each {
			if !contents[fmt.Sprintf("%d/%d", w, i)] {
				t.Errorf("message %d/%d lost", w, i)
			}
		}
	}
	t.Logf("%d messages, %d handed out again after a kill (folded by id)", total, repeats)
}

// 16 claimers in 4 processes race over every task: each is claimed exactly
// once, by the owner its file names.
func TestMultiProcessClaimsExactlyOnce(t *testing.T) {
	t.Parallel()
	n := 500
	if testing.Short() {
		n = 300
	}
	dir := t.TempDir()
	tm := newTestTeam(t, dir)
	now := tm.s.opts.Now().UTC()
	for i := 1; i <= n; i++ {
		tk := store.Task{ID: strconv.Itoa(i), Subject: "t", Status: store.TaskPending, CreatedAt: now, UpdatedAt: now}
		data, err := store.MarshalTask(&tk)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tm.dir, "tasks", tk.ID+".json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	type result struct {
		lines []string
		err   error
	}
	results := make(chan result, 4)
	for p := range 4 {
		cmd, out := child(t, dir, "claim", p, n)
		go func() {
			data, _ := io.ReadAll(out)
			results <- result{strings.Split(strings.TrimSpace(string(data)), "\n"), cmd.Wait()}
		}()
	}
	winners := map[string][]string{}
	for range 4 {
		r := <-results
		if r.err != nil {
			t.Fatalf("claimer: %v", r.err)
		}
		for _, l := range r.lines {
			if id, owner, ok := strings.Cut(l, " "); ok {
				winners[id] = append(winners[id], owner)
			}
		}
	}
	list, err := tm.Tasks().List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != n {
		t.Fatalf("%d tasks on the board, want %d", len(list), n)
	}
	for _, tk := range list {
		if w := winners[tk.ID]; len(w) != 1 || w[0] != tk.Owner || tk.Status != store.TaskInProgress {
			t.Errorf("task %s: claimed by %v; file says owner %q status %s", tk.ID, w, tk.Owner, tk.Status)
		}
	}
}

// Many processes update the roster at once while the parent keeps reading
// the raw file: it always parses, and no update is lost.
func TestMultiProcessRosterUpdates(t *testing.T) {
	t.Parallel()
	procs, each := 6, 40
	if testing.Short() {
		each = 10
	}
	dir := t.TempDir()
	tm := newTestTeam(t, dir)
	var cmds []*exec.Cmd
	for p := range procs {
		cmd, out := child(t, dir, "roster", p, each)
		go io.Copy(io.Discard, out)
		cmds = append(cmds, cmd)
	}
	done := make(chan error, 1)
	go func() {
		var first error
		for _, c := range cmds {
			if err := c.Wait(); err != nil && first == nil {
				first = err
			}
		}
		done <- first
	}()
	path := filepath.Join(tm.dir, "config.json")
	reads := 0
	for finished := false; !finished; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("roster child: %v", err)
			}
			finished = true
		default:
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var r store.Roster
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatalf("config.json does not parse during updates: %v\n%s", err, data)
		}
		reads++
	}
	r, err := tm.ReadRoster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Members) != procs*each {
		t.Fatalf("%d members after %d updates", len(r.Members), procs*each)
	}
	seen := map[string]bool{}
	for _, m := range r.Members {
		seen[m.Name] = true
	}
	for p := range procs {
		for i := range each {
			if !seen[fmt.Sprintf("p%d-%d", p, i)] {
				t.Errorf("update p%d-%d lost", p, i)
			}
		}
	}
	t.Logf("config.json read %d times during the updates", reads)
}
