package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	assembly "github.com/troupe-dev/troupe/internal/app"
	"github.com/troupe-dev/troupe/internal/store"
)

// storeReport is the output of `troupe bench store --json`.
type storeReport struct {
	// send -> recipient woken, sender and receiver in different processes,
	// fsynced appends, one message in flight at a time.
	SendWakeP50US float64 `json:"send_wake_p50_us"`
	SendWakeP99US float64 `json:"send_wake_p99_us"`
	SendWakeMaxUS float64 `json:"send_wake_max_us"`
	WakeSamples   int     `json:"wake_samples"`

	// Concurrent sender processes against one draining reader.
	MessagesPerS      float64 `json:"messages_per_s"`
	Messages          int     `json:"messages"`
	Senders           int     `json:"senders"`
	MessagesPerSender int     `json:"messages_per_sender"`
	Lost              int     `json:"lost"`
	Duplicated        int     `json:"duplicated"`

	// Concurrent claimers (goroutines in several processes) over one board.
	ClaimsPerS      float64 `json:"claims_per_s"`
	Tasks           int     `json:"tasks"`
	ClaimProcesses  int     `json:"claim_processes"`
	ClaimGoroutines int     `json:"claim_goroutines_per_process"`
	DoubleClaims    int     `json:"double_claims"`
	Unclaimed       int     `json:"unclaimed"`

	// Store is the store measured: "file", or the --store URL (no token).
	Store     string `json:"store"`
	Watcher   string `json:"watcher"`
	GoVersion string `json:"go_version"`
	CPUs      int    `json:"cpus"`
}

type storeBenchParams struct {
	senders, perSender, wakeSamples, tasks, claimProcs, claimGoroutines int
	dir                                                                 string
	poll                                                                bool
	// store is --store: a store URL to measure instead of a file store in
	// a temporary directory.
	store string
}

