package team

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/tool"
)

// teammateHandler is the Task tool with team_name and name.
func (s *Session) teammateHandler(ctx context.Context, _ *tool.Env, args tool.TaskArgs) tool.Result {
	out, err := s.spawn(ctx, args)
	return spawnResult(out, err)
}

// teammatesHandler is the Task tool's calls with team_name and name that
// came in one model message: spawned together (see spawnAll).
func (s *Session) teammatesHandler(ctx context.Context, _ []*tool.Env, args []tool.TaskArgs) []tool.Result {
	outs, errs := s.spawnAll(ctx, args)
	res := make([]tool.Result, len(args))
	for i := range args {
		res[i] = spawnResult(outs[i], errs[i])
	}
	return res
}

func spawnResult(out string, err error) tool.Result {
	if err != nil {
		return tool.Errorf("Task: %v", err)
	}
	return tool.OK(out)
}

// spawn puts a new teammate on the roster, gives it its prompt as its first
// message, and starts it.
func (s *Session) spawn(ctx context.Context, args tool.TaskArgs) (string, error) {
	outs, errs := s.spawnAll(ctx, []tool.TaskArgs{args})
	return outs[0], errs[0]
}

// spawnAll spawns several teammates at once, as the calls of one message
// ask, with the outcome of each call. What depends on order is done in the
// calls' order, so that the same calls make the same team: each is
// checked, then all join the roster in one change (names and personas
// given in order), then their prompts are sent and their transcripts
// marked (independent files, written concurrently so that their fsyncs
// overlap), then their spawn events are journaled in order, and each
// teammate starts once its event is durable. A call that fails takes only
// its own teammate with it. A teammate placed on another machine is
// spawned on its own, in its turn.
func (s *Session) spawnAll(ctx context.Context, args []tool.TaskArgs) ([]string, []error) {
	outs, errs := make([]string, len(args)), make([]error, len(args))
	t, err := s.Team()
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return outs, errs
	}
	plans := make([]*spawnPlan, len(args))
	for i, a := range args {
		p, err := s.planSpawn(ctx, t, a)
		switch {
		case err != nil:
			errs[i] = err
		case p.remote:
			outs[i], errs[i] = s.spawnRemote(ctx, t, p.pool, p.member, p.prompt, a.Description)
		default:
			plans[i] = p
		}
	}
	if !slices.ContainsFunc(plans, func(p *spawnPlan) bool { return p != nil }) {
		return outs, errs
	}
	now := time.Now().UTC()
	joined := make([]error, len(plans))
	_, err = t.UpdateRoster(ctx, func(r *store.Roster) error {
		for i, p := range plans {
			if p != nil {
				joined[i] = p.join(r, now)
			}
		}
		return nil
	})
	for i, p := range plans {
		switch {
		case p == nil:
		case err != nil:
			errs[i], plans[i] = err, nil
		case joined[i] != nil:
			errs[i], plans[i] = joined[i], nil
		}
	}
	// The prompts and the transcripts' new lives, at most spawnWriters at
	// a time (each holds a few files open).
	sem := make(chan struct{}, spawnWriters)
	var wg sync.WaitGroup
	for i, p := range plans {
		if p == nil {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := p.give(ctx, t); err != nil {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	var events []teamevent.Event
	for i, p := range plans {
		if p == nil || errs[i] != nil {
			continue
		}
		events = append(events, teamevent.Spawn{Member: p.name, Role: p.member.Role, Model: p.member.Model, PlanModeRequired: p.args.PlanModeRequired, PermissionMode: p.member.PermissionMode, Mode: s.cfg.TeammateMode})
	}
	// The spawn events are journaled while the members are made, and
	// before they run: none of a member's own events comes before its
	// spawn.
	journaled := make(chan struct{})
	go func() {
		defer close(journaled)
		emitAll(ctx, t, store.LeadName, events, s.cfg.OnEvent, s.cfg.Logger)
	}()
	for i, p := range plans {
		if p == nil || errs[i] != nil {
			continue
		}
		if err := s.sup.startAfter(t, p.name, p.env, journaled); err != nil {
			errs[i] = err
			continue
		}
		outs[i] = p.describe(t)
	}
	<-journaled
	return outs, errs
}

// spawnWriters bounds the spawns of one message writing their files at
// once.
const spawnWriters = 64

// spawnPlan is one teammate of spawnAll, checked and placed, not yet on
// the roster.
type spawnPlan struct {
	args   tool.TaskArgs
	name   string
	prompt string
	member store.Member // its roster entry
	remote bool         // on another machine, from pool
	pool   string
	env    Env
	cast   store.Persona
}

// planSpawn checks a spawn's arguments and places its teammate (its
// worktree, for one isolated in a worktree).
func (s *Session) planSpawn(ctx context.Context, t store.Team, args tool.TaskArgs) (*spawnPlan, error) {
	if args.TeamName != "" && !strings.EqualFold(args.TeamName, t.Name()) {
		return nil, fmt.Errorf("team %q is not this session's team (%s)", args.TeamName, t.Name())
	}
	name, err := store.NormalizeMemberName(args.Name)
	if err != nil {
		return nil, err
	}
	if name == store.LeadName {
		return nil, fmt.Errorf("%q is the lead's name", name)
	}
	mode := args.PermissionMode
	if mode == "" && s.cfg.Rules != nil {
		mode = s.cfg.Rules.DefaultMode
	}
	if mode == "" {
		mode = s.inheritedMode()
	}
	if !validPermissionMode(mode) || mode == PermDelegate {
		return nil, fmt.Errorf("permission_mode %q is not one of %s", mode, modeNames(permission.TeammateModes))
	}
	role := strings.TrimSpace(args.Role)
	if role == "" {
		role = strings.TrimSpace(args.SubagentType)
	}
	model := args.Model
	if model == "" {
		model = s.cfg.Rules.roleModel(s.pattern(), role)
	}
	if model == "" && s.cfg.Rules != nil {
		model = s.cfg.Rules.TeammateModel
	}
	if model == "" {
		model = s.cfg.TeammateModel
	}
	asked := args.MCPServers
	if len(asked) == 0 {
		// The pattern's role may name the servers its teammates get.
		ro, _ := s.cfg.Rules.patternRole(s.pattern(), role)
		asked = ro.MCPServers
	}
	servers, err := s.mcpServers(asked)
	if err != nil {
		return nil, err
	}
	prompt := strings.TrimSpace(args.Prompt)
	if prompt == "" {
		prompt = args.Description
	}
	p := &spawnPlan{args: args, name: name, prompt: prompt}
	if args.Isolation == PlacementRemote || args.Pool != "" {
		p.remote, p.pool = true, args.Pool
		if p.pool == "" {
			p.pool = DefaultPool
		}
		p.member = store.Member{Name: name, Role: role, Model: model, Provider: providerOf(model, s.cfg.Provider),
			PlanModeRequired: args.PlanModeRequired, PermissionMode: mode, BudgetTokens: args.BudgetTokens, BudgetUSD: args.BudgetUSD,
			MCPServers: servers}
		return p, nil
	}
	if p.env, err = s.sup.envOf(ctx, t, name); err != nil {
		return nil, err
	}
	wt, merge, err := s.isolate(ctx, t, name, args.Isolation, &p.env)
	if err != nil {
		return nil, err
	}
	p.member = store.Member{
		Name: name, Role: role, Model: model, Provider: providerOf(model, s.cfg.Provider), AgentType: "teammate", Status: store.StatusWorking,
		PlanModeRequired: args.PlanModeRequired, PermissionMode: mode, CWD: p.env.Workspace.Dir(),
		Worktree: wt.Path, Branch: wt.Branch, MergeMode: merge,
		BudgetTokens: args.BudgetTokens, BudgetUSD: args.BudgetUSD, MCPServers: servers,
	}
	return p, nil
}

// join puts the teammate on roster r, casting it a persona.
func (p *spawnPlan) join(r *store.Roster, now time.Time) error {
	if m, ok := r.Member(p.name); ok {
		if m.Status != store.StatusShutdown && !Dead(*m, now) {
			return fmt.Errorf("a teammate called %q is already on the team (%s); message it instead of spawning another", p.name, m.Status)
		}
		// A member that was shut down may be spawned again.
		*m = store.Member{}
		r.Members = removeMember(r.Members, p.name)
	}
	p.cast, _ = castMember(r, p.name, p.member.Role)
	m := p.member
	m.JoinedAt, m.HeartbeatAt = now, now
	r.Members = append(r.Members, m)
	return nil
}

// give marks the teammate's new life in its transcript and sends it its
// prompt: independent files, both fsyncs at once. The member starts once
// both are durable.
func (p *spawnPlan) give(ctx context.Context, t store.Team) error {
	var marked sync.WaitGroup
	marked.Go(func() { markSpawn(t, p.name) })
	_, err := t.Mailbox().Send(ctx, store.Message{Type: store.TypeMessage, From: store.LeadName, To: p.name, Content: p.prompt, Summary: p.args.Description})
	marked.Wait()
	if err != nil {
		return fmt.Errorf("give %s its prompt: %w", p.name, err)
	}
	return nil
}

// describe is the Task call's answer for a teammate started.
func (p *spawnPlan) describe(t store.Team) string {
	desc := p.name
	if p.member.Role != "" {
		desc += " (" + p.member.Role + ")"
	}
	if p.cast.Name != "" {
		desc += ", playing " + p.cast.Name
	}
	return fmt.Sprintf("Spawned teammate %s in team %s. It has your prompt as its first message and will claim unblocked tasks when idle.", desc, t.Name())
}

// mcpServers checks a spawn's mcp_servers against the servers whose tools
// the lead has, and returns them cleaned (nil: all).
func (s *Session) mcpServers(asked []string) ([]string, error) {
	have := mcpServerNames(s.cfg.Tools)
	var out []string
	for _, a := range asked {
		a = strings.TrimSpace(strings.TrimPrefix(a, mcpPrefix))
		if a == "" || slices.Contains(out, a) {
			continue
		}
		if !slices.Contains(have, a) {
			if len(have) == 0 {
				return nil, fmt.Errorf("mcp_servers: no MCP server has tools in this session, so %q cannot be given; leave mcp_servers out", a)
			}
			return nil, fmt.Errorf("mcp_servers: %q is not an MCP server with tools in this session; the servers are: %s", a, strings.Join(have, ", "))
		}
		out = append(out, a)
	}
	return out, nil
}

// providerOf names the provider a model spec runs on: its "provider:"
// prefix, else the session's default provider.
func providerOf(model string, def llm.Provider) string {
	if p, _, ok := strings.Cut(model, ":"); ok && (p == "anthropic" || p == "openai") {
		return p
	}
	return def.Name()
}

func removeMember(ms []store.Member, name string) []store.Member {
	out := ms[:0]
	for _, m := range ms {
		if m.Name != name {
			out = append(out, m)
		}
	}
	return out
}
