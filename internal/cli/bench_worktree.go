package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// worktreeReport is `troupe bench team --isolation worktree`'s phase 3:
// what worktree isolation costs on a repository of RepoFiles files, beside
// what the shared checkout costs.
type worktreeReport struct {
	RepoFiles int `json:"repo_files"`
	Worktrees int `json:"worktrees"`
	// SpawnMS is the placement of one teammate: the checks and `git
	// worktree add` a spawn runs, and opening the worktree as its
	// workspace; SharedSpawnMS is the shared checkout's placement.
	SpawnMSP50    float64 `json:"spawn_ms_p50"`
	SpawnMSMax    float64 `json:"spawn_ms_max"`
	SharedSpawnMS float64 `json:"shared_spawn_ms"`
	// MergeMS is one completed task through the merge queue: commit on
	// the teammate's branch, then merge into main (the first fast-forward,
	// the rest merge commits), one after the other as the queue runs them.
	MergeMSP50   float64 `json:"merge_ms_p50"`
	MergesPerSec float64 `json:"merges_per_s"`
}

// benchWorktrees measures worktree isolation on a fresh repository of
// files files with n teammates.
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
	var spawns, merges []float64
	var wts []worktree.Worktree
	for i := range n {
		t0 := time.Now()
		if err := repo.Ready(ctx); err != nil {
			return nil, err
		}
		wt, err := repo.Add(ctx, "bench", fmt.Sprintf("w%d", i))
		if err != nil {
			return nil, err
		}
		ws, err := tool.OpenWorkspace(wt.Path)
		if err != nil {
			return nil, err
		}
		spawns = append(spawns, ms(time.Since(t0)))
		ws.Close()
		wts = append(wts, wt)
	}
	start := time.Now()
	for i, wt := range wts {
		if err := os.WriteFile(filepath.Join(wt.Path, fmt.Sprintf("task-%d.txt", i)), []byte("done\n"), 0o644); err != nil {
			return nil, err
		}
		t0 := time.Now()
		if _, err := repo.Commit(ctx, wt.Path, fmt.Sprintf("Task %d", i)); err != nil {
			return nil, err
		}
		if _, err := repo.Merge(ctx, wt.Branch, "Merge "+wt.Branch, worktree.FastForward); err != nil {
			return nil, err
		}
		merges = append(merges, ms(time.Since(t0)))
	}
	if d := time.Since(start); d > 0 {
		rep.MergesPerSec = float64(len(wts)) / d.Seconds()
	}
	for _, wt := range wts {
		if err := repo.Remove(ctx, wt, false); err != nil {
			return nil, err
		}
	}
	rep.SpawnMSP50, rep.SpawnMSMax = median(spawns), slices.Max(spawns)
	rep.MergeMSP50 = median(merges)
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
