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
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// mergeQueue is the lead's side of the merge queue: a goroutine that
// watches the board and merges the branches of completed tasks into the
// lead's checkout in completion order, whoever completed them (an
// in-process teammate, a teammate process, the lead). A conflict sends the
// task back to its owner; it is never resolved here.
type mergeQueue struct {
	s    *Session
	t    store.Team
	mu   sync.Mutex // one drain at a time: the goroutine's, TeamDelete's
	runs int        // paced turns taken, to name them

	cancel context.CancelFunc
	done   chan struct{}
}

// startMergeQueue starts the merge queue of team t once.
func (s *Session) startMergeQueue(t store.Team) {
	s.wt.mu.Lock()
	defer s.wt.mu.Unlock()
	if s.wt.queue != nil && s.wt.queue.t.Name() == t.Name() {
		return
	}
	if s.wt.queue != nil {
		s.wt.queue.stop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	q := &mergeQueue{s: s, t: t, cancel: cancel, done: make(chan struct{})}
	s.wt.queue = q
	go q.run(ctx)
}

// stopMergeQueue stops the queue's goroutine and returns the queue (nil
// when none ran), for a last drain.
func (s *Session) stopMergeQueue() *mergeQueue {
	s.wt.mu.Lock()
	q := s.wt.queue
	s.wt.queue = nil
	s.wt.mu.Unlock()
	if q != nil {
		q.stop()
	}
	return q
}

func (q *mergeQueue) stop() {
	q.cancel()
	<-q.done
}

func (q *mergeQueue) run(ctx context.Context) {
	defer close(q.done)
	ch, err := q.t.Tasks().Watch(ctx)
	if err != nil {
		q.s.cfg.Logger.Warn("merge queue: watch the board", "team", q.t.Name(), "err", err)
		return
	}
	for {
		q.drain(ctx, true)
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}

// queued returns the completed tasks whose branches wait to be merged,
// in completion order.
func queued(b store.Board) []MergeRecord {
	var out []MergeRecord
	done := map[string]bool{}
	for _, t := range b.Tasks {
		done[t.ID] = t.Status == store.TaskCompleted
	}
	for _, r := range MergeQueue(b) {
		if r.Status == MergeQueued && done[r.Task] {
			out = append(out, r)
		}
	}
	return out
}

// drain merges every queued branch, oldest first, and returns what it did
// as lines. A paced drain takes a turn of its own (the goroutine's); one
// run by the lead's tool call has the lead's.
func (q *mergeQueue) drain(ctx context.Context, paced bool) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	board, err := q.t.Tasks().Board(ctx)
	if err != nil || len(queued(board)) == 0 {
		return nil
	}
	// A paced run (recorded or replayed) takes a turn of its own for the
	// merges, so that every agent meets the board as it was recorded.
	if paced {
		q.runs++
		name := fmt.Sprintf("merge-queue/%d", q.runs)
		p := q.s.cfg.Pacer
		p.Enter(ctx, name)
		defer p.Leave(name)
	}
	if board, err = q.t.Tasks().Board(ctx); err != nil {
		return nil
	}
	var lines []string
	for _, r := range queued(board) {
		if ctx.Err() != nil {
			break
		}
		lines = append(lines, q.s.mergeTask(ctx, q.t, r))
	}
	return lines
}

// mergeTask merges the branch of one queued task into the base checkout
// and records the outcome. A conflict puts the task back in progress with
// its owner, who is sent the files and hunks; the lead is told.
func (s *Session) mergeTask(ctx context.Context, t store.Team, rec MergeRecord) string {
	ctx = context.WithoutCancel(ctx)
	id := rec.Task
	subject := rec.Subject
	if subject == "" {
		subject = "task #" + id
	}
	base := ""
	journal := func() {
		ev := teamevent.Merge{Task: id, Owner: rec.Owner, Branch: rec.Branch, Into: base, Status: rec.Status, How: rec.How, Commit: rec.Commit, Error: rec.Error}
		for _, f := range rec.Files {
			ev.Files = append(ev.Files, f.File)
		}
		s.emit(ctx, t, ev)
	}
	fail := func(err error) string {
		rec.Status, rec.Error, rec.Done = MergeFailed, err.Error(), time.Now().UTC()
		recordMerge(ctx, t, id, rec)
		journal()
		s.tellLead(ctx, t, store.Message{Type: store.TypeMessage, From: rec.Owner, To: store.LeadName, TaskID: id,
			Summary: "merge of task #" + id + " failed",
			Content: fmt.Sprintf("Task #%s (%s) is completed but its branch %s was not merged: %v. Fix the cause; the branch is kept (troupe merge shows the queue).", id, subject, rec.Branch, err)})
		return fmt.Sprintf("#%s failed: %v", id, err)
	}
	r, err := t.ReadRoster(ctx)
	if err != nil {
		return fail(err)
	}
	m, ok := r.Member(rec.Owner)
	if !ok {
		return fail(fmt.Errorf("%s is not on the roster", rec.Owner))
	}
	// A remote teammate's branch is fetched from the team's remote into
	// the lead's checkout; a worktree's is in the checkout already.
	remote := rec.Pushed != "" || m.Placement == PlacementRemote
	var repo *worktree.Repo
	if remote {
		if repo, err = s.fetchPushed(ctx, &r, rec); err != nil {
			return fail(err)
		}
		if repo.IsMerged(ctx, rec.Branch) {
			rec.Status, rec.Done = MergeNoChanges, time.Now().UTC()
			recordMerge(ctx, t, id, rec)
			journal()
			return fmt.Sprintf("#%s had no changes to merge", id)
		}
	} else {
		if m.Worktree == "" {
			return fail(fmt.Errorf("%s has no worktree on the roster", rec.Owner))
		}
		top, ok := worktree.BaseOf(m.Worktree, t.Name(), m.Name)
		if !ok {
			return fail(fmt.Errorf("%s's worktree %s is not under a checkout's %s", m.Name, m.Worktree, worktree.Dir))
		}
		if repo, err = openRepo(ctx, top); err != nil {
			return fail(err)
		}
	}
	mode, _ := worktree.ParseMode(m.MergeMode)
	merged, err := repo.Merge(ctx, rec.Branch, fmt.Sprintf("Merge %s: %s", rec.Branch, subject), mode)
	base = repo.BaseBranch(ctx)
	if base == "" {
		base, _ = repo.Head(ctx)
	}
	switch {
	case errors.Is(err, worktree.ErrConflict):
		rec.Status, rec.Files, rec.Done = MergeConflict, merged.Conflicts, time.Now().UTC()
		text := conflictText(id, subject, rec.Branch, base, merged.Conflicts)
		if remote {
			// The owner's clone sees the base as the lead last pushed it.
			text = remoteConflictText(id, subject, rec.Branch, worktree.Remote+"/"+base, merged.Conflicts)
		}
		// The owner's message goes first: an idle owner that saw its task
		// in progress again before it would be reminded of it, and redo it
		// without knowing why.
		_, _ = s.sendAs(ctx, t, store.Message{Type: store.TypeMessage, From: store.LeadName, To: m.Name, TaskID: id,
			Summary: "merge conflict on task #" + id, Content: text})
		// Back to its owner, in the same update as the record: in progress
		// again, so the team is not done until it is resolved and
		// completed again.
		if err := recordMerge(ctx, t, id, rec, func(x *store.Task) {
			x.Status, x.Owner = store.TaskInProgress, m.Name
		}); err == nil {
			s.emit(ctx, t, teamevent.TaskUpdate{TaskChange: teamevent.TaskChange{Task: id, Status: store.TaskInProgress, Owner: m.Name}})
		}
		journal()
		s.tellLead(ctx, t, store.Message{Type: store.TypeMessage, From: m.Name, To: store.LeadName, TaskID: id,
			Summary: "merge conflict on task #" + id,
			Content: fmt.Sprintf("Task #%s (%s) did not merge: branch %s conflicts with %s in %s. It is back in progress with %s, who resolves it and completes it again.",
				id, subject, rec.Branch, base, conflictNames(merged.Conflicts), m.Name)})
		return fmt.Sprintf("#%s conflicts in %s (back to %s)", id, conflictNames(merged.Conflicts), m.Name)
	case err != nil:
		return fail(fmt.Errorf("merging %s into %s: %w", rec.Branch, base, err))
	}
	rec.Status, rec.How, rec.Commit, rec.Done = MergeMerged, merged.How, merged.Commit, time.Now().UTC()
	if remote && base != "" {
		// The base goes back to the remote: the other machines start
		// from it, and a conflict's owner merges it.
		if err := repo.Push(ctx, r.Remote, base); err != nil {
			rec.Error = fmt.Sprintf("merged, but pushing %s to %s failed: %v", base, r.Remote, err)
		}
	}
	recordMerge(ctx, t, id, rec)
	journal()
	return fmt.Sprintf("#%s merged into %s (%s)", id, base, merged.How)
}

// tellLead sends the lead a message about from's task, journaled as
// from's, as a teammate that completed it in the lead's process used to.
func (s *Session) tellLead(ctx context.Context, t store.Team, msg store.Message) {
	sent, err := t.Mailbox().Send(ctx, msg)
	if err != nil {
		return
	}
	e := s.emitter()
	e.agent = msg.From
	e.emit(ctx, t, teamevent.Sent(sent))
}

// finishMerges is TeamDelete's end of the merge queue: it stops the
// queue's goroutine, merges what is completed and still queued, and says
// what was merged and what is not complete: conflicts and tasks still open
// with a teammate in a worktree.
func (s *Session) finishMerges(ctx context.Context, t store.Team) string {
	q := s.stopMergeQueue()
	if q == nil {
		q = &mergeQueue{s: s, t: t}
	}
	lines := q.drain(ctx, false)
	board, err := t.Tasks().Board(ctx)
	if err != nil {
		return ""
	}
	r, _ := t.ReadRoster(ctx)
	var open []string
	for _, task := range board.Tasks {
		if task.Status != store.TaskPending && task.Status != store.TaskInProgress {
			continue
		}
		if m, ok := r.Member(task.Owner); ok && m.Worktree != "" {
			open = append(open, fmt.Sprintf("#%s (%s, %s on %s)", task.ID, task.Status, m.Name, m.Branch))
		}
	}
	sort.Strings(open)
	out := ""
	if len(lines) > 0 {
		out += " Merge queue: " + strings.Join(lines, "; ") + "."
	}
	if len(open) > 0 {
		out += " Not complete, not merged: " + strings.Join(open, ", ") + "."
	}
	return out
}

// mergeKey is the task metadata the merge queue records its outcome in.
const mergeKey = "merge"

// Merge record statuses.
const (
	// MergeQueued: the task is completed and committed; its branch waits
	// for the lead's side to merge it.
	MergeQueued = "queued"
	// MergeMerged: the branch is merged into the base.
	MergeMerged = "merged"
	// MergeConflict: the branch conflicts; the task went back to its owner.
	MergeConflict = "conflict"
	// MergeNoChanges: the task changed nothing.
	MergeNoChanges = "no changes"
	// MergeFailed: committing or merging failed for another reason.
	MergeFailed = "failed"
)

// MergeRecord is what the merge queue did with one completed task.
type MergeRecord struct {
	Task    string `json:"task"`
	Subject string `json:"subject"`
	Owner   string `json:"owner"`
	Branch  string `json:"branch"`
	// Status is MergeQueued, MergeMerged, MergeConflict, MergeNoChanges
	// or MergeFailed.
	Status string `json:"status"`
	// How is "fast-forward", "merge commit" or "up to date".
	How    string              `json:"how,omitempty"`
	Commit string              `json:"commit,omitempty"`
	Files  []worktree.Conflict `json:"conflicts,omitempty"`
	Error  string              `json:"error,omitempty"`
	// Pushed is the commit a remote teammate pushed for the lead to merge
	// (remote placement); the lead's outcome carries it back.
	Pushed string `json:"pushed,omitempty"`
	// At is when the task was completed (its place in the queue); Done
	// when the queue was done with it.
	At   time.Time `json:"at"`
	Done time.Time `json:"done,omitzero"`
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

// recordMerge writes r in task id's metadata, with the task's other
// changes in the same update (also, when not nil), so that nobody reads
// one without the other.
func recordMerge(ctx context.Context, t store.Team, id string, r MergeRecord, also ...func(*store.Task)) error {
	_, err := t.Tasks().Update(context.WithoutCancel(ctx), id, func(x *store.Task) error {
		for _, f := range also {
			f(x)
		}
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
	return err
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

// remoteConflictText is conflictText for a teammate in its own clone of
// the team's remote: it fetches the base the lead pushed before merging it.
func remoteConflictText(id, subject, branch, base string, cs []worktree.Conflict) string {
	text := conflictText(id, subject, branch, base, cs)
	return strings.Replace(text, fmt.Sprintf("In your worktree, run `git merge %s`", base),
		fmt.Sprintf("In your clone, run `git fetch %s` and `git merge %s`", worktree.Remote, base), 1)
}

func clip(s string) string {
	if len(s) > maxHunkText {
		s = s[:maxHunkText] + "…\n"
	}
	return s
}
