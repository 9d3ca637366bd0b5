package cli

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	assembly "github.com/troupe-dev/troupe/internal/app"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// storeCmds returns the commands that read and write a team's durable state
// (tasks, inbox, send, team).
func (a *app) storeCmds() []*cobra.Command {
	team := &cobra.Command{Use: "team", Short: "List teams and show one team's roster, tasks and inbox depths"}
	team.AddCommand(a.teamListCmd(), a.teamStatusCmd())
	return []*cobra.Command{a.tasksCmd(), a.inboxCmd(), a.sendCmd(), team, a.mergeCmd()}
}

// openStore opens the workspace's store. Commands that only read call it
// with mustExist, so that looking at an empty workspace leaves no .troupe
// behind.
func (a *app) openStore(mustExist bool) (store.Store, error) {
	ws, err := a.Workspace()
	if err != nil {
		return nil, withCode(ExitError, err)
	}
	u, err := a.storeURL(ws)
	if err != nil {
		return nil, err
	}
	if remoteStore(u) {
		s, err := assembly.OpenStore(a.ctx, u)
		if err != nil {
			return nil, withCode(ExitError, err)
		}
		return s, nil
	}
	dir, err := a.StateDir()
	if err != nil {
		return nil, withCode(ExitError, err)
	}
	if mustExist {
		if _, err := os.Stat(filepath.Join(dir, "teams")); errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
	}
	s, err := assembly.OpenStore(a.ctx, "file:"+dir)
	if err != nil {
		return nil, withCode(ExitError, err)
	}
	return s, nil
}

