package worktree_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/worktree"
)

// registered is `git worktree list` of dir as paths relative to dir.
func registered(t *testing.T, r *worktree.Repo) []string {
	t.Helper()
	ps, err := r.Registered(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range ps {
		rel, _ := filepath.Rel(r.Top, p)
		out = append(out, filepath.ToSlash(rel))
	}
	slices.Sort(out)
	return out
}

// TestPoolTake: a spare made at the first commit is taken after HEAD
// moved: it lands at the member's path on its branch at the new HEAD, with
// the new commit's file; the pool makes another spare; Close removes the
// spares and leaves the taken worktree alone.
func TestPoolTake(t *testing.T) {
	ctx, dir, r := openRepo(t, map[string]string{"a.txt": "one\n"})
	p := worktree.NewPool(r, "t", 1)
	defer p.Close()
	if err := p.Wait(ctx, 1); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	write(t, filepath.Join(dir, "b.txt"), "two\n")
	git(t, dir, "add", "b.txt")
	git(t, dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "more")
	head, err := r.ReadyHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := p.Take(ctx, "alice", head)
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	if wt.Path != r.Path("t", "alice") || wt.Branch != "troupe/t/alice" {
		t.Errorf("Take = %+v; want %s on troupe/t/alice", wt, r.Path("t", "alice"))
	}
	if got := git(t, wt.Path, "rev-parse", "HEAD"); got != head {
		t.Errorf("the worktree is at %s; want the base's HEAD %s", got, head)
	}
	if got := git(t, wt.Path, "symbolic-ref", "--short", "HEAD"); got != wt.Branch {
		t.Errorf("the worktree is on %q; want %q", got, wt.Branch)
	}
	if b, err := os.ReadFile(filepath.Join(wt.Path, "b.txt")); err != nil || string(b) != "two\n" {
		t.Errorf("b.txt in the worktree = %q, %v; want the new commit's", b, err)
	}
	if err := p.Wait(ctx, 1); err != nil {
		t.Fatalf("refill: %v", err)
	}
	if got := registered(t, r); len(got) != 2 || got[0] != ".troupe/worktrees/t/.spare/"+filepath.Base(got[0]) || got[1] != ".troupe/worktrees/t/alice" {
		t.Errorf("worktrees = %q; want one spare and alice's", got)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if d := cmp.Diff([]string{".troupe/worktrees/t/alice"}, registered(t, r)); d != "" {
		t.Errorf("worktrees after Close (-want +got):\n%s", d)
	}
	if _, err := os.Stat(filepath.Join(dir, ".troupe", "worktrees", "t", worktree.SpareDir)); !os.IsNotExist(err) {
		t.Errorf("the spare folder is still there: %v", err)
	}
	if _, err := p.Take(ctx, "bob", head); !errors.Is(err, worktree.ErrPoolEmpty) {
		t.Errorf("Take after Close = %v; want ErrPoolEmpty", err)
	}
	if st := git(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("the base is not clean: %q", st)
	}
}

// TestPoolTakeKeepsBranch: a member whose branch outlived its worktree
// gets the branch back with its commits, not a new one at HEAD; a member
// whose worktree exists is left to Add.
func TestPoolTakeKeepsBranch(t *testing.T) {
	ctx, dir, r := openRepo(t, map[string]string{"a.txt": "one\n"})
	git(t, dir, "branch", "troupe/t/alice")
	git(t, dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "--allow-empty", "-m", "main moves")
	head := git(t, dir, "rev-parse", "HEAD")
	old := git(t, dir, "rev-parse", "troupe/t/alice")
	bob, err := r.Add(ctx, "t", "bob")
	if err != nil {
		t.Fatal(err)
	}
	p := worktree.NewPool(r, "t", 1)
	defer p.Close()
	if err := p.Wait(ctx, 1); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if _, err := p.Take(ctx, "bob", head); !errors.Is(err, worktree.ErrPoolEmpty) {
		t.Errorf("Take for an existing worktree %s = %v; want ErrPoolEmpty", bob.Path, err)
	}
	wt, err := p.Take(ctx, "alice", head)
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	if got := git(t, wt.Path, "rev-parse", "HEAD"); got != old {
		t.Errorf("alice's worktree is at %s; want its branch's %s, not HEAD %s", got, old, head)
	}
}

// TestPoolLeftovers: spares left on disk by a process that died (one
// finished, one a bare folder) are removed by the next pool of the team,
// and RemoveSpares clears them with no pool running.
func TestPoolLeftovers(t *testing.T) {
	ctx, dir, r := openRepo(t, map[string]string{"a.txt": "one\n"})
	spares := filepath.Join(dir, ".troupe", "worktrees", "t", worktree.SpareDir)
	leftover := func() {
		git(t, dir, "worktree", "add", "--quiet", "--detach", filepath.Join(spares, "1-1"), "HEAD")
		if err := os.MkdirAll(filepath.Join(spares, "1-2"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	leftover()
	p := worktree.NewPool(r, "t", 1)
	if err := p.Wait(ctx, 1); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	for _, l := range []string{"1-1", "1-2"} {
		if _, err := os.Stat(filepath.Join(spares, l)); !os.IsNotExist(err) {
			t.Errorf("leftover %s still there: %v", l, err)
		}
	}
	if got := registered(t, r); len(got) != 1 || strings.HasSuffix(got[0], "/1-1") {
		t.Errorf("worktrees = %q; want the new pool's spare alone", got)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	leftover()
	if err := r.RemoveSpares(ctx, "t"); err != nil {
		t.Fatalf("RemoveSpares: %v", err)
	}
	if got := registered(t, r); len(got) != 0 {
		t.Errorf("worktrees after RemoveSpares = %q; want none", got)
	}
	if _, err := os.Stat(filepath.Join(dir, ".troupe", "worktrees", "t")); !os.IsNotExist(err) {
		t.Errorf("the team's folder is still there: %v", err)
	}
}

// TestPoolSpareIndexNotRacy: a spare's index is written in a later second
// than its files, so git does not re-read them at the first commit.
func TestPoolSpareIndexNotRacy(t *testing.T) {
	ctx, dir, r := openRepo(t, map[string]string{"a.txt": "one\n", "b/c.txt": "two\n"})
	p := worktree.NewPool(r, "t", 1)
	defer p.Close()
	if err := p.Wait(ctx, 1); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	wt, err := p.Take(ctx, "alice", git(t, dir, "rev-parse", "HEAD"))
	if err != nil {
		t.Fatal(err)
	}
	// HEAD did not move: the branch is made as refs alone.
	if got := git(t, wt.Path, "symbolic-ref", "--short", "HEAD"); got != "troupe/t/alice" {
		t.Errorf("the worktree is on %q; want troupe/t/alice", got)
	}
	if st := git(t, wt.Path, "status", "--porcelain"); st != "" {
		t.Errorf("the taken worktree is not clean: %q", st)
	}
	index := git(t, wt.Path, "rev-parse", "--path-format=absolute", "--git-path", "index")
	fi, err := os.Stat(index)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a.txt", "b/c.txt"} {
		ff, err := os.Stat(filepath.Join(wt.Path, f))
		if err != nil {
			t.Fatal(err)
		}
		if ff.ModTime().Unix() >= fi.ModTime().Unix() {
			t.Errorf("%s written at %s, the index at %s: racily clean", f, ff.ModTime(), fi.ModTime())
		}
	}
}

// TestPoolTakeReady: a spawn from the pool checks the base beside the
// take. A dirty base, or one mid-merge, refuses it and leaves no worktree
// or branch behind; a clean one after HEAD moved gets the new HEAD.
func TestPoolTakeReady(t *testing.T) {
	ctx, dir, r := openRepo(t, map[string]string{"a.txt": "one\n"})
	p := worktree.NewPool(r, "t", 1)
	defer p.Close()
	for _, tc := range []struct {
		name  string
		dirty func()
		clean func()
		want  error
	}{
		{"unstaged change", func() { write(t, filepath.Join(dir, "a.txt"), "changed\n") },
			func() { git(t, dir, "checkout", "--", "a.txt") }, worktree.ErrDirty},
		{"staged change", func() { write(t, filepath.Join(dir, "a.txt"), "staged\n"); git(t, dir, "add", "a.txt") },
			func() { git(t, dir, "reset", "--quiet", "--hard") }, worktree.ErrDirty},
		{"mid-merge", func() { write(t, filepath.Join(dir, ".git", "MERGE_HEAD"), git(t, dir, "rev-parse", "HEAD")+"\n") },
			func() { _ = os.Remove(filepath.Join(dir, ".git", "MERGE_HEAD")) }, worktree.ErrBusy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := p.Wait(ctx, 1); err != nil {
				t.Fatalf("Wait: %v", err)
			}
			tc.dirty()
			defer tc.clean()
			_, err := p.TakeReady(ctx, "alice")
			if !errors.Is(err, tc.want) {
				t.Fatalf("TakeReady = %v; want %v", err, tc.want)
			}
			if _, err := os.Stat(r.Path("t", "alice")); !os.IsNotExist(err) {
				t.Errorf("alice's worktree is there after the refusal: %v", err)
			}
			if out := git(t, dir, "branch", "--list", "troupe/t/alice"); out != "" {
				t.Errorf("alice's branch is there after the refusal: %q", out)
			}
		})
	}
	if err := p.Wait(ctx, 1); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	write(t, filepath.Join(dir, "b.txt"), "two\n")
	git(t, dir, "add", "b.txt")
	git(t, dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "more")
	head := git(t, dir, "rev-parse", "HEAD")
	wt, err := p.TakeReady(ctx, "alice")
	if err != nil {
		t.Fatalf("TakeReady: %v", err)
	}
	if got := git(t, wt.Path, "rev-parse", "HEAD"); got != head {
		t.Errorf("alice's worktree is at %s; want the base's HEAD %s", got, head)
	}
	if got := git(t, wt.Path, "symbolic-ref", "--short", "HEAD"); got != "troupe/t/alice" {
		t.Errorf("alice's worktree is on %q", got)
	}
	if st := git(t, wt.Path, "status", "--porcelain"); st != "" {
		t.Errorf("alice's worktree is not clean: %q", st)
	}
}

// TestPoolBurst: a burst of takes larger than the pool is served by the
// spares being made (none falls back), and the pool then keeps as many
// ready as the burst asked for, up to its max.
func TestPoolBurst(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := gitRepo(t, map[string]string{"a.txt": "one\n"})
	r, err := worktree.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	p := worktree.NewPoolMax(r, "t", 1, 3)
	defer p.Close()
	if err := p.Wait(ctx, 1); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	var names []string
	for _, m := range []string{"a", "b", "c", "d"} {
		wt, err := p.TakeReady(ctx, m)
		if err != nil {
			t.Fatalf("TakeReady %s: %v", m, err)
		}
		names = append(names, filepath.Base(wt.Path))
	}
	if diff := cmp.Diff([]string{"a", "b", "c", "d"}, names); diff != "" {
		t.Errorf("taken (-want +got):\n%s", diff)
	}
	if got := p.Target(); got != 3 {
		t.Errorf("Target after a burst of 4 = %d; want the max, 3", got)
	}
	if err := p.Wait(ctx, 3); err != nil {
		t.Fatalf("Wait 3: %v", err)
	}
	if got := p.Ready(); got != 3 {
		t.Errorf("Ready = %d; want 3", got)
	}
	var spares int
	for _, w := range registered(t, r) {
		if strings.Contains(w, "/"+worktree.SpareDir+"/") {
			spares++
		}
	}
	if spares != 3 {
		t.Errorf("%d spares registered; want 3: %q", spares, registered(t, r))
	}
}

// TestPoolWaitReportsFailedSpare: one of two spares made at once fails and
// the other is ready after it: the pool makes no more until the next take,
// so Wait for both reports the failure instead of waiting for ever (the
// other's success had cleared it).
func TestPoolWaitReportsFailedSpare(t *testing.T) {
	ctx, _, r := openRepo(t, map[string]string{"a.txt": "one\n"})
	injected := errors.New("no space left on device (injected)")
	worktree.SetBeforeSpare(func(seq int) error {
		if seq == 1 {
			return injected
		}
		return nil
	})
	t.Cleanup(func() { worktree.SetBeforeSpare(nil) })
	p := worktree.NewPool(r, "t", 2)
	defer p.Close()
	if err := p.ReadyAtLeast(ctx, 1); err != nil {
		t.Fatalf("the second spare: %v", err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := p.Wait(wctx, 2); !errors.Is(err, injected) {
		t.Fatalf("Wait for 2 spares = %v; want the failure of the first", err)
	}
}

// TestPoolGiveBackRipensRawSpare: a raw spare whose take failed after its
// maker stopped watching it (the maker's ripen found it taken) is given
// back and ripened again. Left raw it never counted as ready, yet counted
// towards the pool's target: no other was made, and a Wait for a ready
// spare hung.
func TestPoolGiveBackRipensRawSpare(t *testing.T) {
	ctx, _, r := openRepo(t, map[string]string{"a.txt": "one\n"})
	missed := make(chan string, 1)
	worktree.SetRipenMissed(func(path string) {
		select {
		case missed <- path:
		default: // told once is enough; a ripen never waits on the test
		}
	})
	making := make(chan struct{})
	worktree.SetBeforeSpare(func(seq int) error {
		if seq == 1 {
			close(making)
		}
		return nil
	})
	t.Cleanup(func() { worktree.SetRipenMissed(nil); worktree.SetBeforeSpare(nil) })
	p := worktree.NewPool(r, "t", 1)
	defer p.Close()
	select {
	case <-making: // the pool has cleaned up and makes its spare
	case <-ctx.Done():
		t.Fatal("the pool never made a spare")
	}
	// The take will wait for the merge queue, held elsewhere, until it is
	// given up: its spare goes back.
	release, err := r.HoldQueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	tctx, tcancel := context.WithCancel(ctx)
	took := make(chan error, 1)
	go func() {
		_, err := p.Take(tctx, "alice", "")
		took <- err
	}()
	select {
	case <-missed: // the spare was taken raw, and its maker has let it go
	case err := <-took:
		t.Fatalf("Take ended before the spare's ripen: %v", err)
	case <-ctx.Done():
		t.Fatal("the spare's ripen never ran")
	}
	tcancel()
	if err := <-took; err == nil {
		t.Fatal("Take with the queue held elsewhere succeeded")
	}
	release()
	wctx, wcancel := context.WithTimeout(ctx, 15*time.Second)
	defer wcancel()
	if err := p.ReadyAtLeast(wctx, 1); err != nil {
		t.Fatalf("the spare given back never became ready: %v", err)
	}
}

// openRepo opens a new repository holding files, for a test that has a
// minute.
func openRepo(t *testing.T, files map[string]string) (context.Context, string, *worktree.Repo) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	dir := gitRepo(t, files)
	r, err := worktree.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, dir, r
}
