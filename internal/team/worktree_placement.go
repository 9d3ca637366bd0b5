package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/tool/kind"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// Isolation values: where a teammate works.
const (
	IsolationShared   = "shared"
	IsolationWorktree = "worktree"
)

// Worktrees groups the settings of worktree isolation (issue 19).
type Worktrees struct {
	// Isolation is the team-wide default of a spawn's isolation:
	// IsolationShared ("") or IsolationWorktree.
	Isolation string
	// MergeMode is how a teammate's branch is merged into the lead's:
	// "ff" (fast-forward when possible, the default) or "merge" (always a
	// merge commit).
	MergeMode string
	// Pool is how many spare worktrees are kept ready in the background
	// for spawns at the least (0: worktree.DefaultPoolSize; negative: none,
	// every spawn runs `git worktree add`).
	Pool int
	// PoolMax is how many the pool grows to after a burst of spawns larger
	// than Pool (0: worktree.DefaultPoolMax).
	PoolMax int
}

// ParseIsolation checks an isolation setting ("" is shared).
func ParseIsolation(s string) (string, error) {
	switch strings.TrimSpace(s) {
	case "", IsolationShared:
		return IsolationShared, nil
	case IsolationWorktree:
		return IsolationWorktree, nil
	}
	return "", fmt.Errorf("isolation %q: want shared or worktree", s)
}

// repos shares one Repo per base checkout in this process, so its merges
// are serialised by one lock before the file lock, and git is asked where
// a folder's checkout is only once.
var repos sync.Map // top, and each folder asked about -> *worktree.Repo

func openRepo(ctx context.Context, dir string) (*worktree.Repo, error) {
	if r, ok := repos.Load(dir); ok {
		return r.(*worktree.Repo), nil
	}
	r, err := worktree.Open(ctx, dir)
	if err != nil {
		return nil, err
	}
	got, _ := repos.LoadOrStore(r.Top, r)
	repos.Store(dir, got)
	return got.(*worktree.Repo), nil
}

// isolate places a spawned teammate in its own worktree when the spawn,
// the team's pattern or the team asks for it, in that order. A workspace
// that cannot be branched is an error, never a silent shared checkout.
func (s *Session) isolate(ctx context.Context, t store.Team, name, asked string, env *Env) (worktree.Worktree, string, error) {
	iso, err := s.isolation(asked)
	if err != nil {
		return worktree.Worktree{}, "", err
	}
	if iso != IsolationWorktree {
		return worktree.Worktree{}, "", nil
	}
	mode, err := worktree.ParseMode(s.cfg.MergeMode)
	if err != nil {
		return worktree.Worktree{}, "", err
	}
	wt, err := placeInWorktree(ctx, s.cfg.Workspace, t.Name(), name, env, true, s.spares)
	if err != nil {
		return wt, "", fmt.Errorf("isolation worktree: %w", err)
	}
	s.startMergeQueue(t)
	return wt, string(mode), nil
}

// isolation resolves where a spawn works: its own isolation field, else
// the team pattern's, else the team's default (--isolation,
// team.isolation).
func (s *Session) isolation(asked string) (string, error) {
	if strings.TrimSpace(asked) == "" {
		asked = s.cfg.Rules.patternIsolation(s.pattern())
	}
	if strings.TrimSpace(asked) == "" {
		asked = s.cfg.Isolation
	}
	return ParseIsolation(asked)
}

// reisolate puts a member the roster says has a worktree back in it (a
// resume, a restart): its branch and uncommitted work are as it left them.
func (s *Session) reisolate(ctx context.Context, t store.Team, m store.Member, env *Env) error {
	if m.Worktree == "" {
		return nil
	}
	if _, err := placeInWorktree(ctx, s.cfg.Workspace, t.Name(), m.Name, env, false, nil); err != nil {
		return fmt.Errorf("worktree of %s: %w", m.Name, err)
	}
	s.startMergeQueue(t)
	return nil
}

