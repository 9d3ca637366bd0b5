package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// PlacementRemote is the roster's placement of a teammate that runs on
// another machine, in its own clone of the team's git remote (troupe agent
// --join): it commits and pushes its branch at each task completion, and
// the lead's runtime fetches and merges it (the merge queue of worktree
// isolation, over a remote).
const PlacementRemote = "remote"

// RemoteGit is where teammates on other machines get the code from.
type RemoteGit struct {
	// URL is the git remote they clone (a URL or a path they can reach).
	// Empty: the lead's checkout's origin, when the store is shared by
	// several machines (it reports presence); nothing otherwise.
	URL string
	// Base is the branch they start from and the lead merges into (empty:
	// the lead's checkout's current branch).
	Base string
}

// remoteMergeWait bounds how long a remote teammate's completion waits for
// the lead to merge its pushed branch.
const remoteMergeWait = 10 * time.Minute

// mergePushed is the merge record's status of a branch pushed by a remote
// teammate and not merged yet.
const mergePushed = "pushed"

// recordRemote writes the team's git remote and base branch into the
// roster of a team just created: the explicit ones, or, for a store that
// members on other machines share, the lead's checkout's origin and
// branch. A workspace that is not a git checkout records none (a remote
// teammate is then told so when it joins).
func (s *Session) recordRemote(ctx context.Context, t store.Team) {
	url, base := s.cfg.Remote.URL, s.cfg.Remote.Base
	if url == "" {
		if _, shared := t.(store.PresenceReporter); !shared {
			return
		}
	}
	repo, err := openRepo(ctx, s.cfg.Workspace.Dir())
	if err == nil {
		if url == "" {
			url = repo.RemoteURL(ctx, worktree.Remote)
		}
		if base == "" {
			base = repo.BaseBranch(ctx)
		}
	}
	if url == "" {
		return
	}
	if base == "" {
		base = "main"
	}
	if _, err := t.UpdateRoster(ctx, func(r *store.Roster) error {
		r.Remote, r.Base = url, base
		return nil
	}); err != nil {
		s.cfg.Logger.Warn("record the team's git remote", "err", err)
		return
	}
	s.mergeRemote(t)
}

// --- the lead's side: merging what remote teammates pushed ---

// remoteMerger is the lead's merge queue for remote teammates: it watches
// the board for tasks whose branch was pushed and merges them in push
// order.
type remoteMerger struct {
	mu     sync.Mutex
	team   string
	cancel context.CancelFunc
	done   chan struct{}
}

