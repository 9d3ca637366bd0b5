package cli

import (
	"context"
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
func benchWorktrees(ctx context.Context, files, n int) (*worktreeReport, error) {
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
	pool := worktree.NewPool(repo, "bench", 0)
	defer pool.Close()
	rep.PoolSize = pool.Size()
	var spawns, spawnCPU, cold, coldCPU []float64
	var wts, coldWts []worktree.Worktree
	place := func(name string, take bool) (worktree.Worktree, float64, float64, error) {
		t0, c0 := time.Now(), childCPU()
		head, err := repo.ReadyHead(ctx)
		if err != nil {
			return worktree.Worktree{}, 0, 0, err
		}
		var wt worktree.Worktree
		if take {
			wt, err = pool.Take(ctx, name, head)
		} else {
			wt, err = repo.Add(ctx, "bench", name)
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
	for i := range n {
		wt, d, c, err := place(fmt.Sprintf("c%d", i), false)
		if err != nil {
			return nil, err
		}
		cold, coldCPU, coldWts = append(cold, d), append(coldCPU, c), append(coldWts, wt)
		// A spawn meets a full pool when spawns are a model turn apart;
		// making spares is timed by the pool.
		if err := pool.Wait(ctx, pool.Size()); err != nil {
			return nil, err
		}
		if wt, d, c, err = place(fmt.Sprintf("p%d", i), true); err != nil {
			return nil, err
		}
		spawns, spawnCPU, wts = append(spawns, d), append(spawnCPU, c), append(wts, wt)
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
	for _, wt := range append(wts, coldWts...) {
		if err := repo.Remove(ctx, wt, false); err != nil {
			return nil, err
		}
	}
	rep.SpawnMSP50, rep.SpawnMSMax, rep.SpawnCPUMSP50 = median(spawns), slices.Max(spawns), median(spawnCPU)
	rep.ColdSpawnMSP50, rep.ColdSpawnMSMax, rep.ColdSpawnCPUMSP50 = median(cold), slices.Max(cold), median(coldCPU)
	var made []float64
	for _, d := range pool.Made() {
		made = append(made, ms(d))
	}
	if len(made) > 0 {
		rep.RefillMSP50 = median(made)
	}
	rep.CommitMSP50, rep.MergeMSP50 = median(commits), median(merges)
	rep.ColdCommitMSP50, rep.ColdMergeMSP50 = median(coldCommits), median(coldMerges)
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
