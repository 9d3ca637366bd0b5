package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// worktreeReport is `troupe bench team --isolation worktree`'s phase 3:
// what worktree isolation costs on a repository of RepoFiles files, beside
// what the shared checkout costs. Spawns and merges from a spare of the
// pool and from `git worktree add` alone ("cold") alternate, so that both
// meet the same machine.
type worktreeReport struct {
	RepoFiles int `json:"repo_files"`
	Worktrees int `json:"worktrees"`
	PoolSize  int `json:"pool_size"`
	// SpawnMS is the placement of one teammate as a spawn runs it: the
	// checks, taking a spare from the pool (move it, branch it at HEAD)
	// and opening it as the workspace; SpawnCPUMS is the CPU time git
	// used for it (user and system, load-independent). ColdSpawnMS is the
	// same without a pool (`git worktree add`); SharedSpawnMS is the
	// shared checkout's placement.
	SpawnMSP50        float64 `json:"spawn_ms_p50"`
	SpawnMSMax        float64 `json:"spawn_ms_max"`
	SpawnCPUMSP50     float64 `json:"spawn_cpu_ms_p50"`
	ColdSpawnMSP50    float64 `json:"cold_spawn_ms_p50"`
	ColdSpawnMSMax    float64 `json:"cold_spawn_ms_max"`
	ColdSpawnCPUMSP50 float64 `json:"cold_spawn_cpu_ms_p50"`
	SharedSpawnMS     float64 `json:"shared_spawn_ms"`
	// SeqSpawnMS is a spawn from the pool with the base's check before
	// the take instead of beside it (as before TakeReady).
	SeqSpawnMSP50    float64 `json:"seq_spawn_ms_p50"`
	SeqSpawnCPUMSP50 float64 `json:"seq_spawn_cpu_ms_p50"`
	// RefillMS is the pool making one spare in the background (`git
	// worktree add`, the racy-git wait, the index refresh).
	RefillMSP50 float64 `json:"refill_ms_p50"`
	// CommitMS is a completed task's commit on its branch (the
	// teammate's side); MergeMS its merge into main (the lead's merge
	// queue: the first a fast-forward, the rest merge commits). Cold: in
	// worktrees made by `git worktree add`.
	CommitMSP50     float64 `json:"commit_ms_p50"`
	MergeMSP50      float64 `json:"merge_ms_p50"`
	ColdCommitMSP50 float64 `json:"cold_commit_ms_p50"`
	ColdMergeMSP50  float64 `json:"cold_merge_ms_p50"`
	MergesPerSec    float64 `json:"merges_per_s"`
	// Bursts are spawns one after another as a lead makes them in one
	// turn, from a fresh pool of PoolSize spares ("first") and again once
	// the pool has grown to the burst ("warm"), over BurstRounds rounds.
	BurstRounds int           `json:"burst_rounds"`
	Bursts      []burstReport `json:"bursts"`
}

// burstReport is one burst size's spawn overhead per worktree.
type burstReport struct {
	Size          int     `json:"size"`
	FirstMSP50    float64 `json:"first_ms_p50"`
	FirstMSP99    float64 `json:"first_ms_p99"`
	WarmMSP50     float64 `json:"warm_ms_p50"`
	WarmMSP99     float64 `json:"warm_ms_p99"`
	FellBack      int     `json:"fell_back"` // spawns that ran `git worktree add` themselves
	SharedMSP50   float64 `json:"shared_ms_p50"`
	SharedMSP99   float64 `json:"shared_ms_p99"`
	PoolAfterWarm int     `json:"pool_target"`
}

