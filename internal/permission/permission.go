// Package permission decides whether an agent's tool call may run: allow,
// deny and ask rules in Claude Code's syntax (Bash(git status:*),
// Edit(src/**), Read(**), WebFetch), evaluated deny first, and the
// per-agent permission modes (default, acceptEdits, plan,
// bypassPermissions, delegate).
//
// Evaluation order for a call:
//  1. a deny rule that matches refuses it;
//  2. the mode's hard limits refuse it: plan mode refuses writing tools and
//     delegate mode everything but management tools, and no allow rule can
//     lift them (seed 004: an allow rule must never undo the lead's limit);
//  3. an ask rule that matches asks (in bypassPermissions nothing asks);
//  4. an allow rule that matches allows;
//  5. the mode's default: default asks before writing tools and bash,
//     acceptEdits before bash only, the others allow.
//
// It knows agent calls but nothing of teams; who is asked is the caller's
// business (GateConfig.Ask).
package permission

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/permission/shellwords"
	"github.com/troupe-dev/troupe/internal/settings"
)

// Mode is an agent's permission mode, set at spawn.
type Mode string

// The modes.
const (
	Default     Mode = "default"           // writing tools and bash ask first
	AcceptEdits Mode = "acceptEdits"       // file edits allowed; bash asks
	Plan        Mode = "plan"              // read-only (until a plan is approved)
	Bypass      Mode = "bypassPermissions" // nothing asks; deny rules still refuse
	Delegate    Mode = "delegate"          // the lead only: management tools only
)

// Modes are every mode; TeammateModes those a teammate may have (delegate
// is the lead's).
var (
	Modes         = []Mode{Default, AcceptEdits, Plan, Bypass, Delegate}
	TeammateModes = []Mode{Default, AcceptEdits, Plan, Bypass}
)

// ErrBadMode and ErrBadRule are wrapped by parse errors.
var (
	ErrBadMode = errors.New("unknown permission mode")
	ErrBadRule = errors.New("malformed permission rule")
)

// ParseMode checks a mode name; "" is Default.
func ParseMode(s string) (Mode, error) {
	if s == "" {
		return Default, nil
	}
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	names := make([]string, len(Modes))
	for i, m := range Modes {
		names[i] = string(m)
	}
	return "", fmt.Errorf("%w %q (want one of %s)", ErrBadMode, s, strings.Join(names, ", "))
}

// writingTools change the workspace or run commands.
var writingTools = map[string]bool{"bash": true, "write_file": true, "edit_file": true}

// managementTools are the lead's tools in delegate mode.
var managementTools = map[string]bool{
	"TeamCreate": true, "TeamDelete": true, "Task": true, "SendMessage": true,
	"TaskCreate": true, "TaskUpdate": true, "TaskList": true, "TaskGet": true,
	"TaskOutput": true, "TaskStop": true, "TodoWrite": true,
}

// Writes reports whether a tool changes the workspace or runs commands.
func Writes(tool string) bool { return writingTools[tool] }

// Manages reports whether a tool is one of the team-management tools a
// lead keeps in delegate mode.
func Manages(tool string) bool { return managementTools[tool] }

// claudeNames maps troupe's tool names to Claude Code's.
var claudeNames = map[string]string{
	"bash": "Bash", "edit_file": "Edit", "write_file": "Write", "read_file": "Read",
	"glob": "Glob", "grep": "Grep",
}

// ClaudeName is Claude Code's name for a troupe tool ("Bash" for "bash"),
// or the name itself when both agree.
func ClaudeName(tool string) string {
	if n, ok := claudeNames[tool]; ok {
		return n
	}
	return tool
}

// ruleTools maps a rule's tool name to the troupe tools it covers. As in
// Claude Code, Edit rules cover every tool that edits files, and Read rules
// the tools that read them.
var ruleTools = map[string][]string{
	"Bash": {"bash"}, "Edit": {"edit_file", "write_file"}, "MultiEdit": {"edit_file"},
	"Write": {"write_file"}, "Read": {"read_file", "glob", "grep"},
	"Glob": {"glob"}, "Grep": {"grep"},
}

