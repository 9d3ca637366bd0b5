package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/worktree"
)

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
