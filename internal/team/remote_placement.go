package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
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
	rm := &s.remote
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
	rm := &s.remote
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
		out.Status, out.Error = "failed", err.Error()
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
	if _, err := repo.Fetch(ctx, r.Remote, rec.Branch); err != nil {
		fail(fmt.Errorf("fetch %s from %s: %w", rec.Branch, r.Remote, err))
		return
	}
	if repo.IsMerged(ctx, rec.Branch) {
		out.Status = "no changes"
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
		out.Status, out.Files = "conflict", merged.Conflicts
		recordMerge(ctx, t, task.ID, out)
		return
	case err != nil:
		fail(err)
		return
	}
	out.Status, out.How, out.Commit = "merged", merged.How, merged.Commit
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
	case "no changes":
		return " No changes to merge.", ""
	case "conflict":
		// The base as the lead merged it, for the owner to merge.
		_ = repo.FetchRemote(ctx, worktree.Remote)
		text := conflictText(id, subject, branch, base, rec.Files)
		_, _ = b.sendAsIn(ctx, t, store.Message{Type: store.TypeMessage, From: b.self, To: store.LeadName, TaskID: id,
			Summary: "merge conflict on task #" + id,
			Content: fmt.Sprintf("Task #%s (%s) did not merge: branch %s conflicts with %s in %s. It stays with %s, who resolves it and completes it again.",
				id, subject, branch, base, conflictNames(rec.Files), m.Name)})
		return "", text
	case "merged":
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

// --- spawning into a pool of waiting agents ---

// DefaultPool is the pool `troupe agent --join URL --wait` waits in when
// it names none.
const DefaultPool = "default"

// poolPrefix names the store team that holds a pool's waiting agents: a
// pool is a team whose members are the agents waiting in it, so it needs
// nothing of the store but the team API.
const poolPrefix = "pool-"

// PoolTeam is the store team of pool name.
func PoolTeam(pool string) (string, error) {
	p, err := store.NormalizeName(pool)
	if err != nil {
		return "", fmt.Errorf("pool %q: %w", pool, err)
	}
	return store.NormalizeName(poolPrefix + p)
}

// poolAgent is the roster's agent_type of an agent waiting in a pool.
const poolAgent = "pool"

// Assignment is what the lead sends a waiting agent it takes from a pool:
// the teammate it becomes. Its first instructions (the prompt) wait in
// the teammate's own inbox, signed as every message of the team.
type Assignment struct {
	Team   string `json:"team"`
	Name   string `json:"name"`
	Role   string `json:"role,omitempty"`
	Model  string `json:"model,omitempty"`
	Prompt string `json:"prompt,omitempty"`
	// SealedKey is the team's key sealed to the waiting agent's public
	// key ("": the team is unsealed); TeamKey is it opened.
	SealedKey string `json:"sealed_key,omitempty"`
	TeamKey   []byte `json:"-"`
}

// assignmentSummary marks the pool message that carries an Assignment.
const assignmentSummary = "troupe-assignment"