// placeInWorktree makes (or finds) the member's worktree and points env's
// workspace at the same folder inside it as the lead's workspace is inside
// the base checkout. A fresh one is taken from the team's pool of spares
// when spares gives one with a spare ready, else made with `git worktree
// add`.
func placeInWorktree(ctx context.Context, base *tool.Workspace, teamName, name string, env *Env, fresh bool,
	spares func(*worktree.Repo, string) *worktree.Pool) (worktree.Worktree, error) {
	repo, err := openRepo(ctx, base.Dir())
	if err != nil {
		return worktree.Worktree{}, err
	}
	var wt worktree.Worktree
	taken, checked := false, false
	if fresh && spares != nil {
		if p := spares(repo, teamName); p != nil {
			// The base's check runs beside the take; a base that cannot
			// be branched refuses the spawn, a spare that cannot be used
			// (a move refused) costs nothing but the slow path.
			wt, err = p.TakeReady(ctx, name)
			switch {
			case err == nil:
				taken = true
			case !errors.Is(err, worktree.ErrPoolEmpty):
				return wt, err
			}
			checked = true
		}
	}
	if fresh && !checked {
		if _, err := repo.ReadyHead(ctx); err != nil {
			return worktree.Worktree{}, err
		}
	}
	if !taken {
		if wt, err = repo.Add(ctx, teamName, name); err != nil {
			return wt, err
		}
	}
	sub, err := filepath.Rel(repo.Top, base.Dir())
	if err != nil || strings.HasPrefix(sub, "..") {
		sub = "."
	}
	ws, err := tool.OpenWorkspace(filepath.Join(wt.Path, sub))
	if err != nil {
		return wt, err
	}
	for _, d := range base.Dirs() {
		if err := ws.AddDir(d); err != nil {
			ws.Close()
			return wt, err
		}
	}
	env.Workspace = ws
	return wt, nil
}

// worktreeRuntime is the lead's side of worktree isolation in a session:
// the team's pool of spare worktrees and its merge queue, and the merger
// of what teammates on other machines push.
type worktreeRuntime struct {
	mu       sync.Mutex
	pool     *worktree.Pool
	poolTeam string
	queue    *mergeQueue
	remote   remoteMerger // has its own lock
}

// spares returns the pool of spare worktrees of team in repo, started on
// first use (nil when the pool is turned off).
func (s *Session) spares(repo *worktree.Repo, team string) *worktree.Pool {
	if s.cfg.Worktrees.Pool < 0 {
		return nil
	}
	s.wt.mu.Lock()
	if s.wt.pool != nil && s.wt.poolTeam == team {
		p := s.wt.pool
		s.wt.mu.Unlock()
		return p
	}
	old := s.wt.pool
	p := worktree.NewPoolMax(repo, team, s.cfg.Worktrees.Pool, s.cfg.Worktrees.PoolMax)
	s.wt.pool, s.wt.poolTeam = p, team
	s.wt.mu.Unlock()
	if old != nil {
		// Another team's spares: the session leads one team at a time.
		_ = old.Close()
	}
	return p
}

// warmSpares starts the pool of a team whose teammates work in worktrees
// by default, so that the first spawns find spares ready. A workspace
// that is no repository starts none: the spawn says why.
func (s *Session) warmSpares(ctx context.Context, t store.Team) {
	if iso, err := s.isolation(""); err != nil || iso != IsolationWorktree || s.cfg.Worktrees.Pool < 0 {
		return
	}
	repo, err := openRepo(ctx, s.cfg.Workspace.Dir())
	if err != nil {
		return
	}
	s.spares(repo, t.Name())
}

// closeSpares stops the pool and removes its spares.
func (s *Session) closeSpares() {
	s.wt.mu.Lock()
	p := s.wt.pool
	s.wt.pool, s.wt.poolTeam = nil, ""
	s.wt.mu.Unlock()
	if p != nil {
		_ = p.Close()
	}
}

// queueOnComplete is the runtime's side of completing a task whose owner
// works in a worktree, run by whoever completes it: its changes are
// committed on its branch with the task's subject as message (through the
// artifact guard) and the branch is put in the merge queue, which the
// lead's side of the runtime runs (mergeQueue). It returns a note for the
// caller, or refused: the task must not be marked completed.
func (b *binding) queueOnComplete(ctx context.Context, t store.Team, id string) (note, refused string) {
	task, err := t.Tasks().Get(ctx, id)
	if err != nil {
		return "", ""
	}
	if st := mergeStatus(task); task.Status == store.TaskCompleted && st != MergeConflict && st != MergeQueued {
		// Completed again after its merge: nothing new to merge. One still
		// queued, or whose conflict its owner fixes before the queue
		// reopened it, has what is new committed and queued.
		return "", ""
	}
	owner := task.Owner
	if owner == "" && !b.lead {
		owner = b.self
	}
	// One member's entry, not the whole roster copied: this runs at every
	// completion.
	m, ok, err := t.ReadMember(ctx, owner)
	if err != nil {
		return "", ""
	}
	if ok && m.Placement == PlacementRemote {
		return b.pushOnComplete(ctx, t, task, m)
	}
	if !ok || m.Worktree == "" {
		return "", ""
	}
	baseTop, ok := worktree.BaseOf(m.Worktree, t.Name(), m.Name)
	if !ok {
		return "", fmt.Sprintf("task #%s not completed: %s's worktree %s is not under a checkout's %s", id, m.Name, m.Worktree, worktree.Dir)
	}
	repo, err := openRepo(ctx, baseTop)
	if err != nil {
		return "", fmt.Sprintf("task #%s not completed: %v", id, err)
	}
	subject, refused := b.commitSubject(task, id)
	if refused != "" {
		return "", refused
	}
	branch := memberBranch(t, m)
	rec := MergeRecord{Owner: m.Name, Branch: branch, At: time.Now().UTC()}
	commit, err := repo.Commit(ctx, m.Worktree, subject+"\n\nTroupe-Task: "+id)
	if err != nil {
		rec.Status, rec.Error = MergeFailed, err.Error()
		recordMerge(ctx, t, id, rec)
		return "", fmt.Sprintf("task #%s not completed: commit in %s: %v", id, m.Worktree, err)
	}
	if repo.IsMerged(ctx, branch) {
		rec.Status = MergeNoChanges
		recordMerge(ctx, t, id, rec)
		return " No changes to merge.", ""
	}
	rec.Status, rec.Commit = MergeQueued, commit
	recordMerge(ctx, t, id, rec)
	c := ""
	if commit != "" {
		c = fmt.Sprintf(" Committed %.12s on %s;", commit, branch)
	}
	return fmt.Sprintf("%s queued for merging: the runtime merges it in completion order, and a conflict comes back to %s with the files and hunks.", c, m.Name), ""
}

