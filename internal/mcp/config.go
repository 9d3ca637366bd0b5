package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/troupe-dev/troupe/internal/settings"
)

// Transport types a server entry may name. Claude Code's "type" field:
// absent means stdio when a command is given.
const (
	TypeStdio = "stdio"
	TypeHTTP  = "http"
	TypeSSE   = "sse"
)

// ProjectFile is the project's MCP configuration, at the workspace root.
const ProjectFile = ".mcp.json"

// Server is one configured MCP server, its variables expanded.
type Server struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// stdio
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// http and sse
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// Source names where the entry was read: a file path, "settings", or
	// "--mcp-config".
	Source string `json:"source"`
}

// Config is the set of servers read from every source, and what was wrong
// with the entries that could not be used. A bad entry never hides the
// good ones.
type Config struct {
	Servers []Server
	// Problems are the entries or files that were refused, each naming its
	// source and server.
	Problems []error
	// Warnings are entries used with a doubt: a variable that was not set
	// (left as written, as Claude Code does), a server replaced by a later
	// source.
	Warnings []string
}

// Server returns the server called name.
func (c *Config) Server(name string) (Server, bool) {
	for _, s := range c.Servers {
		if s.Name == name {
			return s, true
		}
	}
	return Server{}, false
}

// Loader reads configuration sources into one Config. Later sources
// replace earlier servers of the same name, so callers add them from the
// least to the most specific: user settings, .mcp.json, project settings,
// --mcp-config.
type Loader struct {
	// Lookup finds an environment variable for ${VAR} expansion; nil:
	// os.LookupEnv.
	Lookup func(string) (string, bool)
	cfg    Config
}

// Config returns what was loaded so far.
func (l *Loader) Config() *Config {
	c := l.cfg
	c.Servers = slices.Clone(c.Servers)
	return &c
}

// AddProject reads root/.mcp.json if it exists.
func (l *Loader) AddProject(root string) {
	path := filepath.Join(root, ProjectFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return
	}
	l.AddFile(path)
}

// AddFile reads a file of Claude Code's .mcp.json shape:
// {"mcpServers": {name: entry}}.
func (l *Loader) AddFile(path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		l.cfg.Problems = append(l.cfg.Problems, fmt.Errorf("%w: %v", ErrConfig, err))
		return
	}
	l.addJSON(path, data)
}

// AddFlag reads one --mcp-config value: a file path, or, as Claude Code
// accepts, the JSON text itself.
func (l *Loader) AddFlag(v string) {
	if t := strings.TrimSpace(v); strings.HasPrefix(t, "{") {
		l.addJSON("--mcp-config", []byte(t))
		return
	}
	l.AddFile(v)
}

func (l *Loader) addJSON(source string, data []byte) {
	var doc struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		l.cfg.Problems = append(l.cfg.Problems, fmt.Errorf("%w: %s: not a JSON object with mcpServers: %v", ErrConfig, source, err))
		return
	}
	l.AddServers(source, doc.MCPServers)
}

// AddSettings reads a settings file's raw "mcpServers" value (nil: none).
func (l *Loader) AddSettings(source string, raw json.RawMessage) {
	if len(raw) == 0 {
		return
	}
	var servers map[string]json.RawMessage
	if err := json.Unmarshal(raw, &servers); err != nil {
		l.cfg.Problems = append(l.cfg.Problems, fmt.Errorf("%w: %s: mcpServers is not an object of servers: %v", ErrConfig, source, err))
		return
	}
	l.AddServers(source, servers)
}

// AddServers reads the entries of an mcpServers object (from a settings
// file, say), naming source in every message.
func (l *Loader) AddServers(source string, servers map[string]json.RawMessage) {
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		s, warn, err := l.parseEntry(source, name, servers[name])
		if err != nil {
			l.cfg.Problems = append(l.cfg.Problems, err)
			continue
		}
		l.cfg.Warnings = append(l.cfg.Warnings, warn...)
		replaced := false
		for i, old := range l.cfg.Servers {
			if old.Name == s.Name {
				l.cfg.Warnings = append(l.cfg.Warnings, fmt.Sprintf("%s: server %q replaces the one from %s", source, name, old.Source))
				l.cfg.Servers[i] = s
				replaced = true
			}
		}
		if !replaced {
			l.cfg.Servers = append(l.cfg.Servers, s)
		}
	}
}