// spawnRemote puts a new remote teammate on the roster and hands it to an
// agent waiting in pool: the one of the same name, else the one waiting
// longest. With no agent waiting it fails, naming the pool.
func (s *Session) spawnRemote(ctx context.Context, t store.Team, pool string, m store.Member, prompt, summary string) (string, error) {
	pt, err := PoolTeam(pool)
	if err != nil {
		return "", err
	}
	r, err := t.ReadRoster(ctx)
	if err != nil {
		return "", err
	}
	if r.Remote == "" {
		return "", fmt.Errorf("remote %q: team %s records no git remote for a teammate on another machine to clone; run the lead in a git checkout with an origin against a shared store (--store nats://…), or give --remote URL", pool, t.Name())
	}
	noAgent := fmt.Errorf("remote %q: no agent is waiting in pool %q; start one on another machine with `troupe agent --join <store URL> --wait --pool %s`", pool, pool, pool)
	ptm, err := s.cfg.Store.Team(ctx, pt)
	if errors.Is(err, store.ErrTeamNotFound) {
		return "", noAgent
	}
	if err != nil {
		return "", fmt.Errorf("pool %q: %w", pool, err)
	}
	agentName, agentKey, err := takeWaiting(ctx, ptm, m.Name)
	if err != nil {
		if errors.Is(err, errNoneWaiting) {
			return "", noAgent
		}
		return "", fmt.Errorf("pool %q: %w", pool, err)
	}
	giveBack := func() {
		_, _ = ptm.UpdateRoster(context.WithoutCancel(ctx), func(r *store.Roster) error {
			if w, ok := r.Member(agentName); ok && w.Status == store.StatusWorking {
				w.Status = store.StatusIdle
			}
			return nil
		})
	}
	now := time.Now().UTC()
	m.Placement, m.Branch, m.Status = PlacementRemote, worktree.Branch(t.Name(), m.Name), store.StatusWorking
	m.AgentType, m.JoinedAt, m.HeartbeatAt = "teammate", now, now
	var cast store.Persona
	if _, err := t.UpdateRoster(ctx, func(r *store.Roster) error {
		if old, ok := r.Member(m.Name); ok {
			if old.Status != store.StatusShutdown && !Dead(*old, now) {
				return fmt.Errorf("a teammate called %q is already on the team (%s); message it instead of spawning another", m.Name, old.Status)
			}
			r.Members = removeMember(r.Members, m.Name)
		}
		cast, _ = castMember(r, m.Name, m.Role)
		r.Members = append(r.Members, m)
		return nil
	}); err != nil {
		giveBack()
		return "", err
	}
	markSpawn(t, m.Name)
	if _, err := t.Mailbox().Send(ctx, store.Message{Type: store.TypeMessage, From: store.LeadName, To: m.Name, Content: prompt, Summary: summary}); err != nil {
		giveBack()
		return "", fmt.Errorf("give %s its prompt: %w", m.Name, err)
	}
	a := Assignment{Team: t.Name(), Name: m.Name, Role: m.Role, Model: m.Model, Prompt: prompt}
	if key := s.teamKey(); len(key) > 0 {
		if a.SealedKey, err = sealTeamKey(agentKey, key); err != nil {
			giveBack()
			return "", fmt.Errorf("hand %s to %s of pool %q: %w", m.Name, agentName, pool, err)
		}
	}
	asg, _ := json.Marshal(a)
	if _, err := ptm.Mailbox().Send(ctx, store.Message{Type: store.TypeMessage, From: store.LeadName, To: agentName,
		Summary: assignmentSummary, Content: string(asg)}); err != nil {
		giveBack()
		return "", fmt.Errorf("hand %s to %s of pool %q: %w", m.Name, agentName, pool, err)
	}
	s.emit(ctx, t, teamevent.Spawn{Member: m.Name, Role: m.Role, Model: m.Model, PlanModeRequired: m.PlanModeRequired, PermissionMode: m.PermissionMode, Mode: PlacementRemote})
	s.mergeRemote(t)
	desc := m.Name
	if m.Role != "" {
		desc += " (" + m.Role + ")"
	}
	if cast.Name != "" {
		desc += ", playing " + cast.Name
	}
	return fmt.Sprintf("Spawned teammate %s in team %s on another machine (%s, waiting in pool %s); it works in its own clone on branch %s, pushed at each completed task and merged by the runtime. It has your prompt as its first message and will claim unblocked tasks when idle.",
		desc, t.Name(), agentName, pool, m.Branch), nil
}

var errNoneWaiting = errors.New("no agent waiting")

// takeWaiting claims one live waiting agent of a pool (compare-and-set on
// the pool's roster): the one called want, else the one waiting longest.
func takeWaiting(ctx context.Context, pool store.Team, want string) (name, key string, err error) {
	var got, gotKey string
	now := time.Now()
	_, err = pool.UpdateRoster(ctx, func(r *store.Roster) error {
		got = ""
		var cands []*store.Member
		for i := range r.Members {
			w := &r.Members[i]
			if w.AgentType == poolAgent && w.Status == store.StatusIdle && !Dead(*w, now) {
				cands = append(cands, w)
			}
		}
		if len(cands) == 0 {
			return errNoneWaiting
		}
		pick := cands[0]
		for _, c := range cands {
			if c.Name == want {
				pick = c
				break
			}
			if c.JoinedAt.Before(pick.JoinedAt) {
				pick = c
			}
		}
		pick.Status = store.StatusWorking
		got, gotKey = pick.Name, pick.Key
		return nil
	})
	return got, gotKey, err
}

