package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
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

// isolate places a spawned teammate in its own worktree when the spawn or
// the team asks for it. A workspace that cannot be branched is an error,
// never a silent shared checkout.
func (s *Session) isolate(ctx context.Context, t store.Team, name, asked string, env *Env) (worktree.Worktree, string, error) {
	if asked == "" {
		asked = s.cfg.Isolation
	}
	iso, err := ParseIsolation(asked)
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
	wt, err := placeInWorktree(ctx, s.cfg.Workspace, t.Name(), name, env, true)
	if err != nil {
		return wt, "", fmt.Errorf("isolation worktree: %w", err)
	}
	return wt, string(mode), nil
}

// reisolate puts a member the roster says has a worktree back in it (a
// resume, a restart): its branch and uncommitted work are as it left them.
func (s *Session) reisolate(ctx context.Context, t store.Team, m store.Member, env *Env) error {
	if m.Worktree == "" {
		return nil
	}
	if _, err := placeInWorktree(ctx, s.cfg.Workspace, t.Name(), m.Name, env, false); err != nil {
		return fmt.Errorf("worktree of %s: %w", m.Name, err)
	}
	return nil
}

// placeInWorktree makes (or finds) the member's worktree and points env's
// workspace at the same folder inside it as the lead's workspace is inside
// the base checkout.
func placeInWorktree(ctx context.Context, base *tool.Workspace, teamName, name string, env *Env, fresh bool) (worktree.Worktree, error) {
	repo, err := openRepo(ctx, base.Dir())
	if err != nil {
		return worktree.Worktree{}, err
	}
	if fresh {
		if err := repo.Ready(ctx); err != nil {
			return worktree.Worktree{}, err
		}
	}
	wt, err := repo.Add(ctx, teamName, name)
	if err != nil {
		return wt, err
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

// mergeKey is the task metadata the merge queue records its outcome in.
const mergeKey = "merge"

// MergeRecord is what the merge queue did with one completed task.
type MergeRecord struct {
	Task    string `json:"task"`
	Subject string `json:"subject"`
	Owner   string `json:"owner"`
	Branch  string `json:"branch"`
	// Status is "merged", "conflict", "no changes" or "failed".
	Status string `json:"status"`
	// How is "fast-forward", "merge commit" or "up to date".
	How    string              `json:"how,omitempty"`
	Commit string              `json:"commit,omitempty"`
	Files  []worktree.Conflict `json:"conflicts,omitempty"`
	Error  string              `json:"error,omitempty"`
	// Pushed is the commit a remote teammate pushed for the lead to merge
	// (remote placement); the lead's outcome carries it back.
	Pushed string    `json:"pushed,omitempty"`
	At     time.Time `json:"at"`
}

// MergeQueue returns the merge queue's records, oldest first: the tasks
// whose branches were merged, conflicted or failed.
func MergeQueue(b store.Board) []MergeRecord {
	var out []MergeRecord
	for _, t := range b.Tasks {
		raw, ok := t.Metadata[mergeKey]
		if !ok {
			continue
		}
		bs, err := json.Marshal(raw)
		if err != nil {
			continue
		}
		var r MergeRecord
		if json.Unmarshal(bs, &r) != nil {
			continue
		}
		r.Task, r.Subject = t.ID, t.Subject
		out = append(out, r)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// FormatMergeQueue is the queue as lines for a person or a model.
func FormatMergeQueue(rs []MergeRecord) string {
	if len(rs) == 0 {
		return "The merge queue is empty: no task of a teammate in a worktree was completed yet."
	}
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "#%s %s [%s] %s (%s)", r.Task, r.Branch, r.Status, r.Subject, r.Owner)
		if r.How != "" {
			fmt.Fprintf(&b, " %s", r.How)
		}
		if r.Commit != "" {
			fmt.Fprintf(&b, " %.12s", r.Commit)
		}
		for _, c := range r.Files {
			fmt.Fprintf(&b, "\n    conflict: %s (%d hunks)", c.File, len(c.Hunks))
		}
		if r.Error != "" {
			fmt.Fprintf(&b, "\n    error: %s", r.Error)
		}
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}

func recordMerge(ctx context.Context, t store.Team, id string, r MergeRecord) {
	_, _ = t.Tasks().Update(context.WithoutCancel(ctx), id, func(x *store.Task) error {
		if x.Metadata == nil {
			x.Metadata = map[string]any{}
		}
		bs, _ := json.Marshal(r)
		var m map[string]any
		_ = json.Unmarshal(bs, &m)
		delete(m, "task")
		delete(m, "subject")
		x.Metadata[mergeKey] = m
		return nil
	})
}

// mergeOnComplete is the runtime's side of completing a task whose owner
// works in a worktree: its changes are committed on its branch with the
// task's subject as message (through the artifact guard), and the branch
// is merged into the lead's checkout, in completion order (the queue's
// lock). It returns a note for the caller, or refused: the task must not
// be marked completed (a conflict goes back to its owner with the files
// and hunks; it is never resolved here).
func (b *binding) mergeOnComplete(ctx context.Context, t store.Team, id string) (note, refused string) {
	task, err := t.Tasks().Get(ctx, id)
	if err != nil || task.Status == store.TaskCompleted {
		return "", ""
	}
	owner := task.Owner
	if owner == "" && !b.lead {
		owner = b.self
	}
	r, err := t.ReadRoster(ctx)
	if err != nil {
		return "", ""
	}
	m, ok := r.Member(owner)
	if ok && m.Placement == PlacementRemote {
		return b.pushOnComplete(ctx, t, task, *m)
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
	subject := strings.TrimSpace(task.Subject)
	if subject == "" {
		subject = "task #" + id
	}
	if b.rules != nil && b.rules.Guard != nil {
		if w := b.rules.Guard.Find(subject); len(w) > 0 {
			return "", fmt.Sprintf("task #%s not completed: its subject, the commit message, contains %q, a word listed in artifactGuard.words; change the subject with TaskUpdate first", id, w[0])
		}
	}
	branch := m.Branch
	if branch == "" {
		branch = worktree.Branch(t.Name(), m.Name)
	}
	rec := MergeRecord{Owner: m.Name, Branch: branch, At: time.Now().UTC()}
	commit, err := repo.Commit(ctx, m.Worktree, subject+"\n\nTroupe-Task: "+id)
	if err != nil {
		rec.Status, rec.Error = "failed", err.Error()
		recordMerge(ctx, t, id, rec)
		return "", fmt.Sprintf("task #%s not completed: commit in %s: %v", id, m.Worktree, err)
	}
	if repo.IsMerged(ctx, branch) {
		rec.Status = "no changes"
		recordMerge(ctx, t, id, rec)
		return " No changes to merge.", ""
	}
	mode, _ := worktree.ParseMode(m.MergeMode)
	merged, err := repo.Merge(ctx, branch, fmt.Sprintf("Merge %s: %s", branch, subject), mode)
	base := repo.BaseBranch(ctx)
	if base == "" {
		base, _ = repo.Head(ctx)
	}
	switch {
	case errors.Is(err, worktree.ErrConflict):
		rec.Status, rec.Files = "conflict", merged.Conflicts
		recordMerge(ctx, t, id, rec)
		text := conflictText(id, subject, branch, base, merged.Conflicts)
		if owner != b.self {
			_, _ = b.sendAsIn(ctx, t, store.Message{Type: store.TypeMessage, From: b.self, To: owner, TaskID: id,
				Summary: "merge conflict on task #" + id, Content: text})
		}
		if !b.lead {
			_, _ = b.sendAsIn(ctx, t, store.Message{Type: store.TypeMessage, From: b.self, To: store.LeadName, TaskID: id,
				Summary: "merge conflict on task #" + id,
				Content: fmt.Sprintf("Task #%s (%s) did not merge: branch %s conflicts with %s in %s. It stays with %s, who resolves it and completes it again.",
					id, subject, branch, base, conflictNames(merged.Conflicts), owner)})
		}
		return "", text
	case err != nil:
		rec.Status, rec.Error = "failed", err.Error()
		recordMerge(ctx, t, id, rec)
		return "", fmt.Sprintf("task #%s not completed: merging %s into %s failed: %v", id, branch, base, err)
	}
	rec.Status, rec.How, rec.Commit = "merged", merged.How, merged.Commit
	recordMerge(ctx, t, id, rec)
	c := ""
	if commit != "" {
		c = fmt.Sprintf(" Committed %.12s on %s;", commit, branch)
	}
	return fmt.Sprintf("%s merged into %s (%s).", c, base, merged.How), ""
}

func conflictNames(cs []worktree.Conflict) string {
	var fs []string
	for _, c := range cs {
		fs = append(fs, c.File)
	}
	return strings.Join(fs, ", ")
}

// maxHunkText bounds each side of a hunk shown in a conflict message.
const maxHunkText = 600

// conflictText tells the owner what conflicted and how to go on.
func conflictText(id, subject, branch, base string, cs []worktree.Conflict) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Task #%s (%s) is not completed: merging your branch %s into %s conflicts in %s. Nothing was merged.\n",
		id, subject, branch, base, conflictNames(cs))
	for _, c := range cs {
		for _, h := range c.Hunks {
			fmt.Fprintf(&b, "\n%s, line %d:\n--- %s has:\n%s--- your branch has:\n%s", c.File, h.Line, base, clip(h.Ours), clip(h.Theirs))
		}
	}
	fmt.Fprintf(&b, "\nIn your worktree, run `git merge %s`, resolve the conflicts (keep both changes where they both matter), then mark task #%s completed again: the runtime commits and merges it.", base, id)
	return b.String()
}

func clip(s string) string {
	if len(s) > maxHunkText {
		s = s[:maxHunkText] + "…\n"
	}
	return s
}

// cleanWorktrees removes the worktrees of a team being deleted: each one
// whose branch is merged and which has nothing uncommitted (or every one,
// forced), then prunes git's records. It returns what it kept and why.
func (s *Session) cleanWorktrees(ctx context.Context, t store.Team, r store.Roster, force bool) string {
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