// benchBursts measures bursts of spawns of each size in sizes, rounds
// times each, on the repository at dir.
func benchBursts(ctx context.Context, repo *worktree.Repo, base *tool.Workspace, sizes []int, rounds int) ([]burstReport, error) {
	var out []burstReport
	for _, size := range sizes {
		br := burstReport{Size: size}
		var first, warm, shared []float64
		for round := range rounds {
			tname := fmt.Sprintf("burst%d-%d", size, round)
			pool := worktree.NewPool(repo, tname, 0)
			if err := pool.Wait(ctx, pool.Size()); err != nil {
				pool.Close()
				return nil, err
			}
			burst := func(prefix string, into *[]float64) error {
				var wts []worktree.Worktree
				for i := range size {
					t0 := time.Now()
					if _, err := (team.SharedPlacement{Workspace: base}).Place(ctx, tname, "s"); err != nil {
						return err
					}
					shared = append(shared, ms(time.Since(t0)))
					name := fmt.Sprintf("%s%d", prefix, i)
					t0 = time.Now()
					wt, err := pool.TakeReady(ctx, name)
					if errors.Is(err, worktree.ErrPoolEmpty) {
						br.FellBack++
						wt, err = repo.Add(ctx, tname, name)
					}
					if err != nil {
						return err
					}
					ws, err := tool.OpenWorkspace(wt.Path)
					if err != nil {
						return err
					}
					*into = append(*into, ms(time.Since(t0)))
					ws.Close()
					wts = append(wts, wt)
				}
				for _, wt := range wts {
					if err := repo.Remove(ctx, wt, true); err != nil {
						return err
					}
				}
				return nil
			}
			err := burst("f", &first)
			if err == nil {
				// The next burst comes a model turn or more later: the
				// pool has grown to the last one meanwhile, and the burst
				// has ended.
				time.Sleep(worktree.BurstGap + 100*time.Millisecond)
				if err = pool.Wait(ctx, pool.Target()); err == nil {
					br.PoolAfterWarm = pool.Target()
					err = burst("w", &warm)
				}
			}
			if cerr := pool.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, err
			}
		}
		br.FirstMSP50, br.FirstMSP99 = percentile(first, 50), percentile(first, 99)
		br.WarmMSP50, br.WarmMSP99 = percentile(warm, 50), percentile(warm, 99)
		br.SharedMSP50, br.SharedMSP99 = percentile(shared, 50), percentile(shared, 99)
		out = append(out, br)
	}
	return out, nil
}