// WaitInPool registers an agent as waiting in pool (through the store's
// team API, so it works on every store), tells ready once it is
// registered, and waits until the lead assigns it a teammate to become.
// name "" is made of the host and process id. Its heartbeat keeps it
// alive in the pool until then; on return it has left the pool.
func WaitInPool(ctx context.Context, st store.Store, pool, name string, ready func(agent string)) (Assignment, error) {
	pt, err := PoolTeam(pool)
	if err != nil {
		return Assignment{}, err
	}
	if name == "" {
		name = defaultAgentName()
	}
	if name, err = store.NormalizeMemberName(name); err != nil {
		return Assignment{}, err
	}
	t, err := st.Team(ctx, pt)
	if errors.Is(err, store.ErrTeamNotFound) {
		t, err = st.CreateTeam(ctx, store.Roster{Name: pt, Description: "agents waiting in pool " + pool + " for the lead to spawn them as teammates"})
		if errors.Is(err, store.ErrTeamExists) {
			t, err = st.Team(ctx, pt)
		}
	}
	if err != nil {
		return Assignment{}, fmt.Errorf("pool %q: %w", pool, err)
	}
	priv, pub, err := newPoolKey()
	if err != nil {
		return Assignment{}, err
	}
	now := time.Now().UTC()
	host, _ := os.Hostname()
	if _, err := t.UpdateRoster(ctx, func(r *store.Roster) error {
		if w, ok := r.Member(name); ok {
			gone := w.CWD == host && w.PID > 0 && !processAlive(w.PID) // killed on this machine
			if w.Status != store.StatusShutdown && !Dead(*w, now) && !gone {
				return fmt.Errorf("an agent called %q is already waiting in pool %q (pid %d on %s); give another --name", name, pool, w.PID, w.CWD)
			}
			r.Members = removeMember(r.Members, name)
		}
		r.Members = append(r.Members, store.Member{Name: name, AgentType: poolAgent, Status: store.StatusIdle, CWD: host,
			PID: os.Getpid(), JoinedAt: now, HeartbeatAt: now, Key: pub})
		return nil
	}); err != nil {
		return Assignment{}, fmt.Errorf("pool %q: %w", pool, err)
	}
	leave := func() {
		_, _ = t.UpdateRoster(context.WithoutCancel(ctx), func(r *store.Roster) error {
			if w, ok := r.Member(name); ok {
				w.Status = store.StatusShutdown
			}
			return nil
		})
	}
	bctx, stop := context.WithCancel(ctx)
	beaten := make(chan struct{})
	go func() {
		defer close(beaten)
		beat(bctx, t, func() []string { return []string{name} }, nil)
	}()
	defer func() { stop(); <-beaten }()
	if ready != nil {
		ready(name)
	}
	for {
		msgs, err := t.Mailbox().Receive(ctx, name)
		if err != nil {
			leave()
			return Assignment{}, err
		}
		for _, msg := range msgs {
			_ = t.Mailbox().Ack(context.WithoutCancel(ctx), name, msg.ID)
			if msg.Summary != assignmentSummary {
				continue
			}
			var a Assignment
			if err := json.Unmarshal([]byte(msg.Content), &a); err != nil || a.Team == "" || a.Name == "" {
				continue
			}
			if a.SealedKey != "" {
				if a.TeamKey, err = openTeamKey(priv, a.SealedKey); err != nil {
					continue // not sealed to this agent: not its assignment
				}
			}
			leave()
			return a, nil
		}
	}
}

// defaultAgentName is host-pid, made a valid member name.
func defaultAgentName() string {
	host, _ := os.Hostname()
	host = strings.ToLower(host)
	var b strings.Builder
	for _, c := range host {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' {
			b.WriteRune(c)
		}
	}
	h := strings.Trim(b.String(), "-.")
	if h == "" {
		h = "agent"
	}
	suffix := fmt.Sprintf("-%d", os.Getpid())
	if len(h)+len(suffix) > 40 {
		h = h[:40-len(suffix)]
	}
	return h + suffix
}

// --- joining ---

// JoinDir is the default workspace of a joined teammate: its clone, under
// the user's cache.
func JoinDir(team, member string) (string, error) {
	c, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(c, "troupe", "join", team, member), nil
}

// Join readies member name of team t to run here, on another machine than
// its lead: its workspace dir becomes its own clone of the team's remote
// on branch troupe/<team>/<member> (a clone already there is fetched and
// kept), and the roster records it as remote, with the clone's path and
// this process. A member not on the roster joins it by itself. A team
// with no remote leaves dir as it is (a workspace the machines share).
func Join(ctx context.Context, t store.Team, name, dir string) (string, error) {
	name, err := store.NormalizeMemberName(name)
	if err != nil {
		return "", err
	}
	if name == store.LeadName {
		return "", fmt.Errorf("%q is the lead's name; join as a teammate", name)
	}
	r, err := t.ReadRoster(ctx)
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	branch := worktree.Branch(t.Name(), name)
	wt := ""
	if r.Remote != "" {
		base := r.Base
		if base == "" {
			base = "main"
		}
		repo, err := worktree.Clone(ctx, r.Remote, abs, base, branch)
		if err != nil {
			return "", fmt.Errorf("join %s as %s: %w", t.Name(), name, err)
		}
		abs, wt = repo.Top, repo.Top
	} else if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", err
	} else {
		branch = ""
	}
	now := time.Now().UTC()
	_, err = t.UpdateRoster(ctx, func(r *store.Roster) error {
		m, ok := r.Member(name)
		if !ok {
			r.Members = append(r.Members, store.Member{Name: name, AgentType: "teammate", Status: store.StatusIdle, JoinedAt: now})
			m = &r.Members[len(r.Members)-1]
		} else if m.Status == store.StatusShutdown {
			m.Status = store.StatusIdle
		}
		m.Placement, m.Worktree, m.Branch, m.CWD = PlacementRemote, wt, branch, abs
		m.PID, m.HeartbeatAt = os.Getpid(), now
		return nil
	})
	if err != nil {
		return "", err
	}
	return abs, nil
}

// followRemote follows the journal events of t's remote teammates, unless
// the session follows every teammate process already.
func (sv *supervisor) followRemote(t store.Team) {
	if sv.cfg.OnEvent == nil {
		return
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