type rawEntry struct {
	Type    string            `json:"type"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

func (l *Loader) parseEntry(source, name string, raw json.RawMessage) (Server, []string, error) {
	bad := func(format string, args ...any) (Server, []string, error) {
		return Server{}, nil, fmt.Errorf("%w: %s: server %q: %s", ErrConfig, source, name, fmt.Sprintf(format, args...))
	}
	if strings.TrimSpace(name) == "" {
		return bad("empty server name")
	}
	if strings.Contains(name, "__") {
		// The tool names would be ambiguous: mcp__a__b__c.
		return bad("a server name may not contain \"__\"")
	}
	var e rawEntry
	if err := json.Unmarshal(raw, &e); err != nil {
		return bad("%v", err)
	}
	lookup := l.Lookup
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var unset []string
	exp := func(s string) string {
		out, miss := Expand(s, lookup)
		unset = append(unset, miss...)
		return out
	}
	s := Server{Name: name, Type: e.Type, Source: source}
	if s.Type == "" {
		switch {
		case e.Command != "":
			s.Type = TypeStdio
		case e.URL != "":
			return bad("a url needs \"type\": \"http\" or \"sse\"")
		default:
			return bad("neither command nor url")
		}
	}
	switch s.Type {
	case TypeStdio:
		if e.Command == "" {
			return bad("a stdio server needs a command")
		}
		s.Command = exp(e.Command)
		for _, a := range e.Args {
			s.Args = append(s.Args, exp(a))
		}
		if len(e.Env) > 0 {
			s.Env = map[string]string{}
			for k, v := range e.Env {
				s.Env[k] = exp(v)
			}
		}
	case TypeHTTP, TypeSSE:
		if e.URL == "" {
			return bad("a %s server needs a url", s.Type)
		}
		s.URL = exp(e.URL)
		if len(e.Headers) > 0 {
			s.Headers = map[string]string{}
			for k, v := range e.Headers {
				s.Headers[k] = exp(v)
			}
		}
	default:
		return bad("unknown type %q (want stdio, http or sse)", s.Type)
	}
	var warn []string
	for _, v := range dedup(unset) {
		warn = append(warn, fmt.Sprintf("%s: server %q: ${%s} is not set and has no default; left as written", source, name, v))
	}
	return s, warn, nil
}

func dedup(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// Expand replaces ${VAR} and ${VAR:-default} in s, as Claude Code does in
// .mcp.json: a bare $VAR is left alone, and a ${VAR} that is not set and has
// no default is left as written and returned in unset.
func Expand(s string, lookup func(string) (string, bool)) (out string, unset []string) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			break
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		body := s[i+2 : i+j]
		name, def, hasDef := strings.Cut(body, ":-")
		switch v, ok := lookup(name); {
		case !validVar(name):
			b.WriteString(s[i : i+j+1])
		case ok:
			b.WriteString(v)
		case hasDef:
			b.WriteString(def)
		default:
			b.WriteString(s[i : i+j+1])
			unset = append(unset, name)
		}
		s = s[i+j+1:]
	}
	return b.String(), unset
}

func validVar(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		ok := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9'
		if !ok {
			return false
		}
	}
	return true
}

// Select returns the servers of c whose names allow admits; a nil allow
// admits them all. It is how a pattern role or a spawn restricts the
// servers a teammate gets.
func Select(servers []Server, allow []string) []Server {
	if allow == nil {
		return slices.Clone(servers)
	}
	var out []Server
	for _, s := range servers {
		if slices.Contains(allow, s.Name) {
			out = append(out, s)
		}
	}
	return out
}

// FromSettings reads the MCP configuration of a session in workspace dir
// as Claude Code does: the mcpServers of the user's settings files, then
// dir/.mcp.json, then the mcpServers of the other settings files (in s's
// merge order), then each --mcp-config value. A later source replaces a
// server of the same name.
func FromSettings(dir string, s *settings.Settings, flags []string, lookup func(string) (string, bool)) *Config {
	l := &Loader{Lookup: lookup}
	user := func(f *settings.File) bool {
		return f.Source.Scope == settings.ScopeClaudeUser || f.Source.Scope == settings.ScopeUser
	}
	var files []*settings.File
	if s != nil {
		files = s.Files
	}
	for _, f := range files {
		if user(f) {
			l.AddSettings(f.Source.Path, f.MCPServers())
		}
	}
	l.AddProject(dir)
	for _, f := range files {
		if !user(f) {
			l.AddSettings(f.Source.Path, f.MCPServers())
		}
	}
	for _, v := range flags {
		l.AddFlag(v)
	}
	return l.Config()
}
