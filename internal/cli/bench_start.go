package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamkey"
)

// startMarkEnv names the inherited descriptor on which `troupe agent`
// writes one byte when it reaches its first store read, for
// `troupe bench agent-start`. Unset, nothing is written.
const startMarkEnv = "TROUPE_START_MARK_FD"

// markStarted tells the bench, if one asked, that this process got to its
// first store read.
func markStarted() {
	v := os.Getenv(startMarkEnv)
	if v == "" {
		return
	}
	os.Unsetenv(startMarkEnv) // not for the commands it runs
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return
	}
	f := os.NewFile(uintptr(fd), "start-mark")
	f.Write([]byte{1})
	f.Close()
}

// agentStartReport is the output of `troupe bench agent-start --json`.
type agentStartReport struct {
	Runs int `json:"runs"`
	// From the exec of `troupe agent` to its first store read (reading
	// its team), and of `troupe --version` to its exit: the process's
	// start alone (runtime, package initialisation, the command tree).
	AgentStartP50MS float64 `json:"agent_start_p50_ms"`
	AgentStartP90MS float64 `json:"agent_start_p90_ms"`
	VersionP50MS    float64 `json:"version_p50_ms"`
	VersionP90MS    float64 `json:"version_p90_ms"`
	// CPU time (user + system) of one `troupe --version`, median.
	VersionCPUP50MS float64 `json:"version_cpu_p50_ms"`
	GoVersion       string  `json:"go_version"`
	CPUs            int     `json:"cpus"`
}

func (a *app) benchAgentStartCmd() *cobra.Command {
	var (
		runs   int
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "agent-start",
		Short: "Measure how fast a process-mode teammate starts",
		Long: `Starts this troupe binary as a teammate (troupe agent) --runs times, in a
throwaway workspace with a team and a key, and times each from its exec to its
first store read (the read of its team), then kills it. Also times
troupe --version from exec to exit, which is what every troupe process pays
before it does anything. Runs alternate between the two; medians and p90.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runs < 1 {
				return withCode(ExitUsage, errors.New("--runs must be at least 1"))
			}
			rep, err := a.benchAgentStart(cmd.Context(), runs)
			if err != nil {
				return withCode(ExitError, err)
			}
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			fmt.Fprintf(a.stdout, "troupe agent to its first store read: p50 %.1f ms, p90 %.1f ms over %d runs\n", rep.AgentStartP50MS, rep.AgentStartP90MS, rep.Runs)
			fmt.Fprintf(a.stdout, "troupe --version: p50 %.1f ms, p90 %.1f ms, CPU p50 %.1f ms\n", rep.VersionP50MS, rep.VersionP90MS, rep.VersionCPUP50MS)
			return nil
		},
	}
	cmd.Flags().IntVar(&runs, "runs", 20, "starts of each kind")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) benchAgentStart(ctx context.Context, runs int) (*agentStartReport, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "troupe-bench-start-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ws, stateDir := filepath.Join(dir, "ws"), filepath.Join(dir, "ws", ".troupe")
	bench := *a
	bench.stateDir = ""
	e, err := bench.openEnv(ws, nil)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	if e.Keys, err = teamkey.New(teamkey.Options{StateDir: stateDir, Dir: filepath.Join(dir, "keys")}); err != nil {
		return nil, err
	}
	t, err := e.Store.CreateTeam(ctx, store.Roster{Name: "bench"})
	if err != nil {
		return nil, err
	}
	if _, err := t.UpdateRoster(ctx, func(r *store.Roster) error {
		r.Members = append(r.Members, store.Member{Name: "w1", Status: store.StatusIdle})
		return nil
	}); err != nil {
		return nil, err
	}
	if _, err := e.Keys.Create("bench"); err != nil {
		return nil, err
	}
	keyFile, err := e.Keys.Path("bench")
	if err != nil {
		return nil, err
	}
	agentArgs := []string{"agent", "--state-dir", stateDir, "--workspace", ws, "--team", "bench", "--name", "w1",
		"--key-file", keyFile, "--provider", "anthropic", "--base-url", "http://127.0.0.1:9"}
	env := append(os.Environ(), "ANTHROPIC_API_KEY=bench", startMarkEnv+"=3")
	var agent, version, versionCPU []float64
	for range runs {
		ms, err := timeAgentStart(ctx, exe, agentArgs, env)
		if err != nil {
			return nil, err
		}
		agent = append(agent, ms)
		ms, cpu, err := timeVersion(ctx, exe)
		if err != nil {
			return nil, err
		}
		version, versionCPU = append(version, ms), append(versionCPU, cpu)
	}
	for _, s := range [][]float64{agent, version, versionCPU} {
		slices.Sort(s)
	}
	return &agentStartReport{Runs: runs,
		AgentStartP50MS: storePercentile(agent, 0.5), AgentStartP90MS: storePercentile(agent, 0.9),
		VersionP50MS: storePercentile(version, 0.5), VersionP90MS: storePercentile(version, 0.9),
		VersionCPUP50MS: storePercentile(versionCPU, 0.5),
		GoVersion:       runtime.Version(), CPUs: runtime.NumCPU()}, nil
}

// timeAgentStart starts one agent and returns the milliseconds until it
// marks its first store read; it is killed then.
func timeAgentStart(ctx context.Context, exe string, args, env []string) (float64, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer r.Close()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = env
	cmd.ExtraFiles = []*os.File{w}
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	began := time.Now()
	if err := cmd.Start(); err != nil {
		w.Close()
		return 0, err
	}
	w.Close()
	var b [1]byte
	n, _ := r.Read(b[:])
	ms := float64(time.Since(began).Microseconds()) / 1000
	cmd.Process.Kill()
	cmd.Wait()
	if n != 1 {
		return 0, fmt.Errorf("troupe agent exited before its first store read: %s", stderr.String())
	}
	return ms, nil
}

// timeVersion runs `troupe --version` and returns its wall and CPU
// milliseconds.
func timeVersion(ctx context.Context, exe string) (wall, cpu float64, err error) {
	cmd := exec.CommandContext(ctx, exe, "--version")
	began := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("troupe --version: %w", err)
	}
	wall = float64(time.Since(began).Microseconds()) / 1000
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		cpu = float64(syscall.TimevalToNsec(ru.Utime)+syscall.TimevalToNsec(ru.Stime)) / 1e6
	}
	return wall, cpu, nil
}

// limitedBuffer keeps the first 4 KB written to it.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 4096 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }
