// Package settings loads troupe's configuration files and merges them,
// keeping for every item the file it came from. The files are those of
// Claude Code, in its order of precedence, with troupe's own files beside
// the Claude Code file of the same reach. From the least to the most
// specific (a later file wins):
//
//  1. ~/.claude/settings.json (Claude Code's user settings;
//     $CLAUDE_CONFIG_DIR replaces ~/.claude)
//  2. <config dir>/troupe/settings.json (troupe's user settings,
//     ~/.config/troupe/settings.json on Linux)
//  3. <workspace>/.claude/settings.json (shared project settings)
//  4. <workspace>/.claude/settings.local.json (personal project settings)
//  5. <workspace>/.troupe/settings.json and .troupe/settings.local.json
//  6. the file (or JSON object) given with --settings
//  7. managed settings: /etc/claude-code/managed-settings.json on Linux,
//     /Library/Application Support/ClaudeCode/managed-settings.json on macOS
//
// Lists (hooks, rules, guard words, additional directories) are
// concatenated in that order; a single value (a mode, a default pattern, a
// model, one env variable) is taken from the last file that sets it, so
// managed settings win over everything. A managed deny rule cannot be
// lifted: rules of every file are enforced together, deny before ask before
// allow.
//
// Settings are read once, when a session starts; Snapshot records what was
// read (the files' bytes and the hashes of the hook scripts they name) so
// that teammates in other processes run on the same settings, and so that a
// change made during the run can be shown instead of applied.
//
// It only reads and describes configuration; it must never depend on
// agents, tools or teams.
package settings

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Scope says which kind of file an item came from.
type Scope string

// The scopes, from the least to the most specific.
const (
	ScopeClaudeUser Scope = "claude-user" // ~/.claude/settings.json
	ScopeUser       Scope = "user"        // <config dir>/troupe/settings.json
	ScopeClaude     Scope = "claude"      // <workspace>/.claude/settings*.json
	ScopeProject    Scope = "project"     // <workspace>/.troupe/settings*.json
	ScopeFlag       Scope = "flag"        // --settings
	ScopeManaged    Scope = "managed"     // managed-settings.json
)

// Source is where an item was configured.
type Source struct {
	Scope Scope  `json:"scope"`
	Path  string `json:"path"`
}

func (s Source) String() string {
	if s.Path == "" {
		return string(s.Scope)
	}
	return s.Path
}

// Hook event names, as Claude Code names them. Other events of Claude
// Code's (PostCompact, ConfigChange, …) are kept when configured; troupe
// does not fire them.
const (
	PreToolUse         = "PreToolUse"
	PostToolUse        = "PostToolUse"
	PostToolUseFailure = "PostToolUseFailure"
	PermissionRequest  = "PermissionRequest"
	UserPromptSubmit   = "UserPromptSubmit"
	Notification       = "Notification"
	Stop               = "Stop"
	SubagentStart      = "SubagentStart"
	SubagentStop       = "SubagentStop"
	PreCompact         = "PreCompact"
	SessionStart       = "SessionStart"
	SessionEnd         = "SessionEnd"
	TeammateIdle       = "TeammateIdle"
	TaskCreated        = "TaskCreated"
	TaskCompleted      = "TaskCompleted"
)

// Events are the hook events troupe fires.
var Events = []string{PreToolUse, PostToolUse, PostToolUseFailure, PermissionRequest, UserPromptSubmit,
	Notification, Stop, SubagentStart, SubagentStop, PreCompact, SessionStart, SessionEnd,
	TeammateIdle, TaskCreated, TaskCompleted}

// KnownEvent reports whether troupe fires the event.
func KnownEvent(name string) bool {
	for _, e := range Events {
		if e == name {
			return true
		}
	}
	return false
}

// Hook is one configured hook command, flattened out of its matcher group.
type Hook struct {
	Event   string        `json:"event"`
	Matcher string        `json:"matcher,omitempty"`
	Type    string        `json:"type"`              // "command" or "prompt" ("agent" runs as "prompt"); others are kept and not run
	Command string        `json:"command,omitempty"` // bash source
	Prompt  string        `json:"prompt,omitempty"`  // a prompt hook's question; $ARGUMENTS is the event
	Model   string        `json:"model,omitempty"`   // a prompt hook's model ("": the runner's)
	Timeout time.Duration `json:"timeout,omitempty"` // zero: the runner's default
	Source  Source        `json:"source"`
}

// Rule is one permission rule as written (parsed by package permission).
type Rule struct {
	Rule   string `json:"rule"`
	Source Source `json:"source"`
}

// Value is a single setting and where it was set; an empty Value is unset.
type Value struct {
	Value  string `json:"value"`
	Source Source `json:"source"`
}

// Set reports whether the value was configured.
func (v Value) Set() bool { return v.Value != "" }

// Word is one artifact-guard word.
type Word struct {
	Word   string `json:"word"`
	Source Source `json:"source"`
}

// Settings is the merged configuration.
type Settings struct {
	Hooks []Hook `json:"hooks"`

	Allow       []Rule `json:"allow"`
	Deny        []Rule `json:"deny"`
	Ask         []Rule `json:"ask"`
	DefaultMode Value  `json:"default_mode"`

	DefaultPattern Value `json:"default_pattern"`
	LeadModel      Value `json:"lead_model"`
	TeammateModel  Value `json:"teammate_model"`
	// Isolation is team.isolation (shared or worktree) and MergeMode
	// team.mergeMode (ff or merge): worktree isolation (issue 19).
	Isolation Value `json:"isolation"`
	MergeMode Value `json:"merge_mode"`
	// Leases is team.leases: what a write to a path another agent's
	// in-progress task holds does (refuse, warn or off; unset: refuse).
	Leases Value `json:"leases"`
	// MaxCoordinationShare is team.maxCoordinationShare, the share of the
	// team's tokens the lead's coordination may take before the lead is
	// told to batch (a number in (0, 1], as text; unset: the runtime's
	// default).
	MaxCoordinationShare Value `json:"max_coordination_share"`
	// Store is "store", the URL of the team store (unset: the file store
	// in the state directory).
	Store Value `json:"store"`
	// Remote is team.remote, the git remote teammates on other machines
	// clone (as --remote), and RemoteBase team.remoteBase, the branch
	// they start from and the lead merges into (unset: the checkout's
	// origin and current branch).
	Remote     Value `json:"remote"`
	RemoteBase Value `json:"remote_base"`

	GuardWords []Word `json:"guard_words"`
	// GuardExempt are workspace-relative globs of files the guard leaves
	// alone (a team's own operating guide, say).
	GuardExempt []Rule `json:"guard_exempt"`

	// Model is Claude Code's top-level "model": the lead's model, unless a
	// file at least as specific sets team.leadModel (LeadModel holds the
	// result of both).
	Model Value `json:"model"`
	// Env are the variables the "env" objects set, merged key by key (a
	// later file wins). They are meant for the processes tools start (bash,
	// hooks, MCP servers): the caller adds them to the scrubbed environment
	// it builds; this package sets nothing itself.
	Env map[string]string `json:"env,omitempty"`
	// EnvSources says which file set each variable of Env.
	EnvSources map[string]Source `json:"env_sources,omitempty"`
	// Sandbox is Claude Code's "sandbox" key: whether bash runs in the
	// sandbox (the last file that says wins) and what it may reach (lists
	// concatenated).
	Sandbox Sandbox `json:"sandbox"`
	// AdditionalDirectories are permissions.additionalDirectories: more
	// directories the file tools may reach, absolute and cleaned ("~" is the
	// home directory, a relative path is relative to the workspace), in
	// merge order without repeats.
	AdditionalDirectories []Rule `json:"additional_directories,omitempty"`

	// Files are the files that were read, in merge order.
	Files []*File `json:"files"`

	opts Options // what Load read, for Snapshot and ProtectedPaths
}

// Sandbox is the bash sandbox as the settings configure it.
type Sandbox struct {
	Enabled bool   `json:"enabled"`
	Source  Source `json:"source"` // the file that set Enabled
	// AllowedDomains: a non-empty list turns the sandbox's network on
	// (troupe does not filter by domain).
	AllowedDomains []string `json:"allowed_domains,omitempty"`
	// AllowWrite are more writable paths; DenyWrite paths kept read-only;
	// DenyRead paths hidden.
	AllowWrite []string `json:"allow_write,omitempty"`
	DenyWrite  []string `json:"deny_write,omitempty"`
	DenyRead   []string `json:"deny_read,omitempty"`
}