// childCPU is the CPU time of this process's finished children.
func childCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchWorktrees measures worktree isolation on a fresh repository of
// files files with n teammates placed from the pool and n without it.
func benchWorktrees(ctx context.Context, files, n int, sizes []int, rounds int) (*worktreeReport, error) {
	if files < 1 || n < 1 {
		return nil, fmt.Errorf("--repo-files and --worktrees must be at least 1")
	}
	dir, err := os.MkdirTemp("", "troupe-bench-wt-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := benchRepo(ctx, dir, files); err != nil {
		return nil, err
	}
	rep := &worktreeReport{RepoFiles: files, Worktrees: n}

	base, err := tool.OpenWorkspace(dir)
	if err != nil {
		return nil, err
	}
	defer base.Close()
	t0 := time.Now()
	if _, err := (team.SharedPlacement{Workspace: base}).Place(ctx, "bench", "w"); err != nil {
		return nil, err
	}
	rep.SharedSpawnMS = ms(time.Since(t0))

	repo, err := worktree.Open(ctx, dir)
	if err != nil {
		return nil, err
	}
	// The user's checkout is not fresh: let git record its files' stamps
	// once, as any status would, before the clock starts.
	if err := repo.Ready(ctx); err != nil {
		return nil, err
	}
	// A fixed size: the bursts below measure how the pool grows.
	pool := worktree.NewPoolMax(repo, "bench", 0, worktree.DefaultPoolSize)
	defer pool.Close()
	rep.PoolSize = pool.Size()
	var spawns, spawnCPU, colds, coldCPU []float64
	var wts, coldWts, seqWts []worktree.Worktree
	const (
		cold = iota
		sequential
		beside
	)
	place := func(name string, how int) (worktree.Worktree, float64, float64, error) {
		t0, c0 := time.Now(), childCPU()
		var wt worktree.Worktree
		var err error
		switch how {
		case beside:
			// As a spawn does: the base's check beside the take.
			wt, err = pool.TakeReady(ctx, name)
		case sequential:
			var head string
			if head, err = repo.ReadyHead(ctx); err == nil {
				wt, err = pool.Take(ctx, name, head)
			}
		default:
			if _, err = repo.ReadyHead(ctx); err == nil {
				wt, err = repo.Add(ctx, "bench", name)
			}
		}
		if err != nil {
			return wt, 0, 0, err
		}
		ws, err := tool.OpenWorkspace(wt.Path)
		if err != nil {
			return wt, 0, 0, err
		}
		d, c := ms(time.Since(t0)), ms(childCPU()-c0)
		ws.Close()
		return wt, d, c, nil
	}
	var seqSpawns, seqCPU []float64
	for i := range n {
		wt, d, c, err := place(fmt.Sprintf("c%d", i), cold)
		if err != nil {
			return nil, err
		}
		colds, coldCPU, coldWts = append(colds, d), append(coldCPU, c), append(coldWts, wt)
		// A spawn meets a full pool when spawns are a model turn apart;
		// making spares is timed by the pool.
		if err := pool.Wait(ctx, pool.Size()); err != nil {
			return nil, err
		}
		if wt, d, c, err = place(fmt.Sprintf("p%d", i), beside); err != nil {
			return nil, err
		}
		spawns, spawnCPU, wts = append(spawns, d), append(spawnCPU, c), append(wts, wt)
		if err := pool.Wait(ctx, pool.Size()); err != nil {
			return nil, err
		}
		// The check before the take, as spawns were placed before.
		if wt, d, c, err = place(fmt.Sprintf("q%d", i), sequential); err != nil {
			return nil, err
		}
		seqSpawns, seqCPU, seqWts = append(seqSpawns, d), append(seqCPU, c), append(seqWts, wt)
	}
	var commits, merges, coldCommits, coldMerges []float64
	start := time.Now()
	for i := range n {
		for _, c := range []struct {
			wt             worktree.Worktree
			commit, merges *[]float64
		}{{coldWts[i], &coldCommits, &coldMerges}, {wts[i], &commits, &merges}} {
			if err := os.WriteFile(filepath.Join(c.wt.Path, fmt.Sprintf("task-%s.txt", filepath.Base(c.wt.Path))), []byte("done\n"), 0o644); err != nil {
				return nil, err
			}
			t0 := time.Now()
			if _, err := repo.Commit(ctx, c.wt.Path, "Task of "+c.wt.Branch); err != nil {
				return nil, err
			}
			t1 := time.Now()
			if _, err := repo.Merge(ctx, c.wt.Branch, "Merge "+c.wt.Branch, worktree.FastForward); err != nil {
				return nil, err
			}
			*c.commit, *c.merges = append(*c.commit, ms(t1.Sub(t0))), append(*c.merges, ms(time.Since(t1)))
		}
	}
	if d := time.Since(start); d > 0 {
		rep.MergesPerSec = float64(2*n) / d.Seconds()
	}
	for _, wt := range append(append(wts, coldWts...), seqWts...) {
		if err := repo.Remove(ctx, wt, false); err != nil {
			return nil, err
		}
	}
	rep.SpawnMSP50, rep.SpawnMSMax, rep.SpawnCPUMSP50 = median(spawns), slices.Max(spawns), median(spawnCPU)
	rep.ColdSpawnMSP50, rep.ColdSpawnMSMax, rep.ColdSpawnCPUMSP50 = median(colds), slices.Max(colds), median(coldCPU)
	rep.SeqSpawnMSP50, rep.SeqSpawnCPUMSP50 = median(seqSpawns), median(seqCPU)
	var made []float64
	for _, d := range pool.Made() {
		made = append(made, ms(d))
	}
	if len(made) > 0 {
		rep.RefillMSP50 = median(made)
	}
	rep.CommitMSP50, rep.MergeMSP50 = median(commits), median(merges)
	rep.ColdCommitMSP50, rep.ColdMergeMSP50 = median(coldCommits), median(coldMerges)
	if err := pool.Close(); err != nil {
		return nil, err
	}
	if len(sizes) > 0 && rounds > 0 {
		rep.BurstRounds = rounds
		if rep.Bursts, err = benchBursts(ctx, repo, base, sizes, rounds); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// benchRepo makes dir a git repository with files small files committed,
// a hundred to a folder.
func benchRepo(ctx context.Context, dir string, files int) error {
	for i := range files {
		sub := filepath.Join(dir, "src", fmt.Sprintf("pkg%03d", i/100))
		if i%100 == 0 {
			if err := os.MkdirAll(sub, 0o755); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("file%05d.go", i)), fmt.Appendf(nil, "package p\n\nconst N%d = %d\n", i, i), 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{
		{"init", "--quiet", "-b", "main"},
		{"config", "user.name", "troupe bench"},
		{"config", "user.email", "bench@localhost"},
		{"add", "-A"},
		{"commit", "--quiet", "-m", "bench repository"},
	} {
		if out, err := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}
