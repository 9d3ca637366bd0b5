// Package worktree gives each teammate its own git worktree and merges
// their branches back: it runs the user's git as a process (never a
// re-implementation), creates `.troupe/worktrees/<team>/<member>` on branch
// `troupe/<team>/<member>` from the base checkout's HEAD, commits a
// worktree's changes, merges a branch into the base checkout (fast-forward
// or merge commit) and, on a conflict, reports the files and hunks and
// leaves the base as it was.
//
// It must never depend on the team runtime, the store or the agent loop:
// it knows git and paths only.
package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofrs/flock"
)

// MinGit is the oldest git this package drives (`git worktree` with
// `--orphan`-free `add -b`, `prune`, `merge --abort` and `-C`).
var MinGit = [2]int{2, 25}

var (
	// ErrNoGit says git is not installed or not on PATH.
	ErrNoGit = errors.New("git not found on PATH (worktree isolation runs the user's git)")
	// ErrOldGit says git is older than MinGit.
	ErrOldGit = errors.New("git is too old for worktree isolation")
	// ErrNotRepo says the directory is not inside a git work tree.
	ErrNotRepo = errors.New("not a git repository")
	// ErrNoCommit says the repository has no commit to branch from.
	ErrNoCommit = errors.New("the repository has no commit to branch from")
	// ErrDirty says the base checkout has changes a branch would not carry.
	ErrDirty = errors.New("the checkout has uncommitted changes")
	// ErrBusy says the base checkout is in the middle of a merge, rebase,
	// cherry-pick or revert.
	ErrBusy = errors.New("the checkout is in the middle of another git operation")
	// ErrConflict is wrapped by Merge's error when the branch conflicts.
	ErrConflict = errors.New("merge conflict")
)

// Dir is where teammates' worktrees live, relative to the repository's
// top level.
const Dir = ".troupe/worktrees"

// Repo is the base checkout: the lead's repository.
type Repo struct {
	// Top is the absolute top level of the base checkout.
	Top string
	git string

	mu sync.Mutex // one merge at a time in this process (a file lock guards across processes)

	once      sync.Once
	gitDir    string   // the base checkout's own git folder
	commonDir string   // the repository's shared git folder
	ident     []string // identity options for commits when the user has none
	setupErr  error
}

// setup reads, once, what every later command needs: the git folders and
// whether commits need an identity.
func (r *Repo) setup(ctx context.Context) error {
	r.once.Do(func() {
		out, err := r.run(ctx, r.Top, "rev-parse", "--git-dir", "--git-common-dir")
		if err != nil {
			r.setupErr = err
			return
		}
		f := strings.Fields(out)
		if len(f) != 2 {
			r.setupErr = fmt.Errorf("git rev-parse --git-dir --git-common-dir said %q", out)
			return
		}
		abs := func(p string) string {
			if !filepath.IsAbs(p) {
				p = filepath.Join(r.Top, p)
			}
			return p
		}
		r.gitDir, r.commonDir = abs(f[0]), abs(f[1])
		if v, _ := r.run(ctx, r.Top, "config", "user.name"); strings.TrimSpace(v) == "" {
			r.ident = append(r.ident, "-c", "user.name=troupe")
		}
		if v, _ := r.run(ctx, r.Top, "config", "user.email"); strings.TrimSpace(v) == "" {
			r.ident = append(r.ident, "-c", "user.email=troupe@localhost")
		}
	})
	return r.setupErr
}

var version struct {
	once         sync.Once
	major, minor int
	err          error
}

// Version returns the installed git's major and minor version (asked once
// per process).
func Version(ctx context.Context) (int, int, error) {
	version.once.Do(func() { version.major, version.minor, version.err = askVersion(ctx) })
	return version.major, version.minor, version.err
}

func askVersion(ctx context.Context) (int, int, error) {
	exe, err := exec.LookPath("git")
	if err != nil {
		return 0, 0, ErrNoGit
	}
	out, err := exec.CommandContext(ctx, exe, "--version").Output()
	if err != nil {
		return 0, 0, fmt.Errorf("git --version: %w", err)
	}
	return parseVersion(string(out))
}

var versionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(\d+)\.(\d+)`) })

func parseVersion(s string) (int, int, error) {
	m := versionRE().FindStringSubmatch(s)
	if m == nil {
		return 0, 0, fmt.Errorf("git --version said %q: no version number", strings.TrimSpace(s))
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return major, minor, nil
}

// findGit returns the user's git, refused when older than MinGit.
func findGit(ctx context.Context) (string, error) {
	major, minor, err := Version(ctx)
	if err != nil {
		return "", err
	}
	if major < MinGit[0] || major == MinGit[0] && minor < MinGit[1] {
		return "", fmt.Errorf("%w: found %d.%d, need %d.%d or newer", ErrOldGit, major, minor, MinGit[0], MinGit[1])
	}
	exe, err := exec.LookPath("git")
	if err != nil {
		return "", ErrNoGit
	}
	return exe, nil
}

// Open finds the git work tree holding dir and checks git's version.
func Open(ctx context.Context, dir string) (*Repo, error) {
	exe, err := findGit(ctx)
	if err != nil {
		return nil, err
	}
	r := &Repo{git: exe}
	top, err := r.run(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNotRepo, dir, err)
	}
	r.Top = filepath.Clean(strings.TrimSpace(top))
	if t, err := filepath.EvalSymlinks(r.Top); err == nil {
		r.Top = t
	}
	return r, nil
}

// gitError is a failed git command with what it printed.
type gitError struct {
	args   []string
	stderr string
	err    error
}

func (e *gitError) Error() string {
	msg := strings.TrimSpace(e.stderr)
	if msg == "" {
		msg = e.err.Error()
	}
	return fmt.Sprintf("git %s: %s", strings.Join(e.args, " "), msg)
}

func (e *gitError) Unwrap() error { return e.err }

// run runs git in dir and returns its standard output.
func (r *Repo) run(ctx context.Context, dir string, args ...string) (string, error) {
	for try := 1; ; try++ {
		out, err := r.runOnce(ctx, dir, args...)
		if err == nil || try == 3 || !halfMade(err) {
			return out, err
		}
		// Another `git worktree add` (a pool's spare, a spawn) was writing
		// its record while this command read every worktree's: it is
		// complete a moment later.
		select {
		case <-ctx.Done():
			return out, err
		case <-time.After(time.Duration(try) * 20 * time.Millisecond):
		}
	}
}

// halfMadeRE is git failing on a worktree record another git is writing.
var halfMadeRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(failed to read|unable to read|validation failed).*worktrees/[^/]+/(commondir|gitdir)`)
})

func halfMade(err error) bool {
	var ge *gitError
	return errors.As(err, &ge) && halfMadeRE().MatchString(ge.stderr)
}

func (r *Repo) runOnce(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, r.git, append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), &gitError{args: args, stderr: errb.String(), err: err}
	}
	return out.String(), nil
}

// commitArgs are the options every commit this package makes carries: an
// identity when the user has none configured.
func (r *Repo) commitArgs(ctx context.Context) []string {
	_ = r.setup(ctx)
	return append([]string(nil), r.ident...)
}

