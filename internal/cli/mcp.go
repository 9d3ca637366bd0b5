package cli

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/mcp"
	"github.com/troupe-dev/troupe/internal/settings"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/store/seal"
	"github.com/troupe-dev/troupe/internal/teamkey"
	"github.com/troupe-dev/troupe/internal/tool"
)

// mcpCmd is `troupe mcp`: the MCP servers troupe uses, and troupe as an
// MCP server for any client that joins a team.
func (a *app) mcpCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "mcp", Short: "List the MCP servers agents use; serve a team to an MCP client"}
	cmd.AddCommand(a.mcpListCmd(), a.mcpServeCmd())
	return cmd
}

// mcpConfig reads the MCP configuration as a session would (see
// mcp.FromSettings).
func (a *app) mcpConfig(dir string, flags []string) (*mcp.Config, error) {
	s, err := settings.Load(a.settingsOptions(dir))
	if err != nil {
		return nil, err
	}
	return mcp.FromSettings(dir, s, flags, nil), nil
}

func (a *app) mcpListCmd() *cobra.Command {
	var (
		configs []string
		timeout time.Duration
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Show the MCP servers: their source file, their state and their tools",
		Long: `Reads the MCP configuration as Claude Code does (.mcp.json at the workspace
root, "mcpServers" in the settings files, --mcp-config), connects to every
server at once with a short timeout, and shows each one's source, state and
tools under the names agents are offered (mcp__<server>__<tool>). Entries
that cannot be used, tools whose schema the model API would refuse, and name
clashes are listed after the table; the command fails only when the
configuration itself could not be read.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := a.Workspace()
			if err != nil {
				return withCode(ExitError, err)
			}
			cfg, err := a.mcpConfig(dir, configs)
			if err != nil {
				return withCode(ExitError, err)
			}
			m := mcp.NewManager(cfg.Servers, mcp.Options{Dir: dir, StartTimeout: timeout})
			defer m.Close()
			m.Start(a.ctx)
			tools, probs := m.Offered(nil)
			return a.printMCPList(cfg, m.Status(), tools, probs, asJSON)
		},
	}
	cmd.Flags().StringArrayVar(&configs, "mcp-config", nil, "read MCP servers from this JSON file or string too (repeatable)")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "how long each server has to start and list its tools")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

type mcpListServer struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"`
	Source string   `json:"source"`
	State  string   `json:"state"`
	Error  string   `json:"error,omitempty"`
	Tools  []string `json:"tools"`
}

func (a *app) printMCPList(cfg *mcp.Config, status []mcp.Status, tools []tool.Tool, probs []mcp.Problem, asJSON bool) error {
	offered := map[string][]string{}
	for _, t := range tools {
		if mt, ok := t.(*mcp.Tool); ok {
			offered[mt.Server()] = append(offered[mt.Server()], t.Spec().Name)
		}
	}
	rows := make([]mcpListServer, 0, len(status))
	for _, st := range status {
		r := mcpListServer{Name: st.Server.Name, Type: st.Server.Type, Source: st.Server.Source, State: st.State, Tools: offered[st.Server.Name]}
		if st.Err != nil {
			r.Error = st.Err.Error()
		}
		if r.Tools == nil {
			r.Tools = []string{}
		}
		rows = append(rows, r)
	}
	var notes []string
	for _, p := range cfg.Problems {
		notes = append(notes, p.Error())
	}
	for _, p := range probs {
		if p.Tool != "" { // a server's own failure is in its row
			notes = append(notes, p.Error())
		}
	}
	notes = append(notes, cfg.Warnings...)
	if asJSON {
		return writeJSON(a.stdout, map[string]any{"servers": rows, "problems": nonNil(notes)})
	}
	if len(rows) == 0 && len(notes) == 0 {
		fmt.Fprintln(a.stdout, "No MCP servers configured (.mcp.json, mcpServers in settings, --mcp-config).")
		return nil
	}
	var table [][]string
	for _, r := range rows {
		state := r.State
		if r.Error != "" {
			state += ": " + r.Error
		}
		table = append(table, []string{r.Name, r.Type, r.Source, state})
	}
	if err := tableOut(a, table); err != nil {
		return err
	}
	for _, r := range rows {
		if len(r.Tools) > 0 {
			fmt.Fprintf(a.stdout, "\n%s tools:\n  %s\n", r.Name, strings.Join(r.Tools, "\n  "))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(a.stdout, "\nProblems:\n")
		for _, n := range notes {
			fmt.Fprintf(a.stdout, "  %s\n", n)
		}
	}
	return nil
}

func tableOut(a *app, rows [][]string) error {
	return table(a.stdout, "NAME\tTYPE\tSOURCE\tSTATE", rows)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (a *app) mcpServeCmd() *cobra.Command {
	var (
		teamName, as, role, addr, tokenFile string
	)
	cmd := &cobra.Command{
		Use:   "serve --team T --as NAME",
		Short: "Serve team T to an MCP client, which joins it as the member NAME",
		Long: `Serves the team T over MCP: the client (Claude Code, an IDE, another agent)
joins the team as the member NAME, on the roster as agent_type "external",
with the teammate tools TaskList, TaskGet, TaskCreate, TaskUpdate (claim with
status in_progress, finish with completed), SendMessage and ReceiveMessages
(waits for the member's inbox), and the board and roster as resources.

Over stdio by default:
  claude mcp add troupe -- troupe mcp serve --team T --as reviewer
With --http ADDR it serves streamable HTTP at http://ADDR/mcp, and every
request needs "Authorization: Bearer TOKEN": the token is read from
--token-file, else from $TROUPE_MCP_TOKEN, else made up and printed on
stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if teamName == "" || as == "" {
				return withCode(ExitUsage, errors.New("mcp serve needs --team and --as"))
			}
			var err error
			var ln net.Listener
			var token string
			if addr != "" {
				// Listening before joining: a client that sees the member
				// on the roster finds the port open.
				if token, err = mcpToken(tokenFile); err != nil {
					return withCode(ExitUsage, err)
				}
				if ln, err = net.Listen("tcp", addr); err != nil {
					return withCode(ExitError, fmt.Errorf("mcp serve: %w", err))
				}
				defer ln.Close()
			}
			team, closeStore, err := a.openTeamForMCP(teamName)
			if err != nil {
				return err
			}
			defer closeStore()
			ts, err := mcp.NewTeamServer(a.ctx, mcp.TeamOptions{Team: team, Member: as, Role: role})
			if err != nil {
				return withCode(ExitError, err)
			}
			defer ts.Close()
			if ln != nil {
				return a.serveMCPHTTP(ts, ln, token)
			}
			err = ts.Server().Run(a.ctx, &sdk.StdioTransport{})
			if err != nil && a.ctx.Err() == nil && !errors.Is(err, sdk.ErrConnectionClosed) {
				return withCode(ExitError, fmt.Errorf("mcp serve: %w", err))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&teamName, "team", "", "the team to join")
	cmd.Flags().StringVar(&as, "as", "", "the member name the client plays")
	cmd.Flags().StringVar(&role, "role", "", "the member's role on the roster (default external)")
	cmd.Flags().StringVar(&addr, "http", "", "serve streamable HTTP on this address (host:port) instead of stdio")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "with --http: the file holding the bearer token")
	return cmd
}

// openTeamForMCP opens team name of the workspace's store, sealed with the
// team's key when it has one, so that the runtime takes the member's
// protocol answers (a shutdown_response) as its own processes'.
func (a *app) openTeamForMCP(name string) (store.Team, func(), error) {
	s, t, err := a.openTeam(name)
	if err != nil {
		return nil, nil, err
	}
	closeStore := func() { s.Close() }
	dir, err := a.StateDir()
	if err != nil {
		closeStore()
		return nil, nil, withCode(ExitError, err)
	}
	keys, err := teamkey.New(teamkey.Options{StateDir: dir})
	if err != nil {
		closeStore()
		return nil, nil, withCode(ExitError, err)
	}
	key, err := keys.Load(t.Name())
	switch {
	case errors.Is(err, teamkey.ErrNoKey):
		return t, closeStore, nil
	case err != nil:
		closeStore()
		return nil, nil, withCode(ExitError, fmt.Errorf("team %s: %w", name, err))
	}
	return seal.Team(t, key, seal.Options{}), closeStore, nil
}

// mcpToken is the bearer token of `mcp serve --http`.
func mcpToken(file string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
		return "", fmt.Errorf("--token-file %s is empty", file)
	}
	if t := strings.TrimSpace(os.Getenv("TROUPE_MCP_TOKEN")); t != "" {
		return t, nil
	}
	return "", nil
}

func (a *app) serveMCPHTTP(ts *mcp.TeamServer, ln net.Listener, token string) error {
	if token == "" {
		b := make([]byte, 24)
		_, _ = rand.Read(b)
		token = hex.EncodeToString(b)
		// The one place it can be read: the terminal of whoever started
		// the server (stderr is not redacted for it: it was never a
		// registered secret).
		fmt.Fprintf(a.stderr, "troupe mcp serve: bearer token %s\n", token)
	}
	verify := func(_ context.Context, got string, _ *http.Request) (*auth.TokenInfo, error) {
		if subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: ts.Member()}, nil
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return ts.Server() }, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h))
	fmt.Fprintf(a.stderr, "troupe mcp serve: %s on http://%s/mcp\n", ts.Member(), ln.Addr())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return withCode(ExitError, fmt.Errorf("mcp serve: %w", err))
	case <-a.ctx.Done():
	case <-ts.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	<-done
	return nil
}
