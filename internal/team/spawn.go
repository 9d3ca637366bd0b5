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
	if err != nil {
		return tool.Errorf("Task: %v", err)
	}
	return tool.OK(out)
}

// spawn puts a new teammate on the roster, gives it its prompt as its first
// message, and starts it.
func (s *Session) spawn(ctx context.Context, args tool.TaskArgs) (string, error) {
	t, err := s.Team()
	if err != nil {
		return "", err
	}
	if args.TeamName != "" && !strings.EqualFold(args.TeamName, t.Name()) {
		return "", fmt.Errorf("team %q is not this session's team (%s)", args.TeamName, t.Name())
	}
	name, err := store.NormalizeMemberName(args.Name)
	if err != nil {
		return "", err
	}
	if name == store.LeadName {
		return "", fmt.Errorf("%q is the lead's name", name)
	}
	mode := args.PermissionMode
	if mode == "" && s.cfg.Rules != nil {
		mode = s.cfg.Rules.DefaultMode
	}
	if mode == "" {
		mode = s.inheritedMode()
	}
	if !validPermissionMode(mode) || mode == PermDelegate {
		return "", fmt.Errorf("permission_mode %q is not one of %s", mode, modeNames(permission.TeammateModes))
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
		return "", err
	}
	if args.Isolation == PlacementRemote || args.Pool != "" {
		prompt := strings.TrimSpace(args.Prompt)
		if prompt == "" {
			prompt = args.Description
		}
		pool := args.Pool
		if pool == "" {
			pool = DefaultPool
		}
		return s.spawnRemote(ctx, t, pool, store.Member{Name: name, Role: role, Model: model, Provider: providerOf(model, s.cfg.Provider),
			PlanModeRequired: args.PlanModeRequired, PermissionMode: mode, BudgetTokens: args.BudgetTokens, BudgetUSD: args.BudgetUSD,
			MCPServers: servers}, prompt, args.Description)
	}
	env, err := s.sup.envOf(ctx, t, name)
	if err != nil {
		return "", err
	}
	wt, mergeMode, err := s.isolate(ctx, t, name, args.Isolation, &env)
	if err != nil {
		return "", err
	}
	now := time.Now().UTC()
	var cast store.Persona
	_, err = t.UpdateRoster(ctx, func(r *store.Roster) error {
		if m, ok := r.Member(name); ok {
			if m.Status != store.StatusShutdown && !Dead(*m, now) {
				return fmt.Errorf("a teammate called %q is already on the team (%s); message it instead of spawning another", name, m.Status)
			}
			// A member that was shut down may be spawned again.
			*m = store.Member{}
			r.Members = removeMember(r.Members, name)
		}
		cast, _ = castMember(r, name, role)
		r.Members = append(r.Members, store.Member{
			Name: name, Role: role, Model: model, Provider: providerOf(model, s.cfg.Provider), AgentType: "teammate", Status: store.StatusWorking,
			PlanModeRequired: args.PlanModeRequired, PermissionMode: mode, CWD: env.Workspace.Dir(),
			Worktree: wt.Path, Branch: wt.Branch, MergeMode: mergeMode,
			BudgetTokens: args.BudgetTokens, BudgetUSD: args.BudgetUSD, MCPServers: servers,
			JoinedAt: now, HeartbeatAt: now,
		})
		return nil
	})
	if err != nil {
		return "", err
	}
	prompt := strings.TrimSpace(args.Prompt)
	if prompt == "" {
		prompt = args.Description
	}
	// The transcript's new life and the prompt are independent files: both
	// fsyncs at once. The member starts once both are durable.
	var marked sync.WaitGroup
	marked.Go(func() { markSpawn(t, name) })
	_, err = t.Mailbox().Send(ctx, store.Message{Type: store.TypeMessage, From: store.LeadName, To: name, Content: prompt, Summary: args.Description})
	marked.Wait()
	if err != nil {
		return "", fmt.Errorf("give %s its prompt: %w", name, err)
	}
	// The spawn event is journaled while the member is made, and before it
	// runs: none of its own events comes before it.
	journaled := make(chan struct{})
	go func() {
		defer close(journaled)
		s.emit(ctx, t, teamevent.Spawn{Member: name, Role: role, Model: model, PlanModeRequired: args.PlanModeRequired, PermissionMode: mode, Mode: s.cfg.TeammateMode})
	}()
	if err := s.sup.startAfter(t, name, env, journaled); err != nil {
		<-journaled
		return "", err
	}
	desc := name
	if role != "" {
		desc += " (" + role + ")"
	}
	if cast.Name != "" {
		desc += ", playing " + cast.Name
	}
	return fmt.Sprintf("Spawned teammate %s in team %s. It has your prompt as its first message and will claim unblocked tasks when idle.", desc, t.Name()), nil
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