// Head returns the commit the base checkout is on.
func (r *Repo) Head(ctx context.Context) (string, error) {
	out, err := r.run(ctx, r.Top, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if err != nil {
		return "", ErrNoCommit
	}
	return strings.TrimSpace(out), nil
}

// BaseBranch names the branch the base checkout is on ("" when detached).
func (r *Repo) BaseBranch(ctx context.Context) string {
	out, err := r.run(ctx, r.Top, "symbolic-ref", "--quiet", "--short", "HEAD")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

// Ready checks that the base checkout can be branched and merged into: it
// has a commit, no operation in progress and no uncommitted change to a
// tracked file (which a teammate's branch would not carry and a merge
// could not pass over).
func (r *Repo) Ready(ctx context.Context) error {
	_, err := r.ReadyHead(ctx)
	return err
}

// ReadyHead is Ready that also returns the commit the base is on, for a
// spawn to branch from.
func (r *Repo) ReadyHead(ctx context.Context) (string, error) {
	if err := r.setup(ctx); err != nil {
		return "", err
	}
	// One git process for HEAD and the tracked changes: a spawn waits for
	// it. Untracked files are left out: a branch does not need them, and
	// listing them walks the whole tree.
	out, err := r.run(ctx, r.Top, "status", "--porcelain=v2", "--branch", "--untracked-files=no")
	if err != nil {
		return "", err
	}
	head, tracked := statusV2(out)
	if head == "" {
		return "", fmt.Errorf("%s: %w (commit something first)", r.Top, ErrNoCommit)
	}
	for _, f := range []string{"MERGE_HEAD", "rebase-merge", "rebase-apply", "CHERRY_PICK_HEAD", "REVERT_HEAD"} {
		if _, err := os.Stat(filepath.Join(r.gitDir, f)); err == nil {
			return "", fmt.Errorf("%s: %w (%s); finish or abort it first", r.Top, ErrBusy, f)
		}
	}
	if len(tracked) > 0 {
		return "", fmt.Errorf("%s: %w to %s; commit or stash them first", r.Top, ErrDirty, list(tracked, 5))
	}
	return head, nil
}

// statusV2 reads `git status --porcelain=v2 --branch`: the commit HEAD is
// on ("" before the first) and the paths of changed tracked files.
func statusV2(out string) (head string, tracked []string) {
	for l := range strings.SplitSeq(out, "\n") {
		if oid, ok := strings.CutPrefix(l, "# branch.oid "); ok {
			if oid = strings.TrimSpace(oid); oid != "(initial)" {
				head = oid
			}
			continue
		}
		// Ordinary (1), renamed (2) and unmerged (u) entries have 8, 9
		// and 10 fields before the path.
		f := strings.SplitN(l, " ", 11)
		n := map[string]int{"1": 8, "2": 9, "u": 10}[f[0]]
		if n == 0 || len(f) <= n {
			continue
		}
		path := strings.Join(f[n:], " ")
		path, _, _ = strings.Cut(path, "\t") // a rename's original path follows a tab
		tracked = append(tracked, path)
	}
	return head, tracked
}

func list(s []string, n int) string {
	if len(s) <= n {
		return strings.Join(s, ", ")
	}
	return strings.Join(s[:n], ", ") + fmt.Sprintf(" and %d more", len(s)-n)
}

// Changed lists `git status --porcelain` lines of the checkout at dir.
func (r *Repo) Changed(ctx context.Context, dir string) ([]string, error) {
	out, err := r.run(ctx, dir, "status", "--porcelain", "--untracked-files=all")
	if err != nil {
		return nil, err
	}
	var lines []string
	for l := range strings.SplitSeq(out, "\n") {
		if len(l) > 3 {
			lines = append(lines, l)
		}
	}
	return lines, nil
}

// Branch is the branch of a teammate's worktree.
func Branch(team, member string) string { return "troupe/" + team + "/" + member }

// Path is where a teammate's worktree lives.
func (r *Repo) Path(team, member string) string {
	return filepath.Join(r.Top, filepath.FromSlash(Dir), team, member)
}

// Worktree is one teammate's checkout.
type Worktree struct {
	Path, Branch string
	// Reused is true when the worktree existed already (a resume).
	Reused bool
}

// Add creates the teammate's worktree on its branch from the base
// checkout's HEAD, or finds it again when it exists (a resume after a
// crash): its branch and its uncommitted work are kept.
func (r *Repo) Add(ctx context.Context, team, member string) (Worktree, error) {
	wt := Worktree{Path: r.Path(team, member), Branch: Branch(team, member)}
	unlock, err := r.lock(ctx)
	if err != nil {
		return wt, err
	}
	defer unlock()
	if err := r.exclude(ctx); err != nil {
		return wt, err
	}
	if fi, err := os.Stat(filepath.Join(wt.Path, ".git")); err == nil && !fi.IsDir() {
		if b, err := r.run(ctx, wt.Path, "symbolic-ref", "--quiet", "--short", "HEAD"); err == nil && strings.TrimSpace(b) == wt.Branch {
			wt.Reused = true
			return wt, nil
		}
		return wt, fmt.Errorf("%s exists but is not on branch %s; remove it or pick another name", wt.Path, wt.Branch)
	}
	head, err := r.Head(ctx)
	if err != nil {
		return wt, fmt.Errorf("%s: %w", r.Top, err)
	}
	// Each try looks for the branch again: a `git worktree add -b` that
	// failed (on another git writing its worktree record, or a worktree
	// deleted by hand) may have made the branch before it failed, and the
	// same command again would only say the branch exists.
	var first error
	for try := 1; ; try++ {
		args := []string{"worktree", "add", "--quiet"}
		if _, err := r.run(ctx, r.Top, "rev-parse", "--verify", "--quiet", "refs/heads/"+wt.Branch); err == nil {
			// The branch outlived its worktree: check it out again, commits kept.
			args = append(args, wt.Path, wt.Branch)
		} else {
			args = append(args, "-b", wt.Branch, wt.Path, head)
		}
		if beforeAdd != nil {
			beforeAdd(r.Top, wt.Branch, try)
		}
		_, err := r.runOnce(ctx, r.Top, args...)
		if err == nil {
			return wt, nil
		}
		if first == nil {
			first = err
		}
		if try == 4 {
			return wt, fmt.Errorf("%w (first try: %v)", err, first)
		}
		if halfMade(err) {
			select {
			case <-ctx.Done():
				return wt, err
			case <-time.After(time.Duration(try) * 20 * time.Millisecond):
			}
			continue
		}
		// A worktree deleted by hand leaves an entry that refuses the add:
		// prune it and try again.
		if _, perr := r.run(ctx, r.Top, "worktree", "prune"); perr != nil {
			return wt, err
		}
	}
}

// beforeAdd, when set (by tests), runs before each try of Add's git
// worktree add.
var beforeAdd func(top, branch string, try int)

// exclude keeps troupe's own folder out of git status and commits, in the
// repository's info/exclude (never in a tracked .gitignore).
func (r *Repo) exclude(ctx context.Context) error {
	if err := r.setup(ctx); err != nil {
		return err
	}
	p := filepath.Join(r.commonDir, "info", "exclude")
	b, _ := os.ReadFile(p)
	for l := range strings.SplitSeq(string(b), "\n") {
		if strings.TrimSpace(l) == "/.troupe/" {
			return nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	prefix := ""
	if len(b) > 0 && !bytes.HasSuffix(b, []byte("\n")) {
		prefix = "\n"
	}
	_, err = f.WriteString(prefix + "# troupe's state and teammates' worktrees\n/.troupe/\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Commit commits every change of the worktree at dir with message, and
// returns the new commit ("" when there was nothing to commit).
func (r *Repo) Commit(ctx context.Context, dir, message string) (string, error) {
	if _, err := r.run(ctx, dir, "add", "-A"); err != nil {
		return "", err
	}
	if _, err := r.run(ctx, dir, "diff", "--cached", "--quiet"); err == nil {
		return "", nil
	}
	args := append(r.commitArgs(ctx), "commit", "--quiet", "--no-verify", "-m", message)
	if _, err := r.run(ctx, dir, args...); err != nil {
		return "", err
	}
	out, err := r.run(ctx, dir, "rev-parse", "HEAD")
	return strings.TrimSpace(out), err
}

// Mode is how a branch is merged into the base.
type Mode string

// Merge modes.
const (
	// FastForward moves the base to the branch when the base has not moved
	// since the branch left it, and makes a merge commit otherwise.
	FastForward Mode = "ff"
	// MergeCommit always makes a merge commit.
	MergeCommit Mode = "merge"
)

// ParseMode reads a merge mode setting ("" is FastForward).
func ParseMode(s string) (Mode, error) {
	switch Mode(strings.TrimSpace(s)) {
	case "", FastForward, "fast-forward":
		return FastForward, nil
	case MergeCommit, "merge-commit", "no-ff":
		return MergeCommit, nil
	}
	return "", fmt.Errorf("merge mode %q: want ff or merge", s)
}

// Hunk is one conflicting region of a file: the base's side and the
// branch's.
type Hunk struct {
	Line   int    `json:"line"`
	Ours   string `json:"ours"`
	Theirs string `json:"theirs"`
}

// Conflict is one file the merge could not combine.
type Conflict struct {
	File  string `json:"file"`
	Hunks []Hunk `json:"hunks,omitempty"`
}

// Merged is what a merge did.
type Merged struct {
	// Commit is the base's new HEAD ("" when nothing was merged).
	Commit string
	// How is "fast-forward", "merge commit" or "up to date".
	How string
	// Conflicts are set, with an error wrapping ErrConflict, when the
	// branch conflicts; the base is left as it was.
	Conflicts []Conflict
}

// Merge merges branch into the base checkout. On a conflict it collects
// the conflicting files and hunks, aborts, and returns an error wrapping
// ErrConflict: a conflict is never resolved here.
func (r *Repo) Merge(ctx context.Context, branch, message string, mode Mode) (Merged, error) {
	unlock, err := r.lock(ctx)
	if err != nil {
		return Merged{}, err
	}
	defer unlock()
	before, err := r.Head(ctx)
	if err != nil {
		return Merged{}, err
	}
	if _, err := r.run(ctx, r.Top, "merge-base", "--is-ancestor", branch, "HEAD"); err == nil {
		return Merged{Commit: before, How: "up to date"}, nil
	}
	args := append(r.commitArgs(ctx), "merge", "--no-edit", "-m", message)
	if mode == MergeCommit {
		args = append(args, "--no-ff")
	} else {
		args = append(args, "--ff")
	}
	args = append(args, branch)
	if _, err := r.run(ctx, r.Top, args...); err != nil {
		conflicts := r.conflicts(ctx)
		_, _ = r.run(ctx, r.Top, "merge", "--abort")
		if len(conflicts) == 0 {
			return Merged{}, err
		}
		return Merged{Conflicts: conflicts}, fmt.Errorf("%w: merging %s: %s", ErrConflict, branch, conflictFiles(conflicts))
	}
	after, err := r.Head(ctx)
	if err != nil {
		return Merged{}, err
	}
	// A merge commit of this merge has the old base as first parent; a
	// fast-forward may land on a merge commit the branch made itself.
	how := "fast-forward"
	if ps := strings.Fields(must(r.run(ctx, r.Top, "rev-list", "--parents", "-n", "1", "HEAD"))); len(ps) > 2 && ps[1] == before {
		how = "merge commit"
	}
	return Merged{Commit: after, How: how}, nil
}

func conflictFiles(cs []Conflict) string {
	var fs []string
	for _, c := range cs {
		fs = append(fs, c.File)
	}
	return strings.Join(fs, ", ")
}

// conflicts reads the unmerged files of a merge that stopped and the
// regions git marked in each.
func (r *Repo) conflicts(ctx context.Context) []Conflict {
	out, err := r.run(ctx, r.Top, "diff", "--name-only", "--diff-filter=U")
	if err != nil {
		return nil
	}
	var cs []Conflict
	for f := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		if f == "" {
			continue
		}
		c := Conflict{File: f}
		if b, err := os.ReadFile(filepath.Join(r.Top, filepath.FromSlash(f))); err == nil {
			c.Hunks = Hunks(string(b))
		}
		cs = append(cs, c)
	}
	return cs
}

// Hunks finds git's conflict markers in a file's text.
func Hunks(text string) []Hunk {
	var hs []Hunk
	var cur *Hunk
	side := 0 // 1: ours, 2: base (diff3), 3: theirs
	for i, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		switch {
		case strings.HasPrefix(l, "<<<<<<<"):
			hs = append(hs, Hunk{Line: i + 1})
			cur, side = &hs[len(hs)-1], 1
		case cur != nil && strings.HasPrefix(l, "|||||||"):
			side = 2
		case cur != nil && strings.HasPrefix(l, "======="):
			side = 3
		case cur != nil && strings.HasPrefix(l, ">>>>>>>"):
			cur, side = nil, 0
		case side == 1:
			cur.Ours += l + "\n"
		case side == 3:
			cur.Theirs += l + "\n"
		}
	}
	return hs
}

// IsMerged reports whether branch has nothing the base lacks.
func (r *Repo) IsMerged(ctx context.Context, branch string) bool {
	_, err := r.run(ctx, r.Top, "merge-base", "--is-ancestor", branch, "HEAD")
	return err == nil
}

// Remove deletes a teammate's worktree and its branch. Unless force is
// set it refuses when the worktree has uncommitted changes or the branch
// has commits the base lacks. It ends with `git worktree prune`.
func (r *Repo) Remove(ctx context.Context, wt Worktree, force bool) error {
	unlock, err := r.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if !force {
		if _, err := os.Stat(wt.Path); err == nil {
			if ch, err := r.Changed(ctx, wt.Path); err == nil && len(ch) > 0 {
				return fmt.Errorf("%s has uncommitted changes (%d files); kept", wt.Path, len(ch))
			}
		}
		if _, err := r.run(ctx, r.Top, "merge-base", "--is-ancestor", wt.Branch, "HEAD"); err != nil {
			if _, err := r.run(ctx, r.Top, "rev-parse", "--verify", "--quiet", "refs/heads/"+wt.Branch); err == nil {
				return fmt.Errorf("branch %s has commits the base lacks; kept %s", wt.Branch, wt.Path)
			}
		}
	}
	if _, err := os.Stat(wt.Path); err == nil {
		args := []string{"worktree", "remove", wt.Path}
		if force {
			args = []string{"worktree", "remove", "--force", "--force", wt.Path}
		}
		if _, err := r.run(ctx, r.Top, args...); err != nil {
			return err
		}
	}
	if _, err := r.run(ctx, r.Top, "rev-parse", "--verify", "--quiet", "refs/heads/"+wt.Branch); err == nil {
		if _, err := r.run(ctx, r.Top, "branch", "-D", wt.Branch); err != nil {
			return err
		}
	}
	_, err = r.run(ctx, r.Top, "worktree", "prune")
	// Empty team folders left behind are troupe's own, not the user's.
	_ = os.Remove(filepath.Dir(wt.Path))
	_ = os.Remove(filepath.Join(r.Top, filepath.FromSlash(Dir)))
	return err
}

// lock serialises the operations that change the base checkout or the
// worktree list: in this process, and across the teammate processes of
// process mode (a lock file in the repository's git folder).
func (r *Repo) lock(ctx context.Context) (func(), error) {
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	r.mu.Lock()
	fl := flock.New(filepath.Join(r.commonDir, "troupe-merge.lock"))
	if _, err := fl.TryLockContext(ctx, 10*time.Millisecond); err != nil {
		r.mu.Unlock()
		return nil, fmt.Errorf("lock the merge queue of %s: %w", r.Top, err)
	}
	return func() { _ = fl.Unlock(); r.mu.Unlock() }, nil
}

// Prune drops git's records of worktrees whose folders are gone.
func (r *Repo) Prune(ctx context.Context) error {
	_, err := r.run(ctx, r.Top, "worktree", "prune")
	return err
}

// Registered lists the paths of the repository's worktrees other than the
// base checkout.
func (r *Repo) Registered(ctx context.Context) ([]string, error) {
	out, err := r.run(ctx, r.Top, "worktree", "list", "--porcelain")
	if err != nil {
		return nil, err
	}
	var ps []string
	for l := range strings.SplitSeq(out, "\n") {
		if p, ok := strings.CutPrefix(l, "worktree "); ok && filepath.Clean(p) != r.Top {
			ps = append(ps, filepath.Clean(p))
		}
	}
	return ps, nil
}

// BaseOf returns the base checkout a teammate's worktree path belongs to
// (Path's inverse).
func BaseOf(path, team, member string) (string, bool) {
	suffix := string(filepath.Separator) + filepath.Join(filepath.FromSlash(Dir), team, member)
	top, ok := strings.CutSuffix(filepath.Clean(path), suffix)
	return top, ok && top != ""
}

// must is a command's output, empty when it failed.
func must(out string, err error) string {
	if err != nil {
		return ""
	}
	return out
}