// benchStoreCmd is `troupe bench store`.
func (a *app) benchStoreCmd() *cobra.Command {
	var (
		p      storeBenchParams
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Measure the store: wake latency across processes, delivery, claims",
		Long: `Runs the file store in a temporary state directory (or the store --store
names, such as a troupe hub's nats:// URL) with child processes
(this binary, hidden subcommand "bench store child"):
  - wake: a receiver process blocks in Receive; this process sends one message
    at a time; the latency is from the start of Send (including its fsync) to
    the receiver's Receive returning it.
  - delivery: --senders processes send --messages each to one inbox while this
    process reads and acks; lost and duplicated are counted by message id.
  - claims: --claim-processes processes of --claim-goroutines goroutines each
    try to claim every one of --tasks tasks in random order.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.store.url != "" {
				// --store-token reaches the children through $NATS_TOKEN.
				if _, err := a.storeURL("."); err != nil {
					return err
				}
				p.store = a.store.url
			}
			rep, err := runStoreBench(cmd.Context(), p)
			if err != nil {
				return withCode(ExitError, err)
			}
			if asJSON {
				return writeJSON(a.stdout, rep)
			}
			fmt.Fprintf(a.stdout, "send->wake across processes: p50 %.0f µs, p99 %.0f µs (%d samples, %s)\n",
				rep.SendWakeP50US, rep.SendWakeP99US, rep.WakeSamples, rep.Watcher)
			fmt.Fprintf(a.stdout, "delivery: %.0f messages/s from %d processes, %d lost, %d duplicated\n",
				rep.MessagesPerS, rep.Senders, rep.Lost, rep.Duplicated)
			fmt.Fprintf(a.stdout, "claims: %.0f/s by %d×%d claimers over %d tasks, %d double claims, %d unclaimed\n",
				rep.ClaimsPerS, rep.ClaimProcesses, rep.ClaimGoroutines, rep.Tasks, rep.DoubleClaims, rep.Unclaimed)
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.IntVar(&p.wakeSamples, "wake-samples", 1000, "send->wake samples")
	f.IntVar(&p.senders, "senders", 4, "sender processes")
	f.IntVar(&p.perSender, "messages", 1000, "messages per sender")
	f.IntVar(&p.tasks, "tasks", 1000, "tasks to claim")
	f.IntVar(&p.claimProcs, "claim-processes", 4, "claimer processes")
	f.IntVar(&p.claimGoroutines, "claim-goroutines", 4, "claimer goroutines per process")
	f.StringVar(&p.dir, "dir", "", "state directory to use (default: a new temporary one, removed after)")
	f.BoolVar(&p.poll, "poll-only", false, "disable fsnotify (measures the poll fallback)")
	cmd.AddCommand(a.benchStoreChildCmd())
	return cmd
}

// benchStoreChildCmd is the hidden `troupe bench store child`, the other
// process of each measurement.
func (a *app) benchStoreChildCmd() *cobra.Command {
	var (
		mode, dir string
		id, n     int
		poll      bool
	)
	cmd := &cobra.Command{
		Use:    "child",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.store.url != "" {
				if _, err := a.storeURL("."); err != nil {
					return err
				}
			}
			return storeBenchChild(cmd.Context(), a.stdout, mode, dir, a.store.url, id, n, poll)
		},
	}
	f := cmd.Flags()
	f.StringVar(&mode, "mode", "", "wake, send or claim")
	f.StringVar(&dir, "dir", "", "state directory")
	f.IntVar(&id, "id", 0, "child number")
	f.IntVar(&n, "n", 0, "messages to send or tasks to claim")
	f.BoolVar(&poll, "poll-only", false, "disable fsnotify")
	return cmd
}

const benchTeam = "bench"

func storeBenchChild(ctx context.Context, stdout io.Writer, mode, dir, storeURL string, id, n int, poll bool) error {
	if storeURL == "" {
		storeURL = "file:" + dir
	}
	s, err := assembly.OpenStore(ctx, storeURL, assembly.StorePollOnly(poll))
	if err != nil {
		return err
	}
	defer s.Close()
	t, err := s.Team(ctx, benchTeam)
	if err != nil {
		return err
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	switch mode {
	case "wake":
		// Report each message's latency once it is acked, so that the next
		// send does not wait on this ack's lock.
		fmt.Fprintln(out, "ready")
		out.Flush()
		for {
			ms, err := t.Mailbox().Receive(ctx, "alice")
			now := time.Now()
			if err != nil {
				return err
			}
			if err := t.Mailbox().Ack(ctx, "alice", ms[len(ms)-1].ID); err != nil {
				return err
			}
			for _, m := range ms {
				if m.Content == "stop" {
					return nil
				}
				fmt.Fprintln(out, now.Sub(m.Timestamp).Microseconds())
			}
			out.Flush()
		}
	case "send":
		for i := range n {
			if _, err := t.Mailbox().Send(ctx, store.Message{From: "bob", To: "carol", Content: fmt.Sprintf("%d/%d", id, i)}); err != nil {
				return err
			}
		}
	case "claim":
		// Ready, then wait for the go: stdin closed by the parent.
		fmt.Fprintln(out, "ready")
		out.Flush()
		_, _ = io.Copy(io.Discard, os.Stdin)
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			ferr error
		)
		gs, _ := strconv.Atoi(os.Getenv("TROUPE_BENCH_GOROUTINES"))
		for g := range max(gs, 1) {
			wg.Go(func() {
				owner := fmt.Sprintf("p%d-g%d", id, g)
				rng := rand.New(rand.NewPCG(uint64(id), uint64(g)))
				for _, k := range rng.Perm(n) {
					tk, err := t.Tasks().Claim(ctx, strconv.Itoa(k+1), owner)
					mu.Lock()
					if err == nil {
						fmt.Fprintf(out, "%s %s\n", tk.ID, owner)
					} else if !errors.Is(err, store.ErrNotPending) && ferr == nil {
						ferr = err
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return ferr
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	return nil
}

// childCommand returns the path of this troupe binary for child processes.
// os.Args[0] comes first: under testscript the binary is the test binary
// reached through a "troupe" link, which os.Executable would resolve away.
func childCommand() (string, error) {
	if p, err := exec.LookPath(os.Args[0]); err == nil {
		return p, nil
	}
	return os.Executable()
}

func runStoreBench(ctx context.Context, p storeBenchParams) (*storeReport, error) {
	if p.senders < 1 || p.perSender < 1 || p.wakeSamples < 1 || p.tasks < 1 || p.claimProcs < 1 || p.claimGoroutines < 1 {
		return nil, withCode(ExitUsage, errors.New("every count must be at least 1"))
	}
	dir := p.dir
	if dir == "" && p.store == "" {
		tmp, err := os.MkdirTemp("", "troupe-bench-store-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	target := "file:" + dir
	if p.store != "" {
		target = p.store
	}
	s, err := assembly.OpenStore(ctx, target, assembly.StorePollOnly(p.poll))
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if err := s.DeleteTeam(ctx, benchTeam); err != nil && !errors.Is(err, store.ErrTeamNotFound) {
		return nil, err
	}
	if _, err := s.CreateTeam(ctx, store.Roster{Name: benchTeam, Description: "troupe bench store",
		Members: []store.Member{{Name: "alice"}, {Name: "bob"}, {Name: "carol"}}}); err != nil {
		return nil, err
	}
	t, err := s.Team(ctx, benchTeam)
	if err != nil {
		return nil, err
	}
	exe, err := childCommand()
	if err != nil {
		return nil, err
	}
	// start runs a child; what is written to its stdin, closed, is the
	// claimers' go.
	var goPipes []io.WriteCloser
	start := func(mode string, id, n int, env ...string) (*exec.Cmd, io.ReadCloser, error) {
		args := []string{"bench", "store", "child", "--mode", mode, "--dir", dir, "--id", fmt.Sprint(id), "--n", fmt.Sprint(n)}
		if p.poll {
			args = append(args, "--poll-only")
		}
		if p.store != "" {
			args = append(args, "--store", p.store)
		}
		cmd := exec.CommandContext(ctx, exe, args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, nil, err
		}
		in, err := cmd.StdinPipe()
		if err != nil {
			return nil, nil, err
		}
		goPipes = append(goPipes, in)
		return cmd, out, cmd.Start()
	}
	rep := &storeReport{
		Senders: p.senders, MessagesPerSender: p.perSender, Messages: p.senders * p.perSender,
		WakeSamples: p.wakeSamples, Tasks: p.tasks, ClaimProcesses: p.claimProcs, ClaimGoroutines: p.claimGoroutines,
		Watcher: "fsnotify", GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
	}
	if p.poll {
		rep.Watcher = "poll"
	}
	if p.store != "" {
		rep.Store = redactStoreURL(p.store)
		rep.Watcher = "subscription"
	} else {
		rep.Store = "file"
	}

	// 1. Wake latency.
	cmd, out, err := start("wake", 0, 0)
	if err != nil {
		return nil, err
	}
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "ready" {
		cmd.Wait()
		return nil, fmt.Errorf("wake child did not start")
	}
	mb := t.Mailbox()
	var lat []float64
	for range p.wakeSamples {
		if _, err := mb.Send(ctx, store.Message{From: "bob", To: "alice", Content: "ping"}); err != nil {
			return nil, err
		}
		if !lines.Scan() {
			cmd.Wait()
			return nil, fmt.Errorf("wake child ended early")
		}
		us, err := strconv.ParseFloat(lines.Text(), 64)
		if err != nil {
			return nil, fmt.Errorf("wake child: %q", lines.Text())
		}
		lat = append(lat, us)
	}
	if _, err := mb.Send(ctx, store.Message{From: "bob", To: "alice", Content: "stop"}); err != nil {
		return nil, err
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("wake child: %w", err)
	}
	slices.Sort(lat)
	rep.SendWakeP50US = storePercentile(lat, 0.50)
	rep.SendWakeP99US = storePercentile(lat, 0.99)
	rep.SendWakeMaxUS = lat[len(lat)-1]

	// 2. Delivery under concurrent senders.
	began := time.Now()
	var senders []*exec.Cmd
	for i := range p.senders {
		c, o, err := start("send", i, p.perSender)
		if err != nil {
			return nil, err
		}
		go io.Copy(io.Discard, o)
		senders = append(senders, c)
	}
	sendersDone := make(chan error, 1)
	go func() {
		var first error
		for _, c := range senders {
			if err := c.Wait(); err != nil && first == nil {
				first = err
			}
		}
		sendersDone <- first
	}()
	recvCtx, stopRecv := context.WithCancel(ctx)
	defer stopRecv()
	var sendErr error
	sent := make(chan struct{}) // closed once sendErr is set
	go func() {
		sendErr = <-sendersDone
		close(sent)
		stopRecv()
	}()
	seen := map[string]bool{}
	contents := map[string]bool{}
	deliveries := 0
	for len(contents) < rep.Messages {
		ms, err := mb.Receive(recvCtx, "carol")
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
		if len(ms) == 0 {
			break // senders are done and nothing is left
		}
		for _, m := range ms {
			deliveries++
			if !seen[m.ID] {
				seen[m.ID] = true
				contents[m.Content] = true
			}
		}
		if err := mb.Ack(ctx, "carol", ms[len(ms)-1].ID); err != nil {
			return nil, err
		}
	}
	elapsed := time.Since(began)
	// The senders' exit, not the end of receiving, orders the read of
	// sendErr after its write.
	<-sent
	if sendErr != nil {
		return nil, fmt.Errorf("sender: %w", sendErr)
	}
	rep.MessagesPerS = float64(len(contents)) / elapsed.Seconds()
	rep.Lost = rep.Messages - len(contents)
	rep.Duplicated = deliveries - len(seen)

	// 3. Claims.
	for range p.tasks {
		if _, err := t.Tasks().Create(ctx, store.Task{Subject: "bench"}); err != nil {
			return nil, err
		}
	}
	// The clock starts once every claimer has opened the store and the
	// team and says so: the figure is of claims, not of process starts
	// (which dominated it with 16 processes of this binary).
	type result struct {
		out string
		err error
	}
	results := make(chan result, p.claimProcs)
	var gos []io.WriteCloser
	for i := range p.claimProcs {
		c, o, err := start("claim", i, p.tasks, fmt.Sprintf("TROUPE_BENCH_GOROUTINES=%d", p.claimGoroutines))
		if err != nil {
			return nil, err
		}
		in := bufio.NewReader(o)
		if line, err := in.ReadString('\n'); err != nil || line != "ready\n" {
			_ = c.Process.Kill()
			_ = c.Wait()
			return nil, fmt.Errorf("claimer %d did not get ready: %q %v", i, line, err)
		}
		gos = append(gos, goPipes[len(goPipes)-1])
		go func() {
			b, _ := io.ReadAll(in)
			results <- result{string(b), c.Wait()}
		}()
	}
	began = time.Now()
	for _, g := range gos {
		_ = g.Close() // the claimers go at EOF
	}
	claims := map[string][]string{}
	for range p.claimProcs {
		r := <-results
		if r.err != nil {
			return nil, fmt.Errorf("claimer: %w", r.err)
		}
		for _, l := range strings.Split(strings.TrimSpace(r.out), "\n") {
			if id, owner, ok := strings.Cut(l, " "); ok {
				claims[id] = append(claims[id], owner)
			}
		}
	}
	elapsed = time.Since(began)
	list, err := t.Tasks().List(ctx)
	if err != nil {
		return nil, err
	}
	successes := 0
	for _, tk := range list {
		w := claims[tk.ID]
		successes += len(w)
		switch {
		case len(w) == 0:
			rep.Unclaimed++
		case len(w) > 1:
			rep.DoubleClaims += len(w) - 1
		case w[0] != tk.Owner:
			rep.DoubleClaims++ // the file disagrees with the winner
		}
	}
	rep.ClaimsPerS = float64(successes) / elapsed.Seconds()
	return rep, nil
}

func storePercentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted)-1) + 0.5)
	return sorted[i]
}

// redactStoreURL is u without a token or password.
func redactStoreURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "?"
	}
	p.User = nil
	q := p.Query()
	if q.Has("token") {
		q.Set("token", "REDACTED")
		p.RawQuery = q.Encode()
	}
	return p.String()
}
