package team

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/troupe-dev/troupe/internal/hook"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

// binding is what a team tool knows of its caller.
type binding struct {
	self   string
	lead   bool
	sess   *Session   // the lead's session (lead tools)
	member *Member    // the calling teammate (teammate tools)
	fixed  store.Team // a teammate's team
	proto  *protocol  // the caller's protocols
	em     emitter    // journals as the caller
	rules  *Rules     // hooks on task events
	who    hook.Who
	// announced are the tasks a teammate told the lead it takes.
	announced announcements
}

func (b *binding) team() (store.Team, error) {
	if b.fixed != nil {
		return b.fixed, nil
	}
	return b.sess.Team()
}

// --- TeamCreate ---

type teamCreateArgs struct {
	TeamName    string   `json:"team_name" required:"true" desc:"The team's name: lower case letters, digits, dot, dash, underscore."`
	Description string   `json:"description" desc:"What the team is for."`
	Pattern     string   `json:"pattern" desc:"The team pattern (fixed-theme: 4-6 members, you only manage; mixed-genius: 2-3 members, you work too). Empty: the configured default."`
	Theme       string   `json:"theme" desc:"The persona theme to play (a theme's name), when the pattern plays characters. Empty: the least recently used theme of the workspace, if it has themes."`
	Characters  []string `json:"characters" desc:"Characters of the theme to cast, yours first; the rest are picked avoiding recently used ones."`
}

type teamCreateTool struct{ b *binding }

var teamCreateSpec = tool.NewSpec[teamCreateArgs]("TeamCreate",
	"Create a team with a shared task board and inboxes. You become its lead ('team-lead'). Spawn teammates with Task (team_name and name) afterwards. The result states the team's pattern, size and roles, whether you may work, and the characters to play.")

func (teamCreateTool) Spec() llm.ToolSpec { return teamCreateSpec }
func (teamCreateTool) ReadOnly() bool     { return false }
func (teamCreateTool) Kind() kind.Kind    { return kind.Manage }
func (t teamCreateTool) Run(ctx context.Context, env *tool.Env, input json.RawMessage) tool.Result {
	args, res, ok := tool.DecodeArgs[teamCreateArgs]("TeamCreate", input)
	if !ok {
		return res
	}
	s := t.b.sess
	if cur := s.TeamName(); cur != "" {
		return tool.Errorf("you already lead team %s; delete it with TeamDelete before creating another", cur)
	}
	name, err := store.NormalizeName(args.TeamName)
	if err != nil {
		return tool.Errorf("TeamCreate: %v", err)
	}
	f, err := s.cfg.Rules.form(args.Pattern, args.Theme, args.Characters)
	if err != nil {
		return tool.Errorf("TeamCreate: %v", err)
	}
	// The pattern is in config.json from the start: the leader guard reads
	// it, and a team without it would leave the lead unguarded.
	ros := store.Roster{Name: name, Description: args.Description}
	f.roster(&ros)
	team, err := s.cfg.Store.CreateTeam(ctx, ros)
	if err != nil {
		return tool.Errorf("TeamCreate: %v", err)
	}
	s.recordRemote(ctx, team)
	// The key is made once the name is ours: a team that already existed
	// keeps its own.
	if team, err = s.openKey(ctx, team, true); err != nil {
		if derr := s.cfg.Store.DeleteTeam(context.WithoutCancel(ctx), name); derr != nil {
			s.cfg.Logger.Warn("delete team without key", "team", name, "err", derr)
		}
		return tool.Errorf("TeamCreate: team %s not created: its key: %v", name, err)
	}
	s.setTeam(team, f.pattern)
	s.cfg.Rules.playTheme(ros.Theme, ros.Personas)
	if err := s.cfg.Rules.record(f, name, s.cfg.Workspace.Dir()); err != nil {
		s.cfg.Logger.Warn("theme history not written", "err", err)
	}
	if f.histNote != "" {
		s.cfg.Logger.Warn("theme history not read", "err", f.histNote)
	}
	s.in.flushPre(team)
	s.sup.follow(team)
	s.sup.startHeartbeat(team)
	s.warmSpares(ctx, team)
	s.usage.flush(ctx, team)
	s.hookTeam(team.Name(), "")
	lead, _ := ros.PersonaOf(store.LeadName)
	s.emit(ctx, team, teamevent.TeamCreate{Description: args.Description, Pattern: f.pattern, Theme: ros.Theme, Lead: lead.Name, SessionID: s.hookSession()})
	return tool.OK(fmt.Sprintf("Created team %s. You are its lead, %q. Add tasks with TaskCreate and spawn teammates with Task (team_name %q, name, role, prompt).%s", name, store.LeadName, name, f.describe()))
}

// --- TeamDelete ---

type teamDeleteArgs struct {
	Force bool `json:"force" desc:"Stop teammates that are still working instead of refusing."`
}

type teamDeleteTool struct{ b *binding }

var teamDeleteSpec = tool.NewSpec[teamDeleteArgs]("TeamDelete",
	"Shut every teammate down, wait for them, and delete the team. Refused while a teammate is still working, unless force is true.")

