package app

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/troupe-dev/troupe/internal/mcp"
	"github.com/troupe-dev/troupe/internal/tool"
)

// mcpServers are the session's MCP servers: read from the settings,
// .mcp.json and --mcp-config when the env opens, started when an agent's
// tools are first asked for, and stopped when the env closes.
type mcpServers struct {
	mgr  *mcp.Manager
	warn io.Writer
	// allow are the servers MCPTools starts and offers (nil: all).
	allow []string

	once  sync.Once
	tools []tool.Tool
}

// openMCP reads the MCP configuration as Claude Code does (see
// mcp.FromSettings). What cannot be used is reported on warn and in the
// log; the rest is kept for MCPTools.
func (e *Env) openMCP(warn io.Writer) {
	cfg := mcp.FromSettings(e.Dir, e.Settings, e.opts.MCPConfig, nil)
	for _, p := range cfg.Problems {
		e.Logger.Warn("mcp config", "err", p)
		if warn != nil {
			fmt.Fprintf(warn, "troupe: mcp: %v\n", p)
		}
	}
	for _, w := range cfg.Warnings {
		e.Logger.Warn("mcp config", "warning", w)
		if warn != nil {
			fmt.Fprintf(warn, "troupe: mcp: %s\n", w)
		}
	}
	if len(cfg.Servers) == 0 {
		return
	}
	e.mcp = &mcpServers{warn: warn, mgr: mcp.NewManager(cfg.Servers, mcp.Options{Dir: e.Dir, Logger: e.Logger,
		Lazy: e.opts.MCPLazy, ToolCache: filepath.Join(e.StateDir, "mcp")})}
}

// MCPTools returns the tools of the session's MCP servers, named
// mcp__<server>__<tool>, starting the servers the first time. One server
// process serves every in-process agent of the session; a teammate process
// has its own. A server that cannot start, a schema the model API would
// refuse and a name clash are reported once and left out.
func (e *Env) MCPTools(ctx context.Context) []tool.Tool {
	s := e.mcp
	if s == nil {
		return nil
	}
	s.once.Do(func() {
		var probs []mcp.Problem
		s.tools, probs = s.mgr.Tools(ctx, s.allow)
		for _, p := range probs {
			e.Logger.Warn("mcp", "server", p.Server, "tool", p.Tool, "err", p.Err)
			if s.warn != nil {
				fmt.Fprintf(s.warn, "troupe: mcp: %v\n", p)
			}
		}
	})
	return s.tools
}

// LimitMCP makes MCPTools start and offer only the named servers (a
// teammate spawned with mcp_servers); it must come before MCPTools. A name
// no server has is reported.
func (e *Env) LimitMCP(servers []string) error {
	if len(servers) == 0 {
		return nil
	}
	s := e.mcp
	if s == nil {
		return fmt.Errorf("mcp servers %v: no MCP server is configured", servers)
	}
	// The lead names a server as its tools' names do, which may differ
	// from its configured name (mcp.ToolName cleans it).
	byToolName := map[string]string{}
	var have []string
	for _, srv := range s.mgr.Servers() {
		have = append(have, srv.Name)
		if ts, ok := mcp.IsMCPTool(mcp.ToolName(srv.Name, "x")); ok {
			byToolName[ts] = srv.Name
		}
	}
	var allow []string
	for _, n := range servers {
		switch {
		case slices.Contains(have, n):
			allow = append(allow, n)
		case byToolName[n] != "":
			allow = append(allow, byToolName[n])
		default:
			return fmt.Errorf("mcp server %q is not configured; the servers are: %s", n, strings.Join(have, ", "))
		}
	}
	s.allow = allow
	return nil
}

// MCPConfigArgs are the --mcp-config flags a teammate process is given,
// so that it reads the same servers as its lead.
func (e *Env) MCPConfigArgs() []string {
	var out []string
	for _, c := range e.opts.MCPConfig {
		out = append(out, "--mcp-config", c)
	}
	if e.opts.MCPLazy {
		out = append(out, "--mcp-startup", "lazy")
	}
	return out
}

func (s *mcpServers) close() {
	if s != nil {
		s.mgr.Close()
	}
}
