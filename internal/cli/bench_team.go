package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	assembly "github.com/troupe-dev/troupe/internal/app"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/teamkey"
	"github.com/troupe-dev/troupe/internal/usage"
)

// teamReport is the output of `troupe bench team --json`.
type teamReport struct {
	Teammates             int     `json:"teammates"`
	Tasks                 int     `json:"tasks"`
	TasksCompleted        int     `json:"tasks_completed"`
	WallSeconds           float64 `json:"wall_s"`
	TasksPerSecond        float64 `json:"tasks_per_s"`
	ModelCalls            int     `json:"model_calls"`
	LeadModelTurns        int     `json:"lead_model_turns"`
	LeadTurnsFromIdleOnly int     `json:"lead_turns_from_idle_only"`
	IdleMemberModelCalls  int     `json:"idle_member_model_calls"`
	IdleTeammates         int     `json:"idle_teammates"`
	IdleSeconds           float64 `json:"idle_window_s"`
	IdleCPUSeconds        float64 `json:"idle_cpu_s"`
	IdleCPUPercentOfCore  float64 `json:"idle_cpu_pct_of_one_core"`
	// IdleCPUMax1sPercent is the busiest second of the idle window: a
	// periodic spike (heartbeats) shows here, not in the average.
	IdleCPUMax1sPercent float64 `json:"idle_cpu_max_1s_pct"`
	// IdleTeammateMode is how phase 2's teammates ran: in-process, or
	// process (then the CPU and memory figures include their processes).
	IdleTeammateMode string `json:"idle_teammate_mode"`
	// Phase 2's team: the time from the lead's start until every teammate
	// is spawned and idle on the roster, the resident memory each idle
	// teammate adds (measured after returning freed memory to the system,
	// before the spawns and after the idle window), and the time to stop
	// them all (Session.Close).
	SpawnSeconds     float64 `json:"spawn_s"`
	TeardownSeconds  float64 `json:"teardown_s"`
	RSSPerTeammateMB float64 `json:"rss_per_teammate_mb"`
	// Wake latency, after the idle window: from the start of a Send to
	// one idle teammate to the start of that teammate's next model
	// request, over --wake-samples messages.
	WakeSamples int     `json:"wake_samples"`
	WakeP50MS   float64 `json:"wake_p50_ms"`
	WakeP99MS   float64 `json:"wake_p99_ms"`
	PeakRSSMB   float64 `json:"peak_rss_mb"`
	// The prompt cache of phase 1, as the fake API simulated it: cache
	// reads over all input tokens, the same without each agent's first
	// call, the dollars per completed task at list prices, and whether the
	// teammates' first calls all found one cached prefix (tools and system
	// prompt) to share, and its size.
	CacheHitRatio               float64 `json:"cache_hit_ratio"`
	CacheHitRatioAfterFirstCall float64 `json:"cache_hit_ratio_after_first_call"`
	USDPerTask                  float64 `json:"usd_per_task"`
	PrefixSharedAcrossTeammates bool    `json:"prefix_shared_across_teammates"`
	SharedPrefixTokens          int     `json:"shared_prefix_tokens"`
	// Worktree is phase 3, with --isolation worktree.
	Worktree  *worktreeReport `json:"worktree,omitempty"`
	GoVersion string          `json:"go_version"`
	CPUs      int             `json:"cpus"`
}