// mergeStatus is the status of task's merge record ("" without one).
func mergeStatus(task store.Task) string {
	m, _ := task.Metadata[mergeKey].(map[string]any)
	s, _ := m["status"].(string)
	return s
}

// commitSubject is the message's subject of the commit that ends task id,
// or why the artifact guard refuses it.
func (b *binding) commitSubject(task store.Task, id string) (subject, refused string) {
	subject = taskSubject(task)
	if b.rules != nil && b.rules.Guard != nil {
		if w := b.rules.Guard.Find(subject); len(w) > 0 {
			return "", fmt.Sprintf("task #%s not completed: its subject, the commit message, contains %q, a word listed in artifactGuard.words; change the subject with TaskUpdate first", id, w[0])
		}
	}
	return subject, ""
}

// memberBranch is the branch member m works on in team t.
func memberBranch(t store.Team, m store.Member) string {
	if m.Branch != "" {
		return m.Branch
	}
	return worktree.Branch(t.Name(), m.Name)
}

func taskSubject(task store.Task) string {
	if s := strings.TrimSpace(task.Subject); s != "" {
		return s
	}
	return "task #" + task.ID
}

// cleanWorktrees removes the worktrees of a team being deleted: each one
// whose branch is merged and which has nothing uncommitted (or every one,
// forced), then prunes git's records. It returns what it kept and why.
func (s *Session) cleanWorktrees(ctx context.Context, t store.Team, r store.Roster, force bool) string {
	s.closeSpares()
	if repo, err := openRepo(ctx, s.cfg.Workspace.Dir()); err == nil {
		// Spares a crashed process of the team left behind.
		_ = repo.RemoveSpares(ctx, t.Name())
	}
	var removed, kept []string
	for _, m := range r.Members {
		if m.Worktree == "" {
			continue
		}
		top, ok := worktree.BaseOf(m.Worktree, t.Name(), m.Name)
		if !ok {
			continue
		}
		repo, err := openRepo(ctx, top)
		if err != nil {
			kept = append(kept, fmt.Sprintf("%s (%v)", m.Worktree, err))
			continue
		}
		branch := m.Branch
		if branch == "" {
			branch = worktree.Branch(t.Name(), m.Name)
		}
		if err := repo.Remove(ctx, worktree.Worktree{Path: m.Worktree, Branch: branch}, force); err != nil {
			kept = append(kept, err.Error())
			continue
		}
		removed = append(removed, m.Name)
	}
	out := ""
	if len(removed) > 0 {
		out += fmt.Sprintf(" Removed the worktrees of %s.", strings.Join(removed, ", "))
	}
	if len(kept) > 0 {
		out += " Kept: " + strings.Join(kept, "; ") + " (TeamDelete with force removes them)."
	}
	return out
}

// --- MergeStatus ---

type mergeStatusArgs struct{}

type mergeStatusTool struct{ b *binding }

var mergeStatusSpec = tool.NewSpec[mergeStatusArgs]("MergeStatus",
	"Show the merge queue of teammates working in their own git worktrees: each completed task's branch, whether it merged (fast-forward or merge commit), or conflicted and went back to its owner.")

func (mergeStatusTool) Spec() llm.ToolSpec { return mergeStatusSpec }
func (mergeStatusTool) ReadOnly() bool     { return true }
func (mergeStatusTool) Kind() kind.Kind    { return kind.Manage }
func (t mergeStatusTool) Run(ctx context.Context, _ *tool.Env, _ json.RawMessage) tool.Result {
	team, err := t.b.team()
	if err != nil {
		return tool.Errorf("MergeStatus: %v", err)
	}
	board, err := team.Tasks().Board(ctx)
	if err != nil {
		return tool.Errorf("MergeStatus: %v", err)
	}
	return tool.OK(FormatMergeQueue(MergeQueue(board)))
}