// HooksFor returns the hooks of one event, in merge order.
func (s *Settings) HooksFor(event string) []Hook {
	var out []Hook
	for _, h := range s.Hooks {
		if h.Event == event {
			out = append(out, h)
		}
	}
	return out
}

// Strings returns the rule texts.
func Strings(rules []Rule) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = r.Rule
	}
	return out
}

// Words returns the guard words.
func (s *Settings) Words() []string {
	out := make([]string, len(s.GuardWords))
	for i, w := range s.GuardWords {
		out[i] = w.Word
	}
	return out
}

// Warnings are the problems of every file that did not stop it loading.
func (s *Settings) Warnings() []string {
	var out []string
	for _, f := range s.Files {
		out = append(out, f.Warnings...)
	}
	return out
}

// File is one settings file as read.
type File struct {
	Source Source `json:"source"`
	// Unknown holds the top-level keys troupe does not use (see
	// UsedKeys), kept so nothing a user wrote is lost on the way; each is
	// named in Warnings.
	Unknown map[string]json.RawMessage `json:"-"`
	// Warnings are problems that did not stop the file loading.
	Warnings []string `json:"warnings,omitempty"`

	raw  rawFile
	data []byte // as read, for Snapshot
}

// UsedKeys are the top-level keys troupe reads. Any other key is kept in
// File.Unknown and named in a warning ("prices" is read by package usage);
// a package that starts honouring a key of Claude Code's schema ("sandbox",
// "mcpServers", …) adds it here.
var UsedKeys = []string{"$schema", "env", "hooks", "model", "permissions", "team", "artifactGuard", "prices", "sandbox", "mcpServers", "store"}

// rawFile is the schema on disk.
type rawFile struct {
	Hooks         map[string][]rawGroup `json:"hooks"`
	Permissions   *rawPermissions       `json:"permissions"`
	Env           map[string]string     `json:"env"`
	Model         string                `json:"model"`
	Team          *rawTeam              `json:"team"`
	ArtifactGuard *rawGuard             `json:"artifactGuard"`
	Sandbox       *rawSandbox           `json:"sandbox"`
	// Store is troupe's "store": the URL of the team store (file:DIR, or
	// nats://host:4222 for a team on several machines).
	Store string `json:"store"`
	// MCPServers is kept raw: package mcp reads it, and a bad entry must
	// not stop the rest of the file loading.
	MCPServers json.RawMessage `json:"mcpServers"`
}

// MCPServers returns the file's "mcpServers" object as written (nil when
// absent), for package mcp.
func (f *File) MCPServers() json.RawMessage { return f.raw.MCPServers }

// rawSandbox is Claude Code's "sandbox" key, as far as troupe honours it.
type rawSandbox struct {
	Enabled *bool `json:"enabled"`
	Network *struct {
		AllowedDomains []string `json:"allowedDomains"`
	} `json:"network"`
	Filesystem *struct {
		AllowWrite []string `json:"allowWrite"`
		DenyWrite  []string `json:"denyWrite"`
		DenyRead   []string `json:"denyRead"`
	} `json:"filesystem"`
}

type rawGroup struct {
	Matcher string    `json:"matcher"`
	Hooks   []rawHook `json:"hooks"`
}

type rawHook struct {
	Type    string   `json:"type"`
	Command string   `json:"command"`
	Prompt  string   `json:"prompt"`
	Model   string   `json:"model"`
	Timeout *float64 `json:"timeout"` // seconds, as in Claude Code
}

type rawPermissions struct {
	Allow       []string `json:"allow"`
	Deny        []string `json:"deny"`
	Ask         []string `json:"ask"`
	DefaultMode string   `json:"defaultMode"`

	AdditionalDirectories []string `json:"additionalDirectories"`
}