// openTeam opens team name of the store, or fails with a clear error.
func (a *app) openTeam(name string) (store.Store, store.Team, error) {
	s, err := a.openStore(true)
	if err != nil {
		return nil, nil, err
	}
	if s == nil {
		dir, _ := a.StateDir()
		return nil, nil, withCode(ExitError, fmt.Errorf("team %s: %w (no teams in %s)", name, store.ErrTeamNotFound, dir))
	}
	t, err := s.Team(a.ctx, name)
	if err != nil {
		s.Close()
		return nil, nil, withCode(ExitError, err)
	}
	return s, t, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func table(w io.Writer, header string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// cell shortens s to one line of at most n runes for a table cell.
func cell(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (a *app) tasksCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "tasks TEAM",
		Short: "Show a team's task board: id, status, owner, subject, blocked by",
		Args:  a.teamArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, t, err := a.openTeam(args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			board, err := t.Tasks().Board(cmd.Context())
			if err != nil {
				return withCode(ExitError, err)
			}
			rows := boardRows(board)
			if asJSON {
				return writeJSON(a.stdout, rows)
			}
			if len(rows) == 0 {
				fmt.Fprintf(a.stdout, "No tasks in team %s.\n", t.Name())
				return nil
			}
			var cells [][]string
			for _, r := range rows {
				if r.Status == taskCorrupt {
					cells = append(cells, []string{r.ID, "CORRUPT", "-", cell(r.Error, 60), "-"})
					continue
				}
				cells = append(cells, []string{r.ID, r.Status, orDash(r.Owner), cell(r.Subject, 60), orDash(strings.Join(r.BlockedBy, ","))})
			}
			if err := table(a.stdout, "ID\tSTATUS\tOWNER\tSUBJECT\tBLOCKED BY", cells); err != nil {
				return err
			}
			printLeases(a.stdout, board)
			a.warnCorrupt(board.Corrupt)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// taskCorrupt is the status shown for a task whose file cannot be read.
const taskCorrupt = "corrupt"

// taskRow is one task of `troupe tasks --json`: a task, or a corrupt one
// (status "corrupt", with the file and what is wrong with it).
type taskRow struct {
	store.Task
	Path  string `json:"path,omitempty"`
	Error string `json:"error,omitempty"`
}

// boardRows puts a board's tasks and corrupt tasks together in id order.
func boardRows(b store.Board) []taskRow {
	rows := make([]taskRow, 0, len(b.Tasks)+len(b.Corrupt))
	for _, t := range b.Tasks {
		rows = append(rows, taskRow{Task: t})
	}
	for _, c := range b.Corrupt {
		rows = append(rows, taskRow{Task: store.Task{ID: c.ID, Status: taskCorrupt, BlockedBy: []string{}, Blocks: []string{}, Metadata: map[string]any{}}, Path: c.Path, Error: c.Err})
	}
	slices.SortStableFunc(rows, func(x, y taskRow) int { return cmp.Compare(store.TaskNum(x.ID), store.TaskNum(y.ID)) })
	return rows
}

// warnCorrupt tells the person on stderr which task files need fixing.
func (a *app) warnCorrupt(bad []store.Corrupt) {
	for _, c := range bad {
		fmt.Fprintf(a.stderr, "troupe: warning: task %s is corrupt: %s (fix or remove %s)\n", c.ID, c.Err, c.Path)
	}
}

func (a *app) inboxCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inbox TEAM NAME",
		Short: "Read a member's inbox without consuming it (the lead is team-lead)",
		Args:  a.teamArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, t, err := a.openTeam(args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			msgs, err := t.Mailbox().Peek(cmd.Context(), args[1])
			if err != nil {
				return withCode(ExitError, err)
			}
			if asJSON {
				return writeJSON(a.stdout, msgs)
			}
			if len(msgs) == 0 {
				fmt.Fprintf(a.stdout, "No unread messages for %s.\n", args[1])
				return nil
			}
			var rows [][]string
			for _, m := range msgs {
				text := m.Content
				if m.Summary != "" {
					text = m.Summary + ": " + text
				}
				rows = append(rows, []string{m.Timestamp.Local().Format(time.DateTime), m.From, m.Type, cell(text, 80)})
			}
			return table(a.stdout, "TIME\tFROM\tTYPE\tMESSAGE", rows)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) sendCmd() *cobra.Command {
	var (
		asJSON  bool
		summary string
	)
	cmd := &cobra.Command{
		Use:   "send TEAM NAME TEXT",
		Short: `Send a message from "human" to a member (the lead is team-lead)`,
		Args:  a.teamArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, t, err := a.openTeam(args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			m, err := t.Mailbox().Send(cmd.Context(), store.Message{
				Type: store.TypeMessage, From: store.HumanName, To: args[1], Content: args[2], Summary: summary,
			})
			if err != nil {
				return withCode(ExitError, err)
			}
			if err := t.Journal().Append(cmd.Context(), store.Event{Type: "send", Agent: store.HumanName,
				Fields: map[string]any{"to": m.To, "id": m.ID, "message_type": m.Type}}); err != nil {
				fmt.Fprintf(a.stderr, "troupe: warning: journal: %v\n", err)
			}
			if asJSON {
				return writeJSON(a.stdout, m)
			}
			fmt.Fprintf(a.stdout, "Sent %s to %s.\n", m.ID, m.To)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&summary, "summary", "", "a short summary shown with the message")
	return cmd
}

// teamSummary is one row of `troupe team list --json`. A team whose
// roster cannot be read has only its name and Corrupt, the reason.
type teamSummary struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Pattern     string    `json:"pattern"`
	Lead        string    `json:"lead"`
	Members     int       `json:"members"`
	CreatedAt   time.Time `json:"created_at"`
	Corrupt     string    `json:"corrupt,omitempty"`
	Path        string    `json:"path,omitempty"` // of the corrupt roster
}

func (a *app) teamListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the teams of this workspace",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.openStore(true)
			if err != nil {
				return err
			}
			var teams store.TeamList
			if s != nil {
				defer s.Close()
				if teams, err = s.Teams(cmd.Context()); err != nil {
					return withCode(ExitError, err)
				}
			}
			out := []teamSummary{}
			for _, r := range teams.Rosters {
				out = append(out, teamSummary{Name: r.Name, Description: r.Description, Pattern: r.Pattern,
					Lead: r.Lead, Members: len(r.Members), CreatedAt: r.CreatedAt})
			}
			for _, c := range teams.Corrupt {
				out = append(out, teamSummary{Name: c.ID, Corrupt: c.Err, Path: c.Path})
				fmt.Fprintf(a.stderr, "troupe: warning: team %s is corrupt: %s (fix or remove %s)\n", c.ID, c.Err, c.Path)
			}
			slices.SortFunc(out, func(x, y teamSummary) int { return cmp.Compare(x.Name, y.Name) })
			if asJSON {
				return writeJSON(a.stdout, out)
			}
			if len(out) == 0 {
				fmt.Fprintln(a.stdout, "No teams.")
				return nil
			}
			var rows [][]string
			for _, t := range out {
				if t.Corrupt != "" {
					rows = append(rows, []string{t.Name, "-", "-", "-", "CORRUPT: " + cell(t.Corrupt, 80)})
					continue
				}
				rows = append(rows, []string{t.Name, fmt.Sprint(t.Members), orDash(t.Pattern), t.CreatedAt.Local().Format(time.DateTime), cell(t.Description, 60)})
			}
			return table(a.stdout, "NAME\tMEMBERS\tPATTERN\tCREATED\tDESCRIPTION", rows)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// teamStatus is `troupe team status --json`.
type teamStatus struct {
	store.Roster
	Tasks  map[string]int    `json:"tasks"`  // count by status
	Inbox  map[string]int    `json:"inbox"`  // unread messages by member
	Health map[string]string `json:"health"` // member -> status, or "dead" if its heartbeat is stale or its process gone
	// LeadModel is the model of the lead's last call (from the journal).
	LeadModel string `json:"lead_model,omitempty"`
	// Corrupt lists the tasks whose files cannot be read (also counted in
	// Tasks as "corrupt").
	Corrupt []store.Corrupt `json:"corrupt,omitempty"`
	// Presence is where each member's inbox is read and its consumer's lag,
	// from a store shared by several machines (none for the file store).
	Presence []store.Presence `json:"presence,omitempty"`
}

// staleHeartbeat is how old a working or idle member's heartbeat may be
// before status reports it dead.
const staleHeartbeat = 30 * time.Second

// memberDead reports whether m is on the roster as running but is not: its
// heartbeat is stale, or the process it recorded is gone. The roster names
// no host; a team's state lives in its workspace, on the machine that runs
// it, so the pid is looked up here.
func memberDead(m store.Member, now time.Time) bool {
	if m.Status == store.StatusShutdown {
		return false
	}
	if !m.HeartbeatAt.IsZero() && now.Sub(m.HeartbeatAt) > staleHeartbeat {
		return true
	}
	return m.PID > 0 && !pidAlive(m.PID)
}

// pidAlive reports whether process pid exists (signal 0 delivers nothing;
// EPERM means it exists under another user).
func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// leadState is what status can tell of the lead, who is not on the roster.
type leadState struct {
	status string // running, dead, stopped, or "" when nothing tells
	model  string
}

// leadFromJournal finds the lead's model in its last model call, and its
// liveness from its process: the pid of a teammate it runs in process, or
// failing that how recently the lead wrote to the journal.
func leadFromJournal(r store.Roster, events []store.Event, now time.Time) leadState {
	var st leadState
	inProcess := map[string]bool{}
	var last time.Time
	for _, e := range events {
		env, err := teamevent.Decode(e)
		if err != nil {
			continue
		}
		switch ev := env.Event.(type) {
		case teamevent.Spawn:
			inProcess[ev.Member] = ev.Mode != team.ModeProcess
		case teamevent.Usage:
			if ev.AgentName == store.LeadName && ev.Model != "" {
				st.model = ev.Model
			}
		}
		if env.Agent == store.LeadName {
			last = env.TS
		}
	}
	for _, m := range r.Members {
		if !inProcess[m.Name] || m.PID <= 0 {
			continue
		}
		if pidAlive(m.PID) {
			st.status = "running"
			return st
		}
		st.status = "dead"
	}
	switch {
	case st.status != "":
	case last.IsZero():
	case now.Sub(last) <= staleHeartbeat:
		st.status = "running"
	default:
		st.status = "stopped"
	}
	return st
}

func (a *app) teamStatusCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status TEAM",
		Short: "Show one team's roster, task counts and inbox depths",
		Args:  a.teamArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			s, t, err := a.openTeam(args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			r, err := t.ReadRoster(ctx)
			if err != nil {
				return withCode(ExitError, err)
			}
			board, err := t.Tasks().Board(ctx)
			if err != nil {
				return withCode(ExitError, err)
			}
			st := teamStatus{Roster: r, Tasks: map[string]int{}, Inbox: map[string]int{}, Health: map[string]string{}, Corrupt: board.Corrupt}
			for _, tk := range board.Tasks {
				st.Tasks[tk.Status]++
			}
			if len(board.Corrupt) > 0 {
				st.Tasks[taskCorrupt] = len(board.Corrupt)
			}
			for _, name := range r.Names() {
				msgs, err := t.Mailbox().Peek(ctx, name)
				if err != nil {
					return withCode(ExitError, err)
				}
				st.Inbox[name] = len(msgs)
			}
			now := time.Now()
			for _, m := range r.Members {
				h := m.Status
				if memberDead(m, now) {
					h = "dead"
				}
				st.Health[m.Name] = orDash(h)
			}
			events, err := t.Journal().Read(ctx)
			if err != nil {
				return withCode(ExitError, err)
			}
			lead := leadFromJournal(r, events, now)
			st.Health[store.LeadName], st.LeadModel = orDash(lead.status), lead.model
			if pr, ok := t.(store.PresenceReporter); ok {
				if st.Presence, err = pr.Presence(ctx); err != nil {
					return withCode(ExitError, err)
				}
			}
			if asJSON {
				return writeJSON(a.stdout, st)
			}
			fmt.Fprintf(a.stdout, "Team %s", r.Name)
			if r.Description != "" {
				fmt.Fprintf(a.stdout, ": %s", cell(r.Description, 80))
			}
			fmt.Fprintf(a.stdout, "\nPattern %s, created %s\n", orDash(r.Pattern), r.CreatedAt.Local().Format(time.DateTime))
			if r.Theme != "" {
				var cast []string
				for _, p := range r.Personas {
					who := p.Member
					if who == "" {
						who = "not yet played"
					}
					cast = append(cast, fmt.Sprintf("%s (%s)", p.Name, who))
				}
				fmt.Fprintf(a.stdout, "Theme %s: %s\n", r.Theme, strings.Join(cast, ", "))
			}
			fmt.Fprintf(a.stdout, "Tasks: %d pending, %d in progress, %d completed",
				st.Tasks[store.TaskPending], st.Tasks[store.TaskInProgress], st.Tasks[store.TaskCompleted])
			if n := len(board.Corrupt); n > 0 {
				fmt.Fprintf(a.stdout, ", %d CORRUPT", n)
			}
			fmt.Fprintln(a.stdout)
			for _, c := range board.Corrupt {
				fmt.Fprintf(a.stdout, "  task %s is corrupt: %s (%s)\n", c.ID, c.Err, c.Path)
			}
			fmt.Fprintln(a.stdout)
			rows := [][]string{{store.LeadName, "lead", st.Health[store.LeadName], orDash(st.LeadModel), fmt.Sprint(st.Inbox[store.LeadName])}}
			for _, m := range r.Members {
				if m.Name == store.LeadName {
					continue
				}
				rows = append(rows, []string{m.Name, orDash(m.Role), st.Health[m.Name], orDash(m.Model), fmt.Sprint(st.Inbox[m.Name])})
			}
			head := "NAME\tROLE\tSTATUS\tMODEL\tUNREAD"
			if r.Theme != "" {
				// A team playing characters shows who plays whom.
				for i, row := range rows {
					p, _ := r.PersonaOf(row[0])
					rows[i] = append(row[:2:2], append([]string{orDash(p.Name)}, row[2:]...)...)
				}
				head = "NAME\tROLE\tPERSONA\tSTATUS\tMODEL\tUNREAD"
			}
			if st.Presence == nil {
				return table(a.stdout, head, rows)
			}
			where := map[string]store.Presence{}
			for _, p := range st.Presence {
				where[p.Member] = p
			}
			for i, row := range rows {
				p := where[row[0]]
				rows[i] = append(row, orDash(p.Where()), fmt.Sprint(p.Lag))
			}
			return table(a.stdout, head+"\tHOST\tLAG", rows)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// teamArgs wants exactly the arguments the command's use line names after
// its name (TEAM first); a missing one is named, and a missing TEAM comes
// with the teams there are to choose from.
func (a *app) teamArgs(cmd *cobra.Command, args []string) error {
	want := strings.Fields(cmd.Use)[1:]
	switch {
	case len(args) > len(want):
		return withCode(ExitUsage, fmt.Errorf("%d arguments given, %d wanted (usage: %s)", len(args), len(want), cmd.UseLine()))
	case len(args) == len(want):
		return nil
	case len(args) > 0:
		return withCode(ExitUsage, fmt.Errorf("missing %s (usage: %s)", want[len(args)], cmd.UseLine()))
	}
	return withCode(ExitUsage, fmt.Errorf("missing TEAM (usage: %s); %s", cmd.UseLine(), a.teamChoices()))
}

// teamChoices names the workspace's teams, for an error that wants one.
func (a *app) teamChoices() string {
	s, err := a.openStore(true)
	if err != nil || s == nil {
		return "this workspace has no teams"
	}
	defer s.Close()
	teams, err := s.Teams(a.ctx)
	if err != nil || len(teams.Rosters)+len(teams.Corrupt) == 0 {
		return "this workspace has no teams"
	}
	var names []string
	for _, r := range teams.Rosters {
		names = append(names, r.Name)
	}
	for _, c := range teams.Corrupt {
		names = append(names, c.ID)
	}
	slices.Sort(names)
	return "teams: " + strings.Join(names, ", ")
}
