// Package settings loads troupe's configuration files and merges them,
// keeping for every item the file it came from: the user's
// <config dir>/troupe/settings.json, then the workspace's
// .claude/settings.json and .claude/settings.local.json (read in Claude
// Code's schema so that users coming from it keep their hooks and rules),
// then .troupe/settings.json and .troupe/settings.local.json. Lists (hooks,
// rules, guard words) are concatenated in that order; a single value (a
// mode, a default pattern, a model) is taken from the last file that sets it.
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
	"sort"
	"strings"
	"time"
)

// Scope says which kind of file an item came from.
type Scope string

// The scopes, from the least to the most specific.
const (
	ScopeUser    Scope = "user"    // <config dir>/troupe/settings.json
	ScopeClaude  Scope = "claude"  // <workspace>/.claude/settings*.json
	ScopeProject Scope = "project" // <workspace>/.troupe/settings*.json
	ScopeFlag    Scope = "flag"    // --settings FILE, and rules given as flags
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

// Hook event names. Claude Code's other events (SessionStart, PreCompact,
// Notification, …) are kept when configured; troupe does not fire them.
const (
	PreToolUse       = "PreToolUse"
	PostToolUse      = "PostToolUse"
	UserPromptSubmit = "UserPromptSubmit"
	Stop             = "Stop"
	SubagentStop     = "SubagentStop"
	TeammateIdle     = "TeammateIdle"
	TaskCreated      = "TaskCreated"
	TaskCompleted    = "TaskCompleted"
)

// Events are the hook events troupe fires.
var Events = []string{PreToolUse, PostToolUse, UserPromptSubmit, Stop, SubagentStop, TeammateIdle, TaskCreated, TaskCompleted}

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
	Type    string        `json:"type"`              // "command"; other types are kept and not run
	Command string        `json:"command,omitempty"` // bash source
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

	GuardWords []Word `json:"guard_words"`
	// GuardExempt are workspace-relative globs of files the guard leaves
	// alone (a team's own operating guide, say).
	GuardExempt []Rule `json:"guard_exempt"`

	// Files are the files that were read, in merge order.
	Files []*File `json:"files"`
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
	// Unknown holds the top-level keys troupe does not use ("env",
	// "model", …), kept so nothing a user wrote is lost on the way.
	Unknown map[string]json.RawMessage `json:"-"`
	// Warnings are problems that did not stop the file loading.
	Warnings []string `json:"warnings,omitempty"`

	raw rawFile
}

// rawFile is the schema on disk.
type rawFile struct {
	Hooks         map[string][]rawGroup `json:"hooks"`
	Permissions   *rawPermissions       `json:"permissions"`
	Team          *rawTeam              `json:"team"`
	ArtifactGuard *rawGuard             `json:"artifactGuard"`
}

type rawGroup struct {
	Matcher string    `json:"matcher"`
	Hooks   []rawHook `json:"hooks"`
}

type rawHook struct {
	Type    string   `json:"type"`
	Command string   `json:"command"`
	Timeout *float64 `json:"timeout"` // seconds, as in Claude Code
}

type rawPermissions struct {
	Allow       []string `json:"allow"`
	Deny        []string `json:"deny"`
	Ask         []string `json:"ask"`
	DefaultMode string   `json:"defaultMode"`
}

type rawTeam struct {
	DefaultPattern string `json:"defaultPattern"`
	LeadModel      string `json:"leadModel"`
	TeammateModel  string `json:"teammateModel"`
}

type rawGuard struct {
	Words  []string `json:"words"`
	Exempt []string `json:"exempt"`
}

// Modes are the permission modes a defaultMode may name.
var Modes = []string{"default", "acceptEdits", "plan", "bypassPermissions", "delegate"}

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
	for k, v := range top {
		switch k {
		case "hooks", "permissions", "team", "artifactGuard":
		default:
			if f.Unknown == nil {
				f.Unknown = map[string]json.RawMessage{}
			}
			f.Unknown[k] = v
		}
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
				case h.Type != "command":
					f.Warnings = append(f.Warnings, fmt.Sprintf("%s: hooks.%s[%d].hooks[%d]: hook type %q is not supported; only \"command\" hooks run", src, event, gi, hi, h.Type))
				}
			}
		}
	}
	if p := f.raw.Permissions; p != nil && p.DefaultMode != "" && !validMode(p.DefaultMode) {
		f.Warnings = append(f.Warnings, fmt.Sprintf("%s: permissions.defaultMode %q is unknown (want one of %s); ignored", src, p.DefaultMode, strings.Join(Modes, ", ")))
		p.DefaultMode = ""
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
					hk := Hook{Event: e, Matcher: g.Matcher, Type: h.Type, Command: h.Command, Source: src}
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
		if t := f.raw.Team; t != nil {
			setValue(&s.DefaultPattern, t.DefaultPattern, src)
			setValue(&s.LeadModel, t.LeadModel, src)
			setValue(&s.TeammateModel, t.TeammateModel, src)
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
	// UserFile is the user's settings file; empty means
	// os.UserConfigDir()/troupe/settings.json.
	UserFile string
	// NoUser skips the user's file (tests, sandboxes).
	NoUser bool
	// Extra are more files (--settings FILE), read last: they override
	// every other file, as Claude Code's command line does.
	Extra []string
}

// UserFile is the default user settings file, or "" when the system has no
// configuration directory.
func UserFile() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "troupe", "settings.json")
}

// Paths returns the files Load reads, in merge order, whether or not they
// exist.
func (o Options) Paths() []Source {
	var out []Source
	if !o.NoUser {
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
	for _, p := range o.Extra {
		out = append(out, Source{Scope: ScopeFlag, Path: p})
	}
	return out
}

// Load reads and merges the files of opts that exist. A file that exists
// and cannot be read or parsed is an error naming it; missing files are
// skipped.
func Load(opts Options) (*Settings, error) {
	var files []*File
	for _, src := range opts.Paths() {
		data, err := os.ReadFile(src.Path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read settings: %w", err)
		}
		f, err := Parse(data, src)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return Merge(files...), nil
}