type rawTeam struct {
	DefaultPattern string `json:"defaultPattern"`
	LeadModel      string `json:"leadModel"`
	TeammateModel  string `json:"teammateModel"`
	Isolation      string `json:"isolation"`
	MergeMode      string `json:"mergeMode"`
	Leases         string `json:"leases"`
	Remote         string `json:"remote"`
	RemoteBase     string `json:"remoteBase"`

	MaxCoordinationShare *float64 `json:"maxCoordinationShare"`
}

type rawGuard struct {
	Words  []string `json:"words"`
	Exempt []string `json:"exempt"`
}

// LeaseModes are the values team.leases may take: what a write to a path
// another agent's in-progress task holds does.
var LeaseModes = []string{"refuse", "warn", "off"}

// Modes are the permission modes a defaultMode may name.
var Modes = []string{"default", "acceptEdits", "plan", "dontAsk", "bypassPermissions", "delegate"}

// ErrMalformed is wrapped by every error about a file's content.
var ErrMalformed = errors.New("malformed settings")

// Parse reads one settings file's content. An error names the file and
// the line and column of the problem.
func Parse(data []byte, src Source) (*File, error) {
	f := &File{Source: src}
	if len(bytes.TrimSpace(data)) == 0 {
		return f, nil // an empty file configures nothing
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, positioned(data, src, err)
	}
	if err := json.Unmarshal(data, &f.raw); err != nil {
		return nil, positioned(data, src, err)
	}
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if slices.Contains(UsedKeys, k) {
			continue
		}
		if f.Unknown == nil {
			f.Unknown = map[string]json.RawMessage{}
		}
		f.Unknown[k] = top[k]
		f.Warnings = append(f.Warnings, fmt.Sprintf("%s: key %q is not used by troupe; it is kept and ignored", src, k))
	}
	for event, groups := range f.raw.Hooks {
		if !KnownEvent(event) {
			f.Warnings = append(f.Warnings, fmt.Sprintf("%s: hook event %q is not one troupe fires; its hooks are kept and never run", src, event))
		}
		for gi, g := range groups {
			for hi, h := range g.Hooks {
				switch {
				case h.Type == "":
					return nil, fmt.Errorf("%w: %s: hooks.%s[%d].hooks[%d]: no \"type\" (want \"command\")", ErrMalformed, src, event, gi, hi)
				case h.Type == "command" && strings.TrimSpace(h.Command) == "":
					return nil, fmt.Errorf("%w: %s: hooks.%s[%d].hooks[%d]: empty \"command\"", ErrMalformed, src, event, gi, hi)
				case h.Timeout != nil && *h.Timeout <= 0:
					return nil, fmt.Errorf("%w: %s: hooks.%s[%d].hooks[%d]: timeout %v: want a positive number of seconds", ErrMalformed, src, event, gi, hi, *h.Timeout)
				case (h.Type == "prompt" || h.Type == "agent") && strings.TrimSpace(h.Prompt) == "":
					f.Warnings = append(f.Warnings, fmt.Sprintf("%s: hooks.%s[%d].hooks[%d]: %s hook without a \"prompt\"; it never runs", src, event, gi, hi, h.Type))
				case h.Type != "command" && h.Type != "prompt" && h.Type != "agent":
					f.Warnings = append(f.Warnings, fmt.Sprintf("%s: hooks.%s[%d].hooks[%d]: hook type %q is not supported; only \"command\" hooks run", src, event, gi, hi, h.Type))
				}
			}
		}
	}
	if t := f.raw.Team; t != nil && t.MaxCoordinationShare != nil && (*t.MaxCoordinationShare <= 0 || *t.MaxCoordinationShare > 1) {
		return nil, fmt.Errorf("%w: %s: team.maxCoordinationShare %v is out of range (want a share above 0 and at most 1)", ErrMalformed, src, *t.MaxCoordinationShare)
	}
	if t := f.raw.Team; t != nil && t.Leases != "" && !slices.Contains(LeaseModes, t.Leases) {
		return nil, fmt.Errorf("%w: %s: team.leases %q is unknown (want one of %s)", ErrMalformed, src, t.Leases, strings.Join(LeaseModes, ", "))
	}
	if p := f.raw.Permissions; p != nil && p.DefaultMode != "" && !validMode(p.DefaultMode) {
		// Never a silent fall back to some other mode: a mode the user
		// mistyped must stop the run, not loosen or tighten it unseen.
		return nil, fmt.Errorf("%w: %s: permissions.defaultMode %q is unknown (want one of %s)", ErrMalformed, src, p.DefaultMode, strings.Join(Modes, ", "))
	}
	return f, nil
}