func (a *app) benchTeamCmd() *cobra.Command {
	var (
		teammates, tasks, idleTeammates int
		members, wakeSamples            int
		idleFor                         time.Duration
		asJSON                          bool
		isolation                       string
		repoFiles, worktrees            int
		bursts                          []int
		burstRounds                     int
		cpuProfile                      string
		mode                            string
	)
	cmd := &cobra.Command{
		Use:   "team",
		Short: "Measure a whole team on the fake API: throughput, lead economy, idle cost",
		Long: `Phase 1: a lead spawns --teammates teammates who work through --tasks tasks on
the in-process fake API with no latency (each task: claim, one model call that
completes it, one that ends the turn). Reports wall time, tasks per second, the
lead's model turns and how many were caused by idle notifications alone.

Phase 2: a lead spawns --idle-teammates teammates with nothing to do; once all
of them are idle on the roster (spawn_s) they sit idle for --idle-window, which
reports the model calls they made (must be 0), the CPU time the whole process
used meanwhile and the memory each teammate adds; then the session closes
(teardown_s). --members N runs phase 2 alone with N teammates.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			iso, err := team.ParseIsolation(isolation)
			if err != nil {
				return withCode(ExitUsage, err)
			}
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return withCode(ExitError, err)
				}
				defer stop()
			}
			if members > 0 {
				teammates, tasks, idleTeammates = 0, 0, members
			}
			if mode != team.ModeInProcess && mode != team.ModeProcess {
				return withCode(ExitUsage, fmt.Errorf("--teammate-mode %q: want %s or %s", mode, team.ModeInProcess, team.ModeProcess))
			}
			rep := &teamReport{GoVersion: runtime.Version(), CPUs: runtime.NumCPU()}
			if teammates+idleTeammates > 0 || iso != team.IsolationWorktree {
				// --teammates 0 --idle-teammates 0 --isolation worktree
				// runs phase 3 alone.
				if rep, err = a.benchTeam(cmd.Context(), teammates, tasks, idleTeammates, idleFor, wakeSamples, mode); err != nil {
					return withCode(ExitError, err)
				}
			}
			if iso == team.IsolationWorktree {
				if rep.Worktree, err = benchWorktrees(cmd.Context(), repoFiles, worktrees, bursts, burstRounds); err != nil {
					return withCode(ExitError, fmt.Errorf("worktree phase: %w", err))
				}
			}
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			if rep.Teammates > 0 {
				fmt.Fprintf(a.stdout, "%d teammates, %d/%d tasks in %.2fs (%.1f tasks/s), %d model calls\n",
					rep.Teammates, rep.TasksCompleted, rep.Tasks, rep.WallSeconds, rep.TasksPerSecond, rep.ModelCalls)
				fmt.Fprintf(a.stdout, "lead: %d model turns, %d from idle notifications alone\n", rep.LeadModelTurns, rep.LeadTurnsFromIdleOnly)
				fmt.Fprintf(a.stdout, "prompt cache: %.1f%% of input read (%.1f%% after each agent's first call), $%.5f per task, prefix shared across teammates: %t (%d tokens)\n",
					100*rep.CacheHitRatio, 100*rep.CacheHitRatioAfterFirstCall, rep.USDPerTask, rep.PrefixSharedAcrossTeammates, rep.SharedPrefixTokens)
			}
			if rep.IdleTeammates > 0 {
				fmt.Fprintf(a.stdout, "%d teammates: spawned and idle in %.2fs, torn down in %.2fs, %.3f MB RSS each\n",
					rep.IdleTeammates, rep.SpawnSeconds, rep.TeardownSeconds, rep.RSSPerTeammateMB)
				fmt.Fprintf(a.stdout, "%d idle teammates for %.0fs: %d model calls, %.3f CPU s (%.3f%% of one core)\n",
					rep.IdleTeammates, rep.IdleSeconds, rep.IdleMemberModelCalls, rep.IdleCPUSeconds, rep.IdleCPUPercentOfCore)
				if rep.WakeSamples > 0 {
					fmt.Fprintf(a.stdout, "wake (send -> the teammate's next model request): p50 %.2f ms, p99 %.2f ms over %d messages\n",
						rep.WakeP50MS, rep.WakeP99MS, rep.WakeSamples)
				}
			}
			if w := rep.Worktree; w != nil {
				fmt.Fprintf(a.stdout, "worktrees on a %d-file repository: spawn from the pool %.1f ms p50 (max %.1f, git CPU %.1f ms), without it %.1f ms p50 (max %.1f, git CPU %.1f ms), shared checkout %.3f ms; refill %.0f ms p50 (pool of %d)\n",
					w.RepoFiles, w.SpawnMSP50, w.SpawnMSMax, w.SpawnCPUMSP50, w.ColdSpawnMSP50, w.ColdSpawnMSMax, w.ColdSpawnCPUMSP50, w.SharedSpawnMS, w.RefillMSP50, w.PoolSize)
				fmt.Fprintf(a.stdout, "spawn from the pool with the base's check before the take instead of beside it: %.1f ms p50 (git CPU %.1f ms)\n", w.SeqSpawnMSP50, w.SeqSpawnCPUMSP50)
				fmt.Fprintf(a.stdout, "per task: commit %.1f ms + merge %.1f ms p50 from the pool, %.1f + %.1f ms without it; %.2f merges/s\n",
					w.CommitMSP50, w.MergeMSP50, w.ColdCommitMSP50, w.ColdMergeMSP50, w.MergesPerSec)
				for _, b := range w.Bursts {
					fmt.Fprintf(a.stdout, "burst of %d spawns (%d rounds): fresh pool of %d %.1f ms p50 / %.1f ms p99 (%d fell back to git worktree add), grown pool of %d %.1f / %.1f ms, shared checkout %.3f / %.3f ms\n",
						b.Size, w.BurstRounds, w.PoolSize, b.FirstMSP50, b.FirstMSP99, b.FellBack, b.PoolAfterWarm, b.WarmMSP50, b.WarmMSP99, b.SharedMSP50, b.SharedMSP99)
				}
			}
			fmt.Fprintf(a.stdout, "peak RSS %.0f MB\n", rep.PeakRSSMB)
			return nil
		},
	}
	cmd.Flags().IntVar(&teammates, "teammates", 50, "teammates working through the tasks")
	cmd.Flags().IntVar(&tasks, "tasks", 500, "tasks on the board")
	cmd.Flags().IntVar(&idleTeammates, "idle-teammates", 100, "teammates kept idle in phase 2")
	cmd.Flags().IntVar(&members, "members", 0, "run phase 2 alone with this many teammates (spawn, idle, teardown)")
	cmd.Flags().IntVar(&wakeSamples, "wake-samples", 50, "messages sent one at a time to an idle teammate after the idle window, to time its wake")
	cmd.Flags().DurationVar(&idleFor, "idle-window", 10*time.Second, "how long phase 2 watches the idle teammates")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&isolation, "isolation", "", "worktree: add phase 3, worktree isolation's spawn overhead and merge throughput on a --repo-files repository")
	cmd.Flags().IntVar(&repoFiles, "repo-files", 10000, "files in phase 3's repository")
	cmd.Flags().IntVar(&worktrees, "worktrees", 5, "teammates' worktrees spawned and merged in phase 3")
	cmd.Flags().IntSliceVar(&bursts, "bursts", []int{1, 4, 10}, "phase 3: sizes of bursts of spawns one after another, from a fresh pool and once it has grown")
	cmd.Flags().IntVar(&burstRounds, "burst-rounds", 3, "phase 3: rounds of each burst size (0: no bursts)")
	cmd.Flags().StringVar(&mode, "teammate-mode", team.ModeInProcess, "how phase 2's teammates run: in-process, or process (a troupe agent each; no wake samples)")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof reads it)")
	return cmd
}

// startCPUProfile profiles this process into path until the returned stop
// is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile %s: %w", path, err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func (a *app) benchTeam(ctx context.Context, teammates, tasks, idleTeammates int, idleFor time.Duration, wakeSamples int, mode string) (*teamReport, error) {
	if teammates < 0 || tasks < 0 || idleTeammates < 0 || teammates+idleTeammates == 0 {
		return nil, fmt.Errorf("--teammates, --tasks and --idle-teammates must be at least 0, and one phase must have teammates")
	}
	rep := &teamReport{Teammates: teammates, Tasks: tasks, IdleTeammates: idleTeammates, GoVersion: runtime.Version(), CPUs: runtime.NumCPU()}
	if teammates > 0 {
		if err := a.benchTeamThroughput(ctx, rep); err != nil {
			return nil, err
		}
	}

	// Phase 2: idle cost.
	if idleTeammates > 0 && idleFor > 0 {
		if mode == team.ModeProcess {
			wakeSamples = 0 // the teammates' model requests are not this process's to time
		}
		rep.IdleTeammateMode = mode
		idle, err := a.benchTeamRun(ctx, idleTeammates, 0, idleFor, max(wakeSamples, 0), mode)
		if err != nil {
			return nil, err
		}
		rep.IdleMemberModelCalls = idle.idleCalls
		rep.IdleSeconds = idleFor.Seconds()
		rep.IdleCPUSeconds = idle.idleCPU
		rep.IdleCPUPercentOfCore = 100 * idle.idleCPU / idleFor.Seconds()
		rep.IdleCPUMax1sPercent = 100 * idle.idleCPUMax1s
		rep.SpawnSeconds = idle.wall.Seconds()
		rep.TeardownSeconds = idle.teardown.Seconds()
		rep.RSSPerTeammateMB = idle.rssGrowthMB / float64(idleTeammates)
		if n := len(idle.wakes); n > 0 {
			slices.Sort(idle.wakes)
			rep.WakeSamples = n
			rep.WakeP50MS = storePercentile(idle.wakes, 0.5) * 1000
			rep.WakeP99MS = storePercentile(idle.wakes, 0.99) * 1000
		}
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		rep.PeakRSSMB = float64(ru.Maxrss) / 1024
	}
	return rep, nil
}

// benchTeamThroughput runs phase 1 into rep.
func (a *app) benchTeamThroughput(ctx context.Context, rep *teamReport) error {
	run, err := a.benchTeamRun(ctx, rep.Teammates, rep.Tasks, 0, 0, team.ModeInProcess)
	if err != nil {
		return err
	}
	rep.WallSeconds = run.wall.Seconds()
	rep.TasksCompleted = run.completed
	if run.wall > 0 {
		rep.TasksPerSecond = float64(run.completed) / run.wall.Seconds()
	}
	rep.ModelCalls = run.calls
	rep.LeadModelTurns, rep.LeadTurnsFromIdleOnly = run.res.Stats.LeadModelTurns, run.res.Stats.LeadTurnsFromIdleOnly
	c := cacheFigures(run.recs, usage.DefaultPrices())
	rep.CacheHitRatio, rep.CacheHitRatioAfterFirstCall = c.hitRatio, c.hitRatioAfterFirst
	rep.PrefixSharedAcrossTeammates, rep.SharedPrefixTokens = c.shared, c.sharedTokens
	if run.completed > 0 {
		rep.USDPerTask = c.usd / float64(run.completed)
	}
	return nil
}

// benchCache is what the fake API's prompt cache did in a bench run.
type benchCache struct {
	hitRatio, hitRatioAfterFirst float64
	usd                          float64
	shared                       bool
	sharedTokens                 int
}

// cacheFigures reads the prompt cache's effect from the fake API's records.
// The teammates share a prefix when one cache entry ending in the system
// prompt (tools and system, not the tools alone) was read or written by
// every teammate's first call.
func cacheFigures(recs []fakeapi.Recorded, prices usage.Prices) benchCache {
	var c benchCache
	var all, read, allAfter, readAfter int
	seen := map[string]bool{}
	var common map[string]int // key -> tokens, over the teammates' first calls
	teammates := 0
	for _, r := range recs {
		if r.Status != 200 {
			continue
		}
		u := r.Usage
		in := u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
		all += in
		read += u.CacheReadInputTokens
		if p, ok := prices.Lookup(r.Model); ok {
			w1h := u.Ephemeral1hInputTokens
			c.usd += (float64(u.InputTokens)*p.Input + float64(u.OutputTokens)*p.Output + float64(u.CacheReadInputTokens)*p.CacheRead +
				float64(u.CacheCreationInputTokens-w1h)*p.CacheWrite + float64(w1h)*p.Write1h()) / 1e6
		}
		if seen[r.Agent] {
			allAfter += in
			readAfter += u.CacheReadInputTokens
			continue
		}
		seen[r.Agent] = true
		if r.Agent == store.LeadName || r.Agent == "" {
			continue
		}
		teammates++
		mine := map[string]int{}
		for _, p := range r.Cache {
			if (p.Read || p.Write) && strings.HasPrefix(p.Path, "system") {
				mine[p.Key] = p.Tokens
			}
		}
		if common == nil {
			common = mine
			continue
		}
		for k := range common {
			if _, ok := mine[k]; !ok {
				delete(common, k)
			}
		}
	}
	if all > 0 {
		c.hitRatio = float64(read) / float64(all)
	}
	if allAfter > 0 {
		c.hitRatioAfterFirst = float64(readAfter) / float64(allAfter)
	}
	for _, tokens := range common {
		c.sharedTokens = max(c.sharedTokens, tokens)
	}
	c.shared = teammates > 0 && c.sharedTokens > 0
	return c
}

// benchRun is what one bench team did.
type benchRun struct {
	recs      []fakeapi.Recorded // the calls of the run until the team was done
	res       *team.Result
	calls     int // model calls until the team was done
	completed int
	wall      time.Duration
	idleCalls int     // model calls during the idle window
	idleCPU   float64 // CPU seconds the process used during the idle window
	// idleCPUMax1s is the most CPU seconds used in one second of it.
	idleCPUMax1s float64
	// With an idle window: the resident memory the team added, and the
	// time its session took to close.
	rssGrowthMB float64
	teardown    time.Duration
	wakes       []float64 // seconds
}

// benchTeamRun runs one team until it is done, then, with idleFor > 0,
// keeps it idle that long and measures what it costs.
func (a *app) benchTeamRun(ctx context.Context, teammates, tasks int, idleFor time.Duration, wakeSamples int, mode string) (*benchRun, error) {
	dir, err := os.MkdirTemp("", "troupe-bench-team-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	script, err := fakeapi.ParseScript([]byte(fakeapi.BoardScript("Run the bench", "bench", teammates, tasks)))
	if err != nil {
		return nil, err
	}
	fake := fakeapi.New(script, fakeapi.Options{})
	base, err := fake.Start("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer fake.Close()
	anthropic, err := assembly.AnthropicAt(base, "bench", -1)
	if err != nil {
		return nil, err
	}
	provider := &timedProvider{Provider: anthropic, started: make(chan time.Time, 1)}
	bench := *a
	bench.stateDir = ""
	e, err := bench.openEnv(dir, nil)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	// The bench's team key goes with its throwaway state, outside its
	// workspace.
	keys, err := os.MkdirTemp("", "troupe-bench-keys-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(keys)
	if e.Keys, err = teamkey.New(teamkey.Options{StateDir: e.StateDir, Dir: keys}); err != nil {
		return nil, err
	}
	flags := teamFlags{teammateMode: mode, permissionMode: team.PermBypass}
	pf := providerFlags{provider: "anthropic"}
	if mode == team.ModeProcess {
		pf.baseURL = base
	}
	cfg, err := bench.sessionConfig(e, provider, "", 0, &flags, pf)
	if err != nil {
		return nil, err
	}
	if mode == team.ModeProcess {
		cfg.AgentEnv = append(cfg.AgentEnv, "ANTHROPIC_API_KEY=bench")
	}
	var completed atomic.Int64
	cfg.OnEvent = func(ev store.Event) {
		if ev.Type == "complete" {
			completed.Add(1)
		}
	}
	rss0 := settledRSS()
	sess, err := team.NewSession(cfg)
	if err != nil {
		return nil, err
	}
	closed := false
	defer func() {
		if !closed {
			sess.Close()
		}
	}()
	start := time.Now()
	res, err := sess.RunHeadless(ctx, "Run the bench.")
	if err == nil && idleFor > 0 {
		// The idle window opens once every teammate is idle on the
		// roster and the journal has been quiet for a while: spawns,
		// their first turns and what follows them are over.
		err = waitAllIdle(ctx, sess, teammates)
	}
	recs := fake.Requests()
	run := &benchRun{res: res, wall: time.Since(start), completed: int(completed.Load()), calls: len(recs), recs: recs}
	if err == nil && idleFor > 0 {
		err = waitJournalQuiet(ctx, sess, 500*time.Millisecond)
	}
	if err != nil {
		return nil, err
	}
	if idleFor > 0 {
		cpu := cpuSeconds
		if mode == team.ModeProcess {
			tree := newProcCPU()
			defer tree.close()
			cpu = tree.seconds
		}
		// The window's figures leave out the measuring itself: it runs
		// on a thread of its own, whose CPU time is taken off.
		runtime.LockOSThread()
		measured := func() float64 { return cpu() - threadCPUSeconds() }
		before := measured()
		last, end := before, time.Now().Add(idleFor)
		tick := time.NewTicker(time.Second)
		for left := time.Until(end); left > 0; left = time.Until(end) {
			select {
			case <-ctx.Done():
				tick.Stop()
				runtime.UnlockOSThread()
				return nil, ctx.Err()
			case <-tick.C:
			case <-time.After(left):
			}
			now := measured()
			run.idleCPUMax1s = max(run.idleCPUMax1s, now-last)
			last = now
		}
		tick.Stop()
		runtime.UnlockOSThread()
		run.idleCPU = last - before
		run.idleCalls = len(fake.Requests()) - run.calls
		run.rssGrowthMB = max(settledRSS()-rss0, 0)
		if mode == team.ModeProcess {
			run.rssGrowthMB = childrenRSS()
		}
		if wakeSamples > 0 {
			if run.wakes, err = benchWake(ctx, sess, provider, wakeSamples); err != nil {
				return nil, err
			}
		}
		began := time.Now()
		closed = true
		if err := sess.Close(); err != nil {
			return nil, err
		}
		run.teardown = time.Since(began)
	}
	return run, nil
}

// timedProvider tells when each model request starts.
type timedProvider struct {
	llm.Provider
	started chan time.Time // the latest start not yet taken
}

func (p *timedProvider) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	seq := p.Provider.Stream(ctx, req)
	return func(yield func(llm.Event, error) bool) {
		now := time.Now()
		// Never blocks: an older start nobody waited for makes room, and
		// two members' requests may race for the one slot.
		for sent := false; !sent; {
			select {
			case p.started <- now:
				sent = true
			default:
				select {
				case <-p.started:
				default:
				}
			}
		}
		seq(yield)
	}
}

// benchWake sends n messages, one at a time, from the human to the
// session's first teammate while it is idle, and returns for each the
// time from the start of the Send to the start of the teammate's next
// model request (the lead makes none: its run is over).
func benchWake(ctx context.Context, sess *team.Session, p *timedProvider, n int) ([]float64, error) {
	t, err := sess.Team()
	if err != nil {
		return nil, err
	}
	r, err := t.ReadRoster(ctx)
	if err != nil {
		return nil, err
	}
	if len(r.Members) == 0 {
		return nil, nil
	}
	name := r.Members[0].Name
	select {
	case <-p.started:
	default:
	}
	var out []float64
	for i := range n {
		began := time.Now()
		if _, err := t.Mailbox().Send(ctx, store.Message{Type: store.TypeMessage, From: "human", To: name, Content: fmt.Sprintf("wake %d", i)}); err != nil {
			return nil, err
		}
		select {
		case at := <-p.started:
			out = append(out, at.Sub(began).Seconds())
		case <-time.After(10 * time.Second):
			return nil, fmt.Errorf("wake %d: %s made no model request within 10s", i, name)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		// The next message goes to an idle teammate again.
		if err := waitIdleSince(ctx, t, name, began); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// waitIdleSince waits until member is idle on the roster with a heartbeat
// after since.
func waitIdleSince(ctx context.Context, t store.Team, member string, since time.Time) error {
	for {
		r, err := t.ReadRoster(ctx)
		if err != nil {
			return err
		}
		if m, ok := r.Member(member); ok && m.Status == store.StatusIdle && m.HeartbeatAt.After(since) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// waitAllIdle waits until n teammates of the session's team are idle on
// its roster. The bench looks every 10 ms: it measures, it is not part of
// the runtime.
func waitAllIdle(ctx context.Context, sess *team.Session, n int) error {
	t, err := sess.Team()
	if err != nil {
		return err
	}
	for {
		r, err := t.ReadRoster(ctx)
		if err != nil {
			return err
		}
		idle := 0
		for _, m := range r.Members {
			if m.Status == store.StatusIdle {
				idle++
			}
		}
		if idle >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitJournalQuiet waits until the session's team journal has had no new
// event for quiet.
func waitJournalQuiet(ctx context.Context, sess *team.Session, quiet time.Duration) error {
	t, err := sess.Team()
	if err != nil {
		return err
	}
	_, cur, err := t.Journal().ReadAfter(ctx, "")
	if err != nil {
		return err
	}
	last := time.Now()
	for time.Since(last) < quiet {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		evs, next, err := t.Journal().ReadAfter(ctx, cur)
		if err != nil {
			return err
		}
		if cur = next; len(evs) > 0 {
			last = time.Now()
		}
	}
	return nil
}

// settledRSS is this process's resident memory in MB once the memory the
// Go runtime holds free has been given back to the system, so that two
// readings differ by what is alive, not by garbage.
func settledRSS() float64 {
	debug.FreeOSMemory()
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return float64(pages*int64(os.Getpagesize())) / (1 << 20)
}

// cpuSeconds is the CPU time (user + system) this process has used.
func cpuSeconds() float64 { return rusageSeconds(syscall.RUSAGE_SELF) }

// rusageThread is Linux's RUSAGE_THREAD: the calling thread alone.
const rusageThread = 1

// threadCPUSeconds is the CPU time of the calling OS thread (0 where the
// system cannot tell).
func threadCPUSeconds() float64 { return rusageSeconds(rusageThread) }

func rusageSeconds(who int) float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(who, &ru) != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// children are the pids of this process's child processes.
func children() []int {
	var out []int
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		data, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}

// procCPU measures this process and its child processes (process-mode
// teammates) over an idle window. The children are found once, when the
// window opens (idle teammates neither start nor end), and each one's stat
// file is kept open and read again in place: finding them anew and opening
// their files every second cost the bench process more CPU than the idle
// team it measured.
type procCPU struct {
	files []*os.File
	buf   []byte
}

func newProcCPU() *procCPU {
	p := &procCPU{buf: make([]byte, 1024)}
	for _, pid := range children() {
		if f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
			p.files = append(p.files, f)
		}
	}
	return p
}

// seconds is cpuSeconds plus the CPU time of the children still running.
func (p *procCPU) seconds() float64 {
	total := cpuSeconds()
	for _, f := range p.files {
		n, err := f.ReadAt(p.buf, 0)
		if n == 0 && err != nil {
			continue
		}
		// The fields after the command (which may hold spaces), from
		// the state on: utime and stime are the 12th and 13th.
		s := string(p.buf[:n])
		fs := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fs) < 13 {
			continue
		}
		ut, _ := strconv.ParseFloat(fs[11], 64)
		st, _ := strconv.ParseFloat(fs[12], 64)
		total += (ut + st) / clockTicks
	}
	return total
}

func (p *procCPU) close() {
	for _, f := range p.files {
		f.Close()
	}
}

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on Linux.
const clockTicks = 100

// childrenRSS is the resident memory of the child processes, in MB.
func childrenRSS() float64 {
	var pages int64
	for _, pid := range children() {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
		if err != nil {
			continue
		}
		if f := strings.Fields(string(data)); len(f) >= 2 {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			pages += n
		}
	}
	return float64(pages*int64(os.Getpagesize())) / (1 << 20)
}
