package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/web"
)

// webReport is the output of `troupe bench web`.
type webReport struct {
	Clients        int     `json:"clients"`
	ModelLatencyMS int64   `json:"model_latency_ms"`
	Runs           int     `json:"runs"`
	BaseCPUSeconds float64 `json:"base_cpu_s"` // median demo run without the dashboard
	WebCPUSeconds  float64 `json:"web_cpu_s"`  // median demo run with it and the clients
	AddedCPU       float64 `json:"added_cpu_s"`
	AddedCPUPct    float64 `json:"added_cpu_pct"`
	WallSeconds    float64 `json:"web_wall_s"`
	Updates        int     `json:"updates_received"`
	LatencyP50MS   float64 `json:"latency_p50_ms"`
	LatencyP99MS   float64 `json:"latency_p99_ms"`
	LatencyMaxMS   float64 `json:"latency_max_ms"`
	GoVersion      string  `json:"go_version"`
	CPUs           int     `json:"cpus"`
}

func (a *app) benchWebCmd() *cobra.Command {
	var (
		clients, runs int
		latency       time.Duration
	)
	cmd := &cobra.Command{
		Use:   "web",
		Short: "Measure the web dashboard under load: SSE clients on one team during the demo",
		Long: `Plays the demo's team (in process, on the bundled script) without the dashboard,
then with it and --clients event streams on the team's overview, and prints as
JSON the CPU the dashboard and its clients added (median of --runs each; the
clients run in this process, so their reading counts too) and the latency of
the updates: from the journal event an update carries to its arrival at a
client (p50, p99, max).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := a.benchWeb(a.ctx, clients, runs, latency)
			if err != nil {
				return withCode(ExitError, err)
			}
			enc := json.NewEncoder(a.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(rep)
		},
	}
	cmd.Flags().IntVar(&clients, "clients", 20, "event-stream clients on the team")
	cmd.Flags().IntVar(&runs, "runs", 3, "demo runs with and without the dashboard (the median counts)")
	cmd.Flags().DurationVar(&latency, "model-latency", 100*time.Millisecond, "delay of every scripted model reply")
	return cmd
}

func (a *app) benchWeb(ctx context.Context, clients, runs int, latency time.Duration) (*webReport, error) {
	if runs < 1 || clients < 0 {
		return nil, fmt.Errorf("--runs %d, --clients %d: need at least one run and no negative clients", runs, clients)
	}
	rep := &webReport{Clients: clients, ModelLatencyMS: latency.Milliseconds(), Runs: runs, GoVersion: runtime.Version(), CPUs: runtime.NumCPU()}
	var base, with []float64
	var lat []time.Duration
	for i := 0; i < runs; i++ {
		cpu, _, _, err := a.benchWebRun(ctx, 0, latency, false)
		if err != nil {
			return nil, err
		}
		base = append(base, cpu)
		cpu, wall, l, err := a.benchWebRun(ctx, clients, latency, true)
		if err != nil {
			return nil, err
		}
		with = append(with, cpu)
		lat = append(lat, l...)
		rep.WallSeconds = max(rep.WallSeconds, wall)
	}
	rep.BaseCPUSeconds, rep.WebCPUSeconds = median(base), median(with)
	rep.AddedCPU = rep.WebCPUSeconds - rep.BaseCPUSeconds
	if rep.BaseCPUSeconds > 0 {
		rep.AddedCPUPct = 100 * rep.AddedCPU / rep.BaseCPUSeconds
	}
	rep.Updates = len(lat)
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	if n := len(lat); n > 0 {
		rep.LatencyP50MS, rep.LatencyP99MS, rep.LatencyMaxMS = ms(lat[n/2]), ms(lat[min(n-1, n*99/100)]), ms(lat[n-1])
	}
	return rep, nil
}

// median is the middle of xs (0 when it is empty).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// benchWebRun plays the demo once, with the dashboard and its clients if
// withWeb, and returns the process's CPU seconds over the run, its wall
// time, and each update's latency.
func (a *app) benchWebRun(ctx context.Context, clients int, latency time.Duration, withWeb bool) (float64, float64, []time.Duration, error) {
	tmp, err := os.MkdirTemp("", "troupe-bench-web-")
	if err != nil {
		return 0, 0, nil, err
	}
	defer os.RemoveAll(tmp)
	sub := *a
	sub.workspace, sub.stateDir = filepath.Join(tmp, "ws"), ""
	d, err := sub.startDemo(latency, team.ModeInProcess)
	if err != nil {
		return 0, 0, nil, err
	}
	defer d.close()
	created := make(chan string, 1)
	d.cfg.OnEvent = func(ev store.Event) {
		if ev.Type == "team_create" {
			select {
			case created <- ev.Team:
			default:
			}
		}
	}
	sess, err := team.NewSession(d.cfg)
	if err != nil {
		return 0, 0, nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var lat []time.Duration
	var mu sync.Mutex
	var wg sync.WaitGroup
	if withWeb {
		srv, err := web.New(web.Config{Store: d.env.Store, Addr: "127.0.0.1:0"})
		if err != nil {
			return 0, 0, nil, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, 0, nil, err
		}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(rctx, ln) }()
		defer func() {
			cancel()
			wg.Wait()
			<-served
			srv.Close()
		}()
		base := "http://" + ln.Addr().String()
		wg.Add(1)
		go func() {
			defer wg.Done()
			var name string
			select {
			case name = <-created:
			case <-rctx.Done():
				return
			}
			for i := 0; i < clients; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l := streamLatencies(rctx, base+"/t/"+name+"/events?view=overview")
					mu.Lock()
					lat = append(lat, l...)
					mu.Unlock()
				}()
			}
		}()
	}
	cpu0, start := cpuSeconds(), time.Now()
	res, runErr := sess.RunHeadless(ctx, demoGoal)
	closeErr := sess.Close()
	cpu, wall := cpuSeconds()-cpu0, time.Since(start).Seconds()
	cancel()
	wg.Wait()
	if runErr != nil {
		return 0, 0, nil, runErr
	}
	if closeErr != nil {
		return 0, 0, nil, closeErr
	}
	if res == nil || res.End != team.EndDone {
		return 0, 0, nil, fmt.Errorf("the demo did not finish: %+v", res)
	}
	mu.Lock()
	defer mu.Unlock()
	return cpu, wall, lat, nil
}

// streamLatencies reads an event stream until it ends and returns, for
// each update that carries an event time, how long after it the update
// arrived.
func streamLatencies(ctx context.Context, url string) []time.Duration {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var out []time.Duration
	r := bufio.NewReaderSize(resp.Body, 1<<16)
	first := true
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return out
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		now := time.Now()
		// Only the time is read (as a browser would parse the whole
		// update, but that is the browser's CPU, not troupe's).
		ts := updateTS(data)
		if ts == 0 {
			continue
		}
		if first {
			// The first update is the state at connection: its events
			// are as old as the team.
			first = false
			continue
		}
		out = append(out, now.Sub(time.Unix(0, ts)))
	}
}

// updateTS reads the "ts" field of an update (web.update: "v" then "ts"
// lead the object).
func updateTS(data string) int64 {
	_, rest, ok := strings.Cut(data, `"ts":`)
	if !ok {
		return 0
	}
	end := strings.IndexAny(rest, ",}")
	if end < 0 {
		return 0
	}
	var ts int64
	if json.Unmarshal([]byte(rest[:end]), &ts) != nil {
		return 0
	}
	return ts
}
