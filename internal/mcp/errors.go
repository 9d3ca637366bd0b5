// Package mcp speaks the Model Context Protocol both ways, over the official
// go-sdk. As a client it reads Claude Code's MCP configuration (.mcp.json,
// mcpServers in settings, --mcp-config), runs the servers (stdio,
// streamable HTTP, SSE) under a Manager shared by a team's in-process
// agents, and offers each server tool as a troupe tool named
// mcp__<server>__<tool>. As a server it gives any MCP client a member's
// seat on a team: the task board, the inbox, the roster (TeamServer).
//
// It must never depend on agents or teams (internal/agent, internal/team):
// teams wire its tools into their registries; the server side works on the
// store's interfaces alone.
package mcp

import "errors"

// Errors of this package.
var (
	// ErrConfig is wrapped by every error about a configuration file or
	// entry.
	ErrConfig = errors.New("mcp config")
	// ErrUnknownServer: a call or lookup named a server that is not
	// configured.
	ErrUnknownServer = errors.New("unknown MCP server")
	// ErrSchema is wrapped by the reason a tool's input schema is not
	// offered to the model.
	ErrSchema = errors.New("unusable input schema")
	// ErrClosed: the manager has been closed.
	ErrClosed = errors.New("mcp manager closed")
	// ErrCrashed: the server's connection ended during a call.
	ErrCrashed = errors.New("MCP server crashed")
	// ErrTimeout: a call outlived the tool timeout.
	ErrTimeout = errors.New("MCP tool call timed out")
	// ErrShutDown: the member this server seats has shut down.
	ErrShutDown = errors.New("member has shut down")
)
