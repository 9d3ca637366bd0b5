package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// remoteMerger is what the session keeps for its remote teammates'
// merges: nothing since they go through the merge queue (mergeQueue), as a
// worktree teammate's do; stopMergeQueue stops it.
type remoteMerger struct{}

// mergeRemote has the session follow team t's remote teammates' journal
// events (as it follows teammate processes) and starts the merge queue,
// which fetches and merges the branches they push.
func (s *Session) mergeRemote(t store.Team) {
	s.sup.followRemote(t)
	s.startMergeQueue(t)
}

// stopRemote is kept for Close: the merge queue it used to stop is
// stopped with stopMergeQueue.
func (s *Session) stopRemote() {}

// fetchPushed is the merge queue's side of a remote teammate's queued
// branch: it fetches the branch from the team's remote into the lead's
// checkout, which must be on the team's base branch, and returns that
// checkout.
func (s *Session) fetchPushed(ctx context.Context, r *store.Roster, rec MergeRecord) (*worktree.Repo, error) {
	if r.Remote == "" {
		return nil, errors.New("the team records no git remote to fetch from")
	}
	repo, err := openRepo(ctx, s.cfg.Workspace.Dir())
	if err != nil {
		return nil, err
	}
	if cur := repo.BaseBranch(ctx); r.Base != "" && cur != r.Base {
		return nil, fmt.Errorf("the lead's checkout %s is on %q, not on the team's base branch %q; check out %s there", repo.Top, cur, r.Base, r.Base)
	}
	if _, err := repo.Fetch(ctx, r.Remote, rec.Branch); err != nil {
		return nil, fmt.Errorf("fetch %s from %s: %w", rec.Branch, r.Remote, err)
	}
	return repo, nil
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

// --- the remote teammate's side: commit, push, queue ---

// pushOnComplete is queueOnComplete for a remote teammate completing its
// own task in its clone: its changes are committed on its branch (through
// the artifact guard), the branch is pushed to the team's remote and put
// in the merge queue, and the task completes at once. The lead's merge
// queue fetches and merges it in completion order and pushes the base
// back; a conflict puts the task back in progress with its owner, who is
// sent the files and hunks and merges the base in its clone.
func (b *binding) pushOnComplete(ctx context.Context, t store.Team, task store.Task, m store.Member) (note, refused string) {
	id := task.ID
	if m.Name != b.self || m.Worktree == "" {
		// Another member (the lead) completing it: the clone is not here,
		// and what was pushed is queued when it was pushed.
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
	rec := MergeRecord{Owner: m.Name, Branch: branch, At: time.Now().UTC()}
	commit, err := repo.Commit(ctx, m.Worktree, subject+"\n\nTroupe-Task: "+id)
	if err != nil {
		rec.Status, rec.Error = MergeFailed, err.Error()
		recordMerge(ctx, t, id, rec)
		return "", fmt.Sprintf("task #%s not completed: commit in %s: %v", id, m.Worktree, err)
	}
	head, err := repo.Head(ctx)
	if err != nil {
		return "", fmt.Sprintf("task #%s not completed: %v", id, err)
	}
	if err := repo.Push(ctx, worktree.Remote, branch); err != nil {
		return "", fmt.Sprintf("task #%s not completed: push %s: %v", id, branch, err)
	}
	rec.Status, rec.Commit, rec.Pushed = MergeQueued, commit, head
	if err := recordMerge(ctx, t, id, rec); err != nil {
		return "", fmt.Sprintf("task #%s not completed: pushed %.12s on %s, but queueing it failed: %v", id, head, branch, err)
	}
	c := ""
	if commit != "" {
		c = fmt.Sprintf(" Committed %.12s on %s;", commit, branch)
	}
	return fmt.Sprintf("%s pushed and queued for merging: the lead's runtime merges it in completion order, and a conflict comes back to %s with the files and hunks.", c, m.Name), ""
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