func (teamDeleteTool) Spec() llm.ToolSpec { return teamDeleteSpec }
func (teamDeleteTool) ReadOnly() bool     { return false }
func (teamDeleteTool) Kind() kind.Kind    { return kind.Manage }
func (t teamDeleteTool) Run(ctx context.Context, env *tool.Env, input json.RawMessage) tool.Result {
	args, res, ok := tool.DecodeArgs[teamDeleteArgs]("TeamDelete", input)
	if !ok {
		return res
	}
	if d, asked := t.b.sess.approveDissolve(ctx, input); asked && !d.Allow {
		return tool.Errorf("TeamDelete: the team was not dissolved: %s. Seed 004 dissolves a team only on the user's explicit instruction; carry on, or ask the user.", d.Reason)
	}
	out, err := t.b.sess.deleteTeam(ctx, args.Force)
	if err != nil {
		return tool.Errorf("TeamDelete: %v", err)
	}
	return tool.OK(out)
}

// deleteTeam shuts every member down, waits, and deletes the team.
func (s *Session) deleteTeam(ctx context.Context, force bool) (string, error) {
	t, err := s.Team()
	if err != nil {
		return "", err
	}
	r, err := t.ReadRoster(ctx)
	if err != nil {
		return "", err
	}
	var working, live []string
	for _, m := range r.Members {
		if m.Status == store.StatusShutdown {
			continue
		}
		live = append(live, m.Name)
		if m.Status != store.StatusIdle {
			working = append(working, m.Name)
		}
	}
	if len(working) > 0 && !force {
		return "", fmt.Errorf("teammates still working: %s; wait for them, ask them to shut down, or use force", strings.Join(working, ", "))
	}
	waiting, _ := t.Mailbox().Peek(ctx, store.LeadName)
	for _, name := range toAskShutdown(live, s.proto, waiting) {
		if _, err := s.sendAs(ctx, t, store.Message{Type: store.TypeShutdownRequest, From: store.LeadName, To: name,
			RequestID: s.proto.next(ctx, t, store.LeadName, "shutdown"), Content: "The team is being deleted."}); err != nil {
			return "", err
		}
	}
	// Wait for the members to stop: their runtimes end, or their roster
	// entries say shutdown (process mode, or members of another process).
	wctx, cancel := context.WithTimeout(ctx, s.cfg.ShutdownWait)
	defer cancel()
	ch, err := t.Tasks().Watch(wctx) // any change pokes us; the roster has no watch of its own
	if err != nil {
		return "", err
	}
	inbox, err := t.Mailbox().Watch(wctx, store.LeadName)
	if err != nil {
		return "", err
	}
	forced, timedOut := false, false
	for {
		left, err := s.notShutdown(ctx, t)
		if err != nil {
			return "", err
		}
		if len(left) == 0 {
			break
		}
		if timedOut {
			if !force {
				return "", fmt.Errorf("teammates did not shut down within %s: %s", s.cfg.ShutdownWait, strings.Join(left, ", "))
			}
			forced = true
			s.sup.stop(left)
			break
		}
		woke, err := s.cfg.Pacer.Wait(ctx, store.LeadName, func(context.Context) int {
			select {
			case <-ctx.Done():
				return -1
			case <-wctx.Done():
				return wokeTimeout
			case <-ch:
			case <-inbox:
			case <-s.sup.anyDone():
			}
			return 0
		})
		if err != nil {
			return "", err
		}
		timedOut = woke == wokeTimeout
	}
	wait := s.sup.release()
	s.cfg.Pacer.Block(ctx, store.LeadName, func(context.Context) { wait() })
	s.sup.stopFollowing()
	s.emit(ctx, t, teamevent.TeamDelete{Members: live, Forced: forced})
	trees := s.finishMerges(ctx, t)
	if final, err := t.ReadRoster(ctx); err == nil {
		trees += s.cleanWorktrees(ctx, t, final, force)
	}
	kept := ""
	a, err := s.cfg.Store.ArchiveTeam(ctx, t.Name())
	if err != nil {
		return "", err
	}
	// The archive's name carries the time; the model is told where
	// archives live, not which one, so that what it reads is the same in a
	// replay.
	where := "the store's archive"
	if a.Path != "" {
		where = filepath.Dir(a.Path)
	}
	kept = fmt.Sprintf(" Its journal and transcripts are kept in %s (troupe usage %s still reads them).", where, t.Name())
	s.mu.Lock()
	s.cur.archived, s.cur.archivedTeam = a.Path, t.Name()
	s.mu.Unlock()
	s.dropKey(t.Name())
	s.setTeam(nil, "")
	s.leaveTeamModes()
	s.proto.forgetShutdowns()
	s.hookTeam("", "")
	return fmt.Sprintf("Team %s deleted; %d teammates shut down.%s%s", t.Name(), len(live), kept, trees), nil
}

// toAskShutdown is who of live TeamDelete asks to shut down: a member the
// lead asked already, whose answer is not a refusal waiting in the lead's
// inbox (waiting), is on its way out, and a second request would only be a
// second message for it to answer.
func toAskShutdown(live []string, p *protocol, waiting []store.Message) []string {
	refused := map[string]bool{}
	for _, m := range waiting {
		if m.Type == store.TypeShutdownResponse && (m.Approve == nil || !*m.Approve) {
			refused[m.RequestID] = true
		}
	}
	var out []string
	for _, name := range live {
		asked := p.shutdownAsked(name)
		if len(asked) > 0 && !slices.ContainsFunc(asked, func(id string) bool { return refused[id] }) {
			continue
		}
		out = append(out, name)
	}
	return out
}

func (s *Session) notShutdown(ctx context.Context, t store.Team) ([]string, error) {
	r, err := t.ReadRoster(context.WithoutCancel(ctx))
	if err != nil {
		return nil, err
	}
	var left []string
	for _, m := range r.Members {
		if m.Status != store.StatusShutdown {
			left = append(left, m.Name)
		}
	}
	return left, nil
}