func validMode(m string) bool {
	for _, x := range Modes {
		if x == m {
			return true
		}
	}
	return false
}

// positioned turns a decoding error into one naming the file, line and
// column.
func positioned(data []byte, src Source, err error) error {
	var off int64 = -1
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		off = syn.Offset
	case errors.As(err, &typ):
		off = typ.Offset
		if typ.Field != "" {
			err = fmt.Errorf("%s: got a JSON %s, want %s", typ.Field, typ.Value, typ.Type)
		}
	}
	if off < 0 {
		return fmt.Errorf("%w: %s: %v", ErrMalformed, src, err)
	}
	line, col := lineCol(data, off)
	return fmt.Errorf("%w: %s:%d:%d: %v", ErrMalformed, src, line, col, err)
}

// lineCol converts a byte offset to a 1-based line and column.
func lineCol(data []byte, off int64) (int, int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - (bytes.LastIndexByte(before, '\n') + 1)
	if col < 1 {
		col = 1
	}
	return line, col
}

// Merge combines files, the least specific first.
func Merge(files ...*File) *Settings {
	s := &Settings{}
	for _, f := range files {
		if f == nil {
			continue
		}
		s.Files = append(s.Files, f)
		src := f.Source
		events := make([]string, 0, len(f.raw.Hooks))
		for e := range f.raw.Hooks {
			events = append(events, e)
		}
		sort.Slice(events, func(i, j int) bool {
			return eventOrder(events[i]) < eventOrder(events[j]) || eventOrder(events[i]) == eventOrder(events[j]) && events[i] < events[j]
		})
		for _, e := range events {
			for _, g := range f.raw.Hooks[e] {
				for _, h := range g.Hooks {
					hk := Hook{Event: e, Matcher: g.Matcher, Type: h.Type, Command: h.Command, Prompt: h.Prompt, Model: h.Model, Source: src}
					if h.Timeout != nil {
						hk.Timeout = time.Duration(*h.Timeout * float64(time.Second))
					}
					s.Hooks = append(s.Hooks, hk)
				}
			}
		}
		if p := f.raw.Permissions; p != nil {
			s.Allow = appendRules(s.Allow, p.Allow, src)
			s.Deny = appendRules(s.Deny, p.Deny, src)
			s.Ask = appendRules(s.Ask, p.Ask, src)
			setValue(&s.DefaultMode, p.DefaultMode, src)
		}
		setValue(&s.Model, f.raw.Model, src)
		setValue(&s.Store, f.raw.Store, src)
		setValue(&s.LeadModel, f.raw.Model, src)
		if t := f.raw.Team; t != nil {
			setValue(&s.DefaultPattern, t.DefaultPattern, src)
			setValue(&s.LeadModel, t.LeadModel, src) // troupe's own key wins within a file
			setValue(&s.TeammateModel, t.TeammateModel, src)
			setValue(&s.Isolation, t.Isolation, src)
			setValue(&s.MergeMode, t.MergeMode, src)
			setValue(&s.Leases, t.Leases, src)
			setValue(&s.Remote, t.Remote, src)
			setValue(&s.RemoteBase, t.RemoteBase, src)
			if t.MaxCoordinationShare != nil {
				setValue(&s.MaxCoordinationShare, strconv.FormatFloat(*t.MaxCoordinationShare, 'g', -1, 64), src)
			}
		}
		if sb := f.raw.Sandbox; sb != nil {
			if sb.Enabled != nil {
				s.Sandbox.Enabled, s.Sandbox.Source = *sb.Enabled, src
			}
			if sb.Network != nil {
				s.Sandbox.AllowedDomains = append(s.Sandbox.AllowedDomains, sb.Network.AllowedDomains...)
			}
			if fs := sb.Filesystem; fs != nil {
				s.Sandbox.AllowWrite = append(s.Sandbox.AllowWrite, fs.AllowWrite...)
				s.Sandbox.DenyWrite = append(s.Sandbox.DenyWrite, fs.DenyWrite...)
				s.Sandbox.DenyRead = append(s.Sandbox.DenyRead, fs.DenyRead...)
			}
		}
		if len(f.raw.Env) > 0 {
			if s.Env == nil {
				s.Env, s.EnvSources = map[string]string{}, map[string]Source{}
			}
			for k, v := range f.raw.Env {
				s.Env[k], s.EnvSources[k] = v, src
			}
		}
		if p := f.raw.Permissions; p != nil {
			for _, d := range p.AdditionalDirectories {
				if d = strings.TrimSpace(d); d != "" && !slices.ContainsFunc(s.AdditionalDirectories, func(r Rule) bool { return r.Rule == d }) {
					s.AdditionalDirectories = append(s.AdditionalDirectories, Rule{Rule: d, Source: src})
				}
			}
		}
		if g := f.raw.ArtifactGuard; g != nil {
			for _, w := range g.Words {
				if w = strings.TrimSpace(w); w != "" {
					s.GuardWords = append(s.GuardWords, Word{Word: w, Source: src})
				}
			}
			s.GuardExempt = appendRules(s.GuardExempt, g.Exempt, src)
		}
	}
	return s
}

