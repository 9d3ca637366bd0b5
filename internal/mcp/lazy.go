package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Lazy start. A model must be offered a server's tools before it can call
// one, so a server whose tool list is not known has to start with the
// session. With Options.Lazy and Options.ToolCache, the list a server gave
// the last time it started (under the same configuration) is kept in the
// cache directory; a session then offers the cached tools without starting
// the server, and the server starts at the first call of one of them. A
// changed configuration, or no cache yet, starts it with the session as
// before, which writes the cache for the next one.

// cachedTools is a cache file: the configuration it was listed under and
// the tools.
type cachedTools struct {
	Config string      `json:"config"`
	Tools  []*sdk.Tool `json:"tools"`
}

// configKey identifies a server's configuration: any change to how it is
// started or reached invalidates its cached tools.
func configKey(s Server) string {
	s.Source = ""
	b, _ := json.Marshal(s)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (m *Manager) cachePath(s Server) string {
	return filepath.Join(m.opts.ToolCache, sanitize(s.Name)+".tools.json")
}

// cached returns the tools server s listed the last time it started under
// the same configuration, if the cache has them.
func (m *Manager) cached(s Server) ([]*sdk.Tool, bool) {
	if !m.opts.Lazy || m.opts.ToolCache == "" {
		return nil, false
	}
	data, err := os.ReadFile(m.cachePath(s))
	if err != nil {
		return nil, false
	}
	var c cachedTools
	if json.Unmarshal(data, &c) != nil || c.Config != configKey(s) || c.Tools == nil {
		return nil, false
	}
	return c.Tools, true
}

// remember writes the tools server s listed, for a later lazy session. A
// failure to write only costs that session a start.
func (m *Manager) remember(s Server, tools []*sdk.Tool) {
	if m.opts.ToolCache == "" {
		return
	}
	data, err := json.Marshal(cachedTools{Config: configKey(s), Tools: tools})
	if err != nil {
		return
	}
	if err := os.MkdirAll(m.opts.ToolCache, 0o700); err != nil {
		m.opts.Logger.Warn("mcp tool cache", "err", err)
		return
	}
	tmp := m.cachePath(s) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err == nil {
		err = os.Rename(tmp, m.cachePath(s))
		if err != nil {
			m.opts.Logger.Warn("mcp tool cache", "err", err)
		}
	}
}