// mergeRemote starts the session's remote merge queue for team t, once,
// and has the session follow its remote teammates' journal events (as it
// follows teammate processes).
func (s *Session) mergeRemote(t store.Team) {
	s.sup.followRemote(t)
	rm := &s.wt.remote
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if rm.cancel != nil && rm.team == t.Name() {
		return
	}
	if rm.cancel != nil {
		rm.cancel()
		<-rm.done
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	rm.team, rm.cancel, rm.done = t.Name(), cancel, done
	go func() {
		defer close(done)
		ch, err := t.Tasks().Watch(ctx)
		if err != nil {
			s.cfg.Logger.Warn("remote merge queue", "err", err)
			return
		}
		for {
			s.mergePushedOnce(ctx, t)
			select {
			case <-ctx.Done():
				return
			case _, ok := <-ch:
				if !ok {
					return
				}
			}
		}
	}()
}

// stopRemote stops the remote merge queue and waits for it.
func (s *Session) stopRemote() {
	rm := &s.wt.remote
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if rm.cancel != nil {
		rm.cancel()
		<-rm.done
		rm.cancel = nil
	}
}

// mergePushedOnce merges every branch pushed and not merged yet, oldest
// push first.
func (s *Session) mergePushedOnce(ctx context.Context, t store.Team) {
	board, err := t.Tasks().Board(ctx)
	if err != nil {
		return
	}
	type pushed struct {
		task store.Task
		rec  MergeRecord
	}
	var todo []pushed
	for _, task := range board.Tasks {
		if rec, ok := mergeRecordOf(task); ok && rec.Status == mergePushed {
			todo = append(todo, pushed{task, rec})
		}
	}
	sort.SliceStable(todo, func(i, j int) bool { return todo[i].rec.At.Before(todo[j].rec.At) })
	for _, p := range todo {
		if ctx.Err() != nil {
			return
		}
		s.mergePushed(ctx, t, p.task, p.rec)
	}
}

// mergePushed fetches one pushed branch into the lead's checkout, merges
// it into the base, pushes the base back to the remote (so that the
// others, and a conflict's owner, see it), and records the outcome for the
// owner, who waits for it.
func (s *Session) mergePushed(ctx context.Context, t store.Team, task store.Task, rec MergeRecord) {
	out := rec
	out.At = time.Now().UTC()
	fail := func(err error) {
		out.Status, out.Error = MergeFailed, err.Error()
		recordMerge(ctx, t, task.ID, out)
	}
	r, err := t.ReadRoster(ctx)
	if err != nil {
		return
	}
	if r.Remote == "" {
		fail(errors.New("the team records no git remote to fetch from"))
		return
	}
	repo, err := openRepo(ctx, s.cfg.Workspace.Dir())
	if err != nil {
		fail(err)
		return
	}
	if cur := repo.BaseBranch(ctx); r.Base != "" && cur != r.Base {
		fail(fmt.Errorf("the lead's checkout %s is on %q, not on the team's base branch %q; check out %s there", repo.Top, cur, r.Base, r.Base))
		return
	}
	if _, err := repo.Fetch(ctx, r.Remote, rec.Branch); err != nil {
		fail(fmt.Errorf("fetch %s from %s: %w", rec.Branch, r.Remote, err))
		return
	}
	if repo.IsMerged(ctx, rec.Branch) {
		out.Status = MergeNoChanges
		recordMerge(ctx, t, task.ID, out)
		return
	}
	mode := worktree.FastForward
	if m, ok := r.Member(rec.Owner); ok {
		mode, _ = worktree.ParseMode(m.MergeMode)
	}
	subject := strings.TrimSpace(task.Subject)
	merged, err := repo.Merge(ctx, rec.Branch, fmt.Sprintf("Merge %s: %s", rec.Branch, subject), mode)
	switch {
	case errors.Is(err, worktree.ErrConflict):
		out.Status, out.Files = MergeConflict, merged.Conflicts
		recordMerge(ctx, t, task.ID, out)
		return
	case err != nil:
		fail(err)
		return
	}
	out.Status, out.How, out.Commit = MergeMerged, merged.How, merged.Commit
	if base := repo.BaseBranch(ctx); base != "" {
		if err := repo.Push(ctx, r.Remote, base); err != nil {
			out.Error = fmt.Sprintf("merged, but pushing %s to %s failed: %v", base, r.Remote, err)
		}
	}
	recordMerge(ctx, t, task.ID, out)
}

// mergeRecordOf reads a task's merge record.
func mergeRecordOf(t store.Task) (MergeRecord, bool) {
	raw, ok := t.Metadata[mergeKey]
	if !ok {
		return MergeRecord{}, false
	}
	bs, err := json.Marshal(raw)
	if err != nil {
		return MergeRecord{}, false
	}
	var r MergeRecord
	if json.Unmarshal(bs, &r) != nil {
		return MergeRecord{}, false
	}
	r.Task, r.Subject = t.ID, t.Subject
	return r, true
}

// --- the remote teammate's side: commit, push, wait for the merge ---

// pushOnComplete is mergeOnComplete for a remote teammate completing its
// own task in its clone: its changes are committed on its branch (through
// the artifact guard), the branch is pushed to the team's remote, and the
// completion waits for the lead's runtime to merge it. A conflict refuses
// the completion with the files and hunks, as in a worktree; the clone has
// fetched the base by then, so the owner merges it and completes again.
func (b *binding) pushOnComplete(ctx context.Context, t store.Team, task store.Task, m store.Member) (note, refused string) {
	id := task.ID
	if m.Name != b.self || m.Worktree == "" {
		// Another member (the lead) completing it: the clone is not here,
		// and what was pushed is merged when it was pushed.
		return "", ""
	}
	repo, err := openRepo(ctx, m.Worktree)
	if err != nil {
		return "", fmt.Sprintf("task #%s not completed: %v", id, err)
	}
	subject, refused := b.commitSubject(task, id)
	if refused != "" {
		return "", refused
	}
	branch := memberBranch(t, m)
	commit, err := repo.Commit(ctx, m.Worktree, subject+"\n\nTroupe-Task: "+id)
	if err != nil {
		return "", fmt.Sprintf("task #%s not completed: commit in %s: %v", id, m.Worktree, err)
	}
	head, err := repo.Head(ctx)
	if err != nil {
		return "", fmt.Sprintf("task #%s not completed: %v", id, err)
	}
	if err := repo.Push(ctx, worktree.Remote, branch); err != nil {
		return "", fmt.Sprintf("task #%s not completed: push %s: %v", id, branch, err)
	}
	wctx, cancel := context.WithTimeout(ctx, remoteMergeWait)
	defer cancel()
	// Watch before the record is written, so the lead's answer cannot slip
	// between the two.
	ch, err := t.Tasks().Watch(wctx)
	if err != nil {
		return "", fmt.Sprintf("task #%s not completed: %v", id, err)
	}
	recordMerge(ctx, t, id, MergeRecord{Owner: m.Name, Branch: branch, Status: mergePushed, Pushed: head, At: time.Now().UTC()})
	var rec MergeRecord
	for {
		cur, err := t.Tasks().Get(wctx, id)
		if err == nil {
			if r, ok := mergeRecordOf(cur); ok && r.Pushed == head && r.Status != mergePushed {
				rec = r
				break
			}
		}
		select {
		case <-wctx.Done():
			return "", fmt.Sprintf("task #%s not completed: pushed %.12s on %s, but the lead's runtime did not merge it within %s (is the lead running?); mark it completed again to retry", id, head, branch, remoteMergeWait)
		case _, ok := <-ch:
			if !ok {
				return "", fmt.Sprintf("task #%s not completed: pushed %.12s on %s; stopped waiting for the lead's merge", id, head, branch)
			}
		}
	}
	base := "origin/main"
	if r, err := t.ReadRoster(ctx); err == nil && r.Base != "" {
		base = worktree.Remote + "/" + r.Base
	}
	switch rec.Status {
	case MergeNoChanges:
		return " No changes to merge.", ""
	case MergeConflict:
		// The base as the lead merged it, for the owner to merge.
		_ = repo.FetchRemote(ctx, worktree.Remote)
		text := conflictText(id, subject, branch, base, rec.Files)
		_, _ = b.sendAsIn(ctx, t, store.Message{Type: store.TypeMessage, From: b.self, To: store.LeadName, TaskID: id,
			Summary: "merge conflict on task #" + id,
			Content: fmt.Sprintf("Task #%s (%s) did not merge: branch %s conflicts with %s in %s. It stays with %s, who resolves it and completes it again.",
				id, subject, branch, base, conflictNames(rec.Files), m.Name)})
		return "", text
	case MergeMerged:
		c := ""
		if commit != "" {
			c = fmt.Sprintf(" Committed %.12s on %s and pushed it;", commit, branch)
		}
		warn := ""
		if rec.Error != "" {
			warn = " (" + rec.Error + ")"
		}
		return fmt.Sprintf("%s the lead merged it into %s (%s)%s.", c, strings.TrimPrefix(base, worktree.Remote+"/"), rec.How, warn), ""
	}
	return "", fmt.Sprintf("task #%s not completed: the lead could not merge %s: %s", id, branch, rec.Error)
}

// followRemote follows the journal events of t's remote teammates, unless
// the session follows every teammate process already.
func (sv *supervisor) followRemote(t store.Team) {
	if sv.cfg.OnEvent == nil || sv.cfg.TeammateMode == ModeProcess {
		return // in process mode, follow follows every teammate
	}
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.follower != nil && sv.follower.t.Name() == t.Name() {
		return
	}
	if sv.follower != nil {
		return // another team's, stopped with it
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{sv: sv, t: t, stop: cancel, done: make(chan struct{}), remoteOnly: true}
	sv.follower = f
	go f.run(ctx)
}

// remoteMembers names the members of t placed on other machines.
func remoteMembers(ctx context.Context, t store.Team) map[string]bool {
	out := map[string]bool{}
	r, err := t.ReadRoster(ctx)
	if err != nil {
		return out
	}
	for _, m := range r.Members {
		if m.Placement == PlacementRemote {
			out[m.Name] = true
		}
	}
	return out
}