func eventOrder(e string) int {
	for i, x := range Events {
		if x == e {
			return i
		}
	}
	return len(Events)
}

func appendRules(dst []Rule, rules []string, src Source) []Rule {
	for _, r := range rules {
		if r = strings.TrimSpace(r); r != "" {
			dst = append(dst, Rule{Rule: r, Source: src})
		}
	}
	return dst
}

func setValue(v *Value, s string, src Source) {
	if s = strings.TrimSpace(s); s != "" {
		*v = Value{Value: s, Source: src}
	}
}

// Options say which files Load reads.
type Options struct {
	// Workspace is the directory holding .troupe/ and .claude/.
	Workspace string
	// Home is the home directory ("~" in paths, ~/.claude); empty means
	// os.UserHomeDir(). Tests point it at a temporary directory.
	Home string
	// ClaudeDir is the user's Claude Code directory; empty means
	// $CLAUDE_CONFIG_DIR, else <Home>/.claude.
	ClaudeDir string
	// UserFile is troupe's user settings file; empty means
	// os.UserConfigDir()/troupe/settings.json.
	UserFile string
	// NoUser skips the user's files, Claude Code's and troupe's (tests,
	// sandboxes).
	NoUser bool
	// ManagedFile replaces the managed settings file of the system
	// (ManagedFile()); tests point it at a temporary file.
	ManagedFile string
	// NoManaged skips managed settings.
	NoManaged bool
	// Flag is --settings: a file, or a JSON object given inline. It ranks
	// below managed settings and above every other file.
	Flag string
	// Extra are more --settings files, ranked like Flag, in order.
	Extra []string
}

// FlagSource is the Source.Path of settings given inline with --settings.
const FlagSource = "--settings"

// UserFile is the default user settings file, or "" when the system has no
// configuration directory.
func UserFile() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "troupe", "settings.json")
}

// ManagedFile is where Claude Code's managed (organisation) settings live on
// this system.
func ManagedFile() string {
	switch runtime.GOOS {
	case "darwin":
		return "/Library/Application Support/ClaudeCode/managed-settings.json"
	case "windows":
		return `C:\ProgramData\ClaudeCode\managed-settings.json`
	}
	return "/etc/claude-code/managed-settings.json"
}

// HomeDir is the home directory the options use, or "" when unknown.
func (o Options) HomeDir() string {
	if o.Home != "" {
		return o.Home
	}
	h, _ := os.UserHomeDir()
	return h
}

// ClaudeUserDir is the user's Claude Code directory (~/.claude), or "" when
// there is no home directory.
func (o Options) ClaudeUserDir() string {
	if o.ClaudeDir != "" {
		return o.ClaudeDir
	}
	if d := os.Getenv("CLAUDE_CONFIG_DIR"); d != "" && o.Home == "" {
		return d
	}
	if h := o.HomeDir(); h != "" {
		return filepath.Join(h, ".claude")
	}
	return ""
}