// Rule is one parsed rule.
type Rule struct {
	Raw    string // as written
	Tool   string // as written: "Bash", "edit_file", "WebFetch"
	Spec   string // inside the parentheses; "" for a bare tool name
	Source string // where it was configured, for messages

	tools   []string // troupe tools it covers
	kind    specKind
	prefix  []string       // Bash(x y:*)
	exact   []string       // Bash(x y)
	wild    *regexp.Regexp // Bash(x * y)
	pattern string         // path rules: a doublestar pattern, workspace-relative or absolute
}

type specKind int

const (
	specAll specKind = iota
	specPrefix
	specExact
	specWild
	specPath
	specOther // a specifier troupe cannot interpret: never matches
)

var toolName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.:-]*$`)

// ParseRule parses "Tool" or "Tool(specifier)".
func ParseRule(raw string) (Rule, error) {
	s := strings.TrimSpace(raw)
	r := Rule{Raw: s, Tool: s}
	if i := strings.IndexByte(s, '('); i >= 0 {
		if !strings.HasSuffix(s, ")") {
			return Rule{}, fmt.Errorf("%w %q: no closing parenthesis", ErrBadRule, raw)
		}
		r.Tool, r.Spec = s[:i], s[i+1:len(s)-1]
		if strings.TrimSpace(r.Spec) == "" {
			return Rule{}, fmt.Errorf("%w %q: empty parentheses (write %s alone to cover every call)", ErrBadRule, raw, r.Tool)
		}
	}
	if !toolName.MatchString(r.Tool) {
		return Rule{}, fmt.Errorf("%w %q: %q is not a tool name", ErrBadRule, raw, r.Tool)
	}
	if ts, ok := ruleTools[r.Tool]; ok {
		r.tools = ts
	} else {
		r.tools = []string{r.Tool}
	}
	if r.Spec == "" || r.Spec == "*" || r.Spec == "**" && !pathTool(r.tools[0]) {
		r.kind = specAll
		return r, nil
	}
	switch {
	case r.tools[0] == "bash":
		if err := r.parseCommand(); err != nil {
			return Rule{}, fmt.Errorf("%w %q: %v", ErrBadRule, raw, err)
		}
	case pathTool(r.tools[0]):
		if err := r.parsePath(); err != nil {
			return Rule{}, fmt.Errorf("%w %q: %v", ErrBadRule, raw, err)
		}
	default:
		r.kind = specOther
	}
	return r, nil
}

func pathTool(t string) bool {
	switch t {
	case "read_file", "write_file", "edit_file", "glob", "grep":
		return true
	}
	return false
}

func (r *Rule) parseCommand() error {
	spec := strings.TrimSpace(r.Spec)
	switch {
	case strings.HasSuffix(spec, ":*"):
		r.kind, r.prefix = specPrefix, shellwords.Words(strings.TrimSuffix(spec, ":*"))
		if len(r.prefix) == 0 {
			return errors.New("nothing before :*")
		}
	case strings.Contains(spec, "*"):
		parts := strings.Split(strings.Join(shellwords.Words(spec), " "), "*")
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		r.kind, r.wild = specWild, regexp.MustCompile(`^`+strings.Join(parts, `.*`)+`$`)
	default:
		r.kind, r.exact = specExact, shellwords.Words(spec)
	}
	return nil
}

func (r *Rule) parsePath() error {
	p := strings.TrimSpace(r.Spec)
	switch {
	case strings.HasPrefix(p, "//"):
		p = p[1:] // absolute
	case strings.HasPrefix(p, "~/"):
		home, err := os.UserHomeDir()
		if err != nil {
			return fmt.Errorf("no home directory for ~: %v", err)
		}
		p = filepath.ToSlash(filepath.Join(home, p[2:]))
	case strings.HasPrefix(p, "/"):
		p = strings.TrimLeft(p, "/") // rooted at the workspace
	default:
		p = strings.TrimPrefix(p, "./")
		if !strings.Contains(strings.TrimSuffix(p, "/"), "/") {
			p = "**/" + p // gitignore style: a bare name matches at any depth
		}
	}
	if strings.HasSuffix(p, "/") {
		p += "**"
	}
	if !doublestar.ValidatePattern(p) {
		return fmt.Errorf("%q is not a valid glob", r.Spec)
	}
	r.kind, r.pattern = specPath, p
	return nil
}

// covers reports whether the rule names the tool.
func (r *Rule) covers(tool string) bool {
	for _, t := range r.tools {
		if t == tool {
			return true
		}
	}
	return false
}

// matchWords matches a bash rule against one simple command.
func (r *Rule) matchWords(words []string) bool {
	switch r.kind {
	case specPrefix:
		if len(words) < len(r.prefix) {
			return false
		}
		for i, w := range r.prefix {
			if words[i] != w {
				return false
			}
		}
		return true
	case specExact:
		if len(words) != len(r.exact) {
			return false
		}
		for i, w := range r.exact {
			if words[i] != w {
				return false
			}
		}
		return true
	case specWild:
		return r.wild.MatchString(strings.Join(words, " "))
	}
	return false
}

// Effect is a verdict's outcome.
type Effect string

// The effects.
const (
	Allow Effect = "allow"
	Ask   Effect = "ask"
	Deny  Effect = "deny"
)

// Verdict is the decision for one call and why.
type Verdict struct {
	Effect Effect `json:"effect"`
	// Rule is the rule that decided, "" when the mode did.
	Rule   string `json:"rule,omitempty"`
	Source string `json:"source,omitempty"`
	Mode   Mode   `json:"mode"`
	// Reason says why in words a model or a human understands.
	Reason string `json:"reason"`
	// Hard reports a refusal no hook or answer may lift: a deny rule or
	// a plan/delegate limit.
	Hard bool `json:"hard,omitempty"`
}

// Policy holds the rules of one workspace.
type Policy struct {
	workspace string
	deny      []Rule
	ask       []Rule
	allow     []Rule
}

// New parses rules; an error names the first malformed one.
func New(workspace string, allow, deny, ask []settings.Rule) (*Policy, error) {
	p := &Policy{workspace: workspace}
	for _, set := range []struct {
		in  []settings.Rule
		out *[]Rule
	}{{deny, &p.deny}, {ask, &p.ask}, {allow, &p.allow}} {
		for _, sr := range set.in {
			r, err := ParseRule(sr.Rule)
			if err != nil {
				if sr.Source.Path != "" {
					return nil, fmt.Errorf("%s: %w", sr.Source, err)
				}
				return nil, err
			}
			r.Source = sr.Source.String()
			*set.out = append(*set.out, r)
		}
	}
	return p, nil
}

// FromSettings builds the policy of merged settings.
func FromSettings(workspace string, s *settings.Settings) (*Policy, error) {
	return New(workspace, s.Allow, s.Deny, s.Ask)
}

// Rules parses plain rule strings (tests, flags).
func Rules(rules ...string) []settings.Rule {
	out := make([]settings.Rule, len(rules))
	for i, r := range rules {
		out[i] = settings.Rule{Rule: r}
	}
	return out
}

// Check decides a call in a mode. A nil Policy has no rules.
func (p *Policy) Check(mode Mode, call agent.Call) Verdict {
	if p == nil {
		p = &Policy{}
	}
	if mode == "" {
		mode = Default
	}
	subj := p.subject(call)
	if r, ok := p.match(p.deny, call.Name, subj, false); ok {
		return Verdict{Effect: Deny, Rule: r.Raw, Source: r.Source, Mode: mode, Hard: true,
			Reason: fmt.Sprintf("denied by the permission rule %s%s", r.Raw, from(r.Source))}
	}
	switch {
	case mode == Delegate && !managementTools[call.Name]:
		return Verdict{Effect: Deny, Mode: mode, Hard: true,
			Reason: "delegate mode: the lead only manages the team; ask a teammate to do this"}
	case mode == Plan && writingTools[call.Name]:
		return Verdict{Effect: Deny, Mode: mode, Hard: true,
			Reason: "plan mode: only read-only tools may run until the plan is approved"}
	}
	if r, ok := p.match(p.ask, call.Name, subj, false); ok && mode != Bypass {
		return Verdict{Effect: Ask, Rule: r.Raw, Source: r.Source, Mode: mode,
			Reason: fmt.Sprintf("the permission rule %s%s asks for approval", r.Raw, from(r.Source))}
	}
	if r, ok := p.match(p.allow, call.Name, subj, true); ok {
		return Verdict{Effect: Allow, Rule: r.Raw, Source: r.Source, Mode: mode,
			Reason: fmt.Sprintf("allowed by the permission rule %s%s", r.Raw, from(r.Source))}
	}
	asks := false
	switch mode {
	case Default:
		asks = writingTools[call.Name]
	case AcceptEdits:
		asks = call.Name == "bash"
	}
	if asks {
		return Verdict{Effect: Ask, Mode: mode, Reason: fmt.Sprintf("permission mode %s: %s needs approval", mode, call.Name)}
	}
	return Verdict{Effect: Allow, Mode: mode, Reason: fmt.Sprintf("permission mode %s allows %s", mode, call.Name)}
}

// DeniesPath reports whether a deny rule forbids tool the workspace-relative
// path rel: what a search over a folder must leave out.
func (p *Policy) DeniesPath(tool, rel string) bool {
	if p == nil {
		return false
	}
	_, ok := p.match(p.deny, tool, subject{path: path.Clean(rel)}, false)
	return ok
}

func from(src string) string {
	if src == "" {
		return ""
	}
	return " (" + src + ")"
}

// subject is what a rule's specifier is matched against.
type subject struct {
	line *shellwords.Line // bash
	path string           // path tools: workspace-relative slash path, or absolute
}

func (p *Policy) subject(call agent.Call) subject {
	var in struct {
		Command string `json:"command"`
		Path    string `json:"path"`
	}
	_ = json.Unmarshal(call.Input, &in) // a bad input matches no specifier
	switch {
	case call.Name == "bash":
		l := shellwords.Parse(in.Command)
		return subject{line: &l}
	case pathTool(call.Name):
		return subject{path: p.relPath(in.Path)}
	}
	return subject{}
}

// relPath makes a tool's path workspace-relative when it is inside the
// workspace and absolute otherwise, in slash form.
func (p *Policy) relPath(name string) string {
	if name == "" {
		name = "."
	}
	if !filepath.IsAbs(name) {
		if p.workspace == "" {
			return path.Clean(filepath.ToSlash(name))
		}
		name = filepath.Join(p.workspace, name)
	}
	name = filepath.Clean(name)
	if p.workspace != "" {
		for _, base := range workspaceForms(p.workspace) {
			if rel, err := filepath.Rel(base, name); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				return filepath.ToSlash(rel)
			}
		}
	}
	return filepath.ToSlash(name)
}

func workspaceForms(ws string) []string {
	out := []string{filepath.Clean(ws)}
	if r, err := filepath.EvalSymlinks(ws); err == nil && r != out[0] {
		out = append(out, r)
	}
	return out
}

// match returns the first rule of rules that matches. For bash, a deny or
// ask rule matches when it matches any simple command of the line; an
// allow rule only when every simple command is allowed by some rule and
// the line has no substitution or redirection a prefix cannot vouch for.
func (p *Policy) match(rules []Rule, tool string, s subject, allow bool) (Rule, bool) {
	var cands []Rule
	for _, r := range rules {
		if !r.covers(tool) {
			continue
		}
		if r.kind == specAll {
			return r, true
		}
		cands = append(cands, r)
	}
	if len(cands) == 0 {
		return Rule{}, false
	}
	switch {
	case s.line != nil:
		if allow {
			return allowLine(cands, *s.line)
		}
		for _, seg := range s.line.Segments {
			words := shellwords.StripAssignments(seg.Words)
			for _, r := range cands {
				if r.matchWords(words) || r.matchWords(seg.Words) {
					return r, true
				}
			}
		}
	case s.path != "":
		for _, r := range cands {
			if r.kind != specPath {
				continue
			}
			if ok, _ := doublestar.Match(r.pattern, s.path); ok {
				return r, true
			}
		}
	}
	return Rule{}, false
}

func allowLine(cands []Rule, l shellwords.Line) (Rule, bool) {
	if l.Substitution || l.Redirect || len(l.Segments) == 0 {
		return Rule{}, false
	}
	var first Rule
	for i, seg := range l.Segments {
		found := false
		for _, r := range cands {
			if r.matchWords(seg.Words) {
				if i == 0 {
					first = r
				}
				found = true
				break
			}
		}
		if !found {
			return Rule{}, false
		}
	}
	return first, true
}