// inlineFlag reports whether --settings was given a JSON object rather than
// a file name.
func (o Options) inlineFlag() bool {
	return strings.HasPrefix(strings.TrimSpace(o.Flag), "{")
}

// Paths returns the files Load reads, in merge order, whether or not they
// exist. Inline --settings JSON has the Path FlagSource.
func (o Options) Paths() []Source {
	var out []Source
	if !o.NoUser {
		if d := o.ClaudeUserDir(); d != "" {
			out = append(out, Source{Scope: ScopeClaudeUser, Path: filepath.Join(d, "settings.json")})
		}
		u := o.UserFile
		if u == "" {
			u = UserFile()
		}
		if u != "" {
			out = append(out, Source{Scope: ScopeUser, Path: u})
		}
	}
	if o.Workspace != "" {
		out = append(out,
			Source{Scope: ScopeClaude, Path: filepath.Join(o.Workspace, ".claude", "settings.json")},
			Source{Scope: ScopeClaude, Path: filepath.Join(o.Workspace, ".claude", "settings.local.json")},
			Source{Scope: ScopeProject, Path: filepath.Join(o.Workspace, ".troupe", "settings.json")},
			Source{Scope: ScopeProject, Path: filepath.Join(o.Workspace, ".troupe", "settings.local.json")},
		)
	}
	switch {
	case o.inlineFlag():
		out = append(out, Source{Scope: ScopeFlag, Path: FlagSource})
	case o.Flag != "":
		f := o.Flag
		if abs, err := filepath.Abs(f); err == nil {
			f = abs
		}
		out = append(out, Source{Scope: ScopeFlag, Path: f})
	}
	for _, f := range o.Extra {
		if abs, err := filepath.Abs(f); err == nil {
			f = abs
		}
		out = append(out, Source{Scope: ScopeFlag, Path: f})
	}
	if !o.NoManaged {
		m := o.ManagedFile
		if m == "" {
			m = ManagedFile()
		}
		out = append(out, Source{Scope: ScopeManaged, Path: m})
	}
	return out
}

// Load reads and merges the files of opts that exist. A file that exists
// and cannot be read or parsed is an error naming it; missing files are
// skipped, except a --settings file, which must exist.
func Load(opts Options) (*Settings, error) {
	var files []*File
	for _, src := range opts.Paths() {
		var data []byte
		var err error
		if src.Path == FlagSource {
			data = []byte(opts.Flag)
		} else {
			data, err = os.ReadFile(src.Path)
		}
		if errors.Is(err, fs.ErrNotExist) && src.Scope != ScopeFlag {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read settings: %w", err)
		}
		f, err := Parse(data, src)
		if err != nil {
			return nil, err
		}
		f.data = data
		files = append(files, f)
	}
	s := Merge(files...)
	s.resolve(opts)
	return s, nil
}

// resolve makes the paths of s absolute and remembers opts for Snapshot.
func (s *Settings) resolve(opts Options) {
	s.opts = opts
	home := opts.HomeDir()
	for i, d := range s.AdditionalDirectories {
		s.AdditionalDirectories[i].Rule = ExpandPath(d.Rule, home, opts.Workspace)
	}
	// Two spellings of one directory are one directory.
	seen := map[string]bool{}
	out := s.AdditionalDirectories[:0]
	for _, d := range s.AdditionalDirectories {
		if !seen[d.Rule] {
			seen[d.Rule] = true
			out = append(out, d)
		}
	}
	s.AdditionalDirectories = out
}

// ExpandPath makes p absolute: a leading "~" is home, a relative path is
// relative to base.
func ExpandPath(p, home, base string) string {
	switch {
	case p == "~" && home != "":
		p = home
	case strings.HasPrefix(p, "~/") && home != "":
		p = filepath.Join(home, p[2:])
	case !filepath.IsAbs(p) && base != "":
		p = filepath.Join(base, p)
	}
	return filepath.Clean(p)
}
