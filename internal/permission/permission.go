// Package permission decides whether an agent's tool call may run: allow,
// deny and ask rules in Claude Code's syntax (Bash(git status:*),
// Bash(ls *), Edit(src/**), Read(./secrets/**), WebFetch), evaluated deny
// first, and the per-agent permission modes (default, acceptEdits, plan,
// dontAsk, bypassPermissions, delegate).
//
// Evaluation order for a call:
//  1. a deny rule that matches refuses it; so does a write to a protected
//     path (troupe's and Claude Code's settings, .troupe/, git hooks and
//     config; see Protect) that no allow rule names explicitly;
//  2. the mode's hard limits refuse it: plan mode refuses calls that may
//     change the workspace (kinds edit, execute and unknown; read-only
//     bash commands still run) and delegate mode everything but the manage
//     kind, and no allow rule can lift them (seed 004: an allow rule must
//     never undo the lead's limit);
//  3. an ask rule that matches asks, in every mode, bypassPermissions
//     included;
//  4. an allow rule that matches allows;
//  5. the mode's default, by the call's kind: reads and management run;
//     edits, commands (bash that is not read-only), network calls and
//     tools of unknown kind ask in default, all but edits in acceptEdits;
//     bypassPermissions allows; dontAsk refuses whatever would ask.
//
// A call's kind is what its tool declares (agent.Call.Kind); the engine
// keeps no list of which tools read or write. A tool that has declared
// nothing, such as an MCP tool troupe knows nothing of, is of unknown kind
// and fails closed: it asks, or is refused where nothing may ask. The
// names the rule syntax knows (Bash, Read, Edit, …) stay a table: they are
// the syntax's vocabulary, and say which input field a specifier matches.
//
// Claude Code's auto mode is not offered: its meaning is a model that
// classifies each call in the background, which a rule engine cannot
// match; asking for it is an error that says so.
//
// Bash commands are parsed (mvdan.cc/sh): deny and ask rules see every
// simple command, including those inside compound commands,
// substitutions, functions and wrappers (env, nice, timeout, xargs, sudo,
// sh -c '…', eval '…', find -exec …); what cannot be vouched for before it
// runs ($cmd args, eval "$x") counts as matching any rule. Read denies
// reach the files a command's words name, and Edit denies and protected
// paths the files it writes. All of this is a guard rail, best effort over
// the words of a command line: a program can still open any file it likes.
// The wall is the bash sandbox.
//
// It knows agent calls but nothing of teams; who is asked is the caller's
// business (GateConfig.Ask). It must never depend on the team, tool or cli
// packages (kinds come from the leaf tool/kind).
package permission

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
	"mvdan.cc/sh/v3/syntax"

	"github.com/troupe-dev/troupe/internal/agent"
	"github.com/troupe-dev/troupe/internal/settings"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

// Mode is an agent's permission mode, set at spawn.
type Mode string

// The modes.
const (
	Default     Mode = "default"           // writing tools and bash ask first; reads and read-only bash run
	AcceptEdits Mode = "acceptEdits"       // file edits allowed; bash asks
	Plan        Mode = "plan"              // read-only (until a plan is approved)
	DontAsk     Mode = "dontAsk"           // whatever would ask is refused; nothing prompts
	Bypass      Mode = "bypassPermissions" // nothing asks but ask rules; deny rules and protected paths still refuse
	Delegate    Mode = "delegate"          // the lead only: management tools only
)

// Modes are every mode; TeammateModes those a teammate may have (delegate
// is the lead's).
var (
	Modes         = []Mode{Default, AcceptEdits, Plan, DontAsk, Bypass, Delegate}
	TeammateModes = []Mode{Default, AcceptEdits, Plan, DontAsk, Bypass}
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
	if s == "auto" {
		return "", fmt.Errorf("%w %q: Claude Code's auto mode has a model classify each call, which troupe does not do (want one of %s)", ErrBadMode, s, strings.Join(names, ", "))
	}
	return "", fmt.Errorf("%w %q (want one of %s)", ErrBadMode, s, strings.Join(names, ", "))
}

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
// the tools that read them. It is the rule syntax's vocabulary, not what
// the tools do: that is each call's kind.
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

	tools  []string // troupe tools it covers
	kind   specKind
	prefix []string       // Bash(x y:*), Bash(x y *)
	exact  []string       // Bash(x y)
	wild   *regexp.Regexp // Bash(x * y)
	lead   []string       // a Bash rule's literal words before its first wildcard
	flags  *flagForm      // a Bash rule whose words carry options, for -fr = -rf
	// path rules: a doublestar pattern, workspace-relative or absolute;
	// deep is the same pattern at any depth ("" when rooted), which deny
	// and ask rules also match.
	pattern, deep string
	explicit      bool // a path rule that names paths, not every path
	// mcpServer is "mcp__<server>__" for a rule naming a whole MCP server.
	mcpServer string
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

var toolName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.:-]*$`) })

// mcpServerRule matches a rule that names an MCP server's every tool, as
// Claude Code writes it: "mcp__github" or "mcp__github__*".
var mcpServerRule = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^mcp__([A-Za-z0-9_-]+?)(__\*)?$`) })

// ParseRule parses "Tool" or "Tool(specifier)".
func ParseRule(raw string) (Rule, error) {
	s := strings.TrimSpace(raw)
	if !utf8.ValidString(s) {
		return Rule{}, fmt.Errorf("%w %q: not valid UTF-8", ErrBadRule, raw)
	}
	r := Rule{Raw: s, Tool: s}
	if m := mcpServerRule().FindStringSubmatch(s); m != nil && (m[2] != "" || !strings.Contains(m[1], "__")) {
		// A whole server: every tool named mcp__<server>__…
		r.Tool, r.mcpServer = "mcp__"+m[1], "mcp__"+m[1]+"__"
		r.tools = []string{r.Tool}
		r.kind = specAll
		return r, nil
	}
	if i := strings.IndexByte(s, '('); i >= 0 {
		if !strings.HasSuffix(s, ")") {
			return Rule{}, fmt.Errorf("%w %q: no closing parenthesis", ErrBadRule, raw)
		}
		r.Tool, r.Spec = s[:i], s[i+1:len(s)-1]
		if strings.TrimSpace(r.Spec) == "" {
			return Rule{}, fmt.Errorf("%w %q: empty parentheses (write %s alone to cover every call)", ErrBadRule, raw, r.Tool)
		}
	}
	if !toolName().MatchString(r.Tool) {
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
	case bashTool(r.tools[0]):
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

// pathTool reports whether Read or Edit rules name the tool: its input's
// path is what their specifiers match.
func pathTool(t string) bool {
	return slices.Contains(ruleTools["Read"], t) || slices.Contains(ruleTools["Edit"], t)
}

// bashTool reports whether Bash rules name the tool: its input's command
// is what their specifiers match.
func bashTool(t string) bool { return slices.Contains(ruleTools["Bash"], t) }

// ruleWords splits a rule's command into words as bash would.
func ruleWords(s string) []string {
	var out []string
	ok := true
	p := parsers.Get().(*syntax.Parser)
	err := p.Words(strings.NewReader(s), func(w *syntax.Word) bool {
		v, lit, _ := literal(w)
		ok = ok && lit
		out = append(out, v)
		return true
	})
	parsers.Put(p)
	if err != nil || !ok {
		return strings.Fields(s)
	}
	return out
}

func (r *Rule) parseCommand() error {
	spec := strings.TrimSpace(r.Spec)
	switch {
	case strings.HasSuffix(spec, ":*"):
		r.kind, r.prefix = specPrefix, ruleWords(strings.TrimSuffix(spec, ":*"))
		if len(r.prefix) == 0 {
			return errors.New("nothing before :*")
		}
		r.lead = r.prefix
	case strings.Count(spec, "*") == 1 && strings.HasSuffix(spec, " *"):
		// Claude Code: a trailing " *" ends at a word boundary and may
		// match nothing, so Bash(ls *) is ls with or without arguments
		// (never lsof): the prefix form by another name.
		r.kind, r.prefix = specPrefix, ruleWords(strings.TrimSuffix(spec, " *"))
		r.lead = r.prefix
	case strings.Contains(spec, "*"):
		words := ruleWords(spec)
		joined := strings.Join(words, " ")
		tail := ""
		if strings.HasSuffix(joined, " *") {
			joined, tail = strings.TrimSuffix(joined, " *"), `( .*)?`
		}
		parts := strings.Split(joined, "*")
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		wild, err := regexp.Compile(`^` + strings.Join(parts, `.*`) + tail + `$`)
		if err != nil {
			return fmt.Errorf("the pattern cannot be matched: %v", err)
		}
		r.kind, r.wild = specWild, wild
		for _, w := range words {
			if strings.Contains(w, "*") {
				break
			}
			r.lead = append(r.lead, w)
		}
		return nil
	default:
		r.kind, r.exact = specExact, ruleWords(spec)
		r.lead = r.exact
	}
	if hasOption(r.lead) {
		r.flags = splitFlags(r.lead)
	}
	return nil
}

func (r *Rule) parsePath() error {
	p := strings.TrimSpace(r.Spec)
	deep := false
	switch {
	case strings.HasPrefix(p, "//"):
		p = p[1:] // absolute
	case strings.HasPrefix(p, "~/"):
		if home() == "" {
			return errors.New("no home directory for ~")
		}
		p = filepath.ToSlash(filepath.Join(home(), p[2:]))
	case strings.HasPrefix(p, "/"):
		p = strings.TrimLeft(p, "/") // rooted at the workspace
	default:
		p = strings.TrimPrefix(p, "./")
		if !strings.Contains(strings.TrimSuffix(p, "/"), "/") {
			p = "**/" + p // gitignore style: a bare name matches at any depth
		} else {
			// Read(./secrets/**) also covers a secrets/ folder deeper
			// down, as Claude Code's matching does (issue 13), for deny
			// and ask rules; an allow rule keeps to what it says.
			deep = !strings.HasPrefix(p, "**/")
		}
	}
	if strings.HasSuffix(p, "/") {
		p += "**"
	}
	if !doublestar.ValidatePattern(p) {
		return fmt.Errorf("%q is not a valid glob", r.Spec)
	}
	r.kind, r.pattern = specPath, p
	if deep {
		r.deep = "**/" + p
	}
	r.explicit = strings.Trim(r.Spec, "./*") != ""
	return nil
}

// covers reports whether the rule names the tool.
func (r *Rule) covers(tool string) bool {
	if r.mcpServer != "" && strings.HasPrefix(tool, r.mcpServer) {
		return true
	}
	for _, t := range r.tools {
		if t == tool {
			return true
		}
	}
	return false
}

// matchPath matches a path form. loose (deny and ask rules) also matches
// at any depth and the folders above the path, as a gitignore pattern on a
// folder covers what is inside; an allow rule matches only what it says.
func (r *Rule) matchPath(form string, loose bool) bool {
	if r.kind != specPath {
		return false
	}
	if !loose {
		ok, _ := doublestar.Match(r.pattern, form)
		return ok
	}
	return matchUp(r.pattern, form) || r.deep != "" && matchUp(r.deep, form)
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
	// Hard reports a refusal no hook or answer may lift: a deny rule, a
	// protected path or a plan/delegate limit.
	Hard bool `json:"hard,omitempty"`
	// Suggest says, for a call that asks (or that dontAsk refused), the
	// rule that would allow it and where to add it; SuggestRule is the
	// rule alone. Both are empty when no rule could.
	Suggest     string `json:"suggest,omitempty"`
	SuggestRule string `json:"suggest_rule,omitempty"`
}

// SettingsFile is where a suggestion tells to add a rule.
const SettingsFile = ".claude/settings.json"

func (v *Verdict) suggest(rule string) {
	if rule == "" {
		return
	}
	v.SuggestRule = rule
	v.Suggest = fmt.Sprintf("add %q to permissions.allow in %s", rule, SettingsFile)
}

// Policy holds the rules of one workspace.
type Policy struct {
	workspace string
	deny      []Rule
	ask       []Rule
	allow     []Rule
	protected []string // patterns given to Protect
	dirs      []string // the additional directories, absolute slash forms (AddDirs)

	wsOnce  sync.Once
	wsForms []string // the workspace as given and with its symlinks resolved

	linkMu sync.Mutex
	links  map[string]*linkScan // recent hard-link scans, by patterns
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
	var in struct {
		Command string `json:"command"`
		Path    string `json:"path"`
	}
	_ = json.Unmarshal(call.Input, &in) // a bad input matches no specifier
	var v Verdict
	switch {
	case bashTool(call.Name):
		v = p.checkBash(mode, call.Kind, in.Command)
	case pathTool(call.Name):
		v = p.checkPath(mode, call.Name, call.Kind, in.Path)
	default:
		v = p.checkOther(mode, call.Name, call.Kind)
	}
	v.Mode = mode
	if v.Effect == Ask && mode == DontAsk {
		v.Effect = Deny
		v.Reason = "dontAsk mode refuses what is not allowed beforehand, instead of asking: " + v.Reason
	}
	return v
}

func denied(r Rule, why string) Verdict {
	return Verdict{Effect: Deny, Rule: r.Raw, Source: r.Source, Hard: true,
		Reason: fmt.Sprintf("denied by the permission rule %s%s%s", r.Raw, from(r.Source), why)}
}

func asked(r Rule, why string) Verdict {
	return Verdict{Effect: Ask, Rule: r.Raw, Source: r.Source,
		Reason: fmt.Sprintf("the permission rule %s%s asks for approval%s", r.Raw, from(r.Source), why)}
}

func allowed(r Rule) Verdict {
	return Verdict{Effect: Allow, Rule: r.Raw, Source: r.Source,
		Reason: fmt.Sprintf("allowed by the permission rule %s%s", r.Raw, from(r.Source))}
}

// firstAll is the first rule of rules that covers every call of tool.
func firstAll(rules []Rule, tool string) (Rule, bool) {
	for _, r := range rules {
		if r.kind == specAll && r.covers(tool) {
			return r, true
		}
	}
	return Rule{}, false
}

// modeLimit is the mode's hard refusal of a call of kind k, if any:
// delegate keeps to management, plan to what changes nothing (a read-only
// bash command included). A tool of unknown kind may change anything, so
// plan refuses it.
func modeLimit(mode Mode, k kind.Kind, readOnlyBash bool) (Verdict, bool) {
	switch {
	case mode == Delegate && k != kind.Manage:
		return Verdict{Effect: Deny, Hard: true,
			Reason: "delegate mode: the lead only manages the team; ask a teammate to do this"}, true
	case mode == Plan && k.Changes() && !readOnlyBash:
		return Verdict{Effect: Deny, Hard: true,
			Reason: "plan mode: only read-only tools and commands may run until the plan is approved"}, true
	}
	return Verdict{}, false
}

// modeDefault is what the mode does with a call of kind k that no rule
// decided. Reads and management run; edits, commands, network calls and
// tools of unknown kind ask, except that acceptEdits accepts edits whose
// paths were checked against the Edit rules and protected paths
// (pathsChecked), and bypassPermissions runs everything.
func modeDefault(mode Mode, tool string, k kind.Kind, pathsChecked bool) Verdict {
	asks := false
	switch k {
	case kind.Read, kind.Manage:
	case kind.Edit:
		asks = mode != Bypass && mode != Delegate && !(mode == AcceptEdits && pathsChecked)
	default:
		asks = mode != Bypass && mode != Delegate
	}
	if !asks {
		return Verdict{Effect: Allow, Reason: fmt.Sprintf("permission mode %s allows %s", mode, tool)}
	}
	what := tool + " needs approval"
	switch {
	case k == kind.Unknown:
		what = tool + " has not said what it does (its kind is unknown), so it needs approval"
	case k == kind.Edit && mode == AcceptEdits:
		what = tool + " edits files by paths troupe cannot check, so it needs approval"
	}
	v := Verdict{Effect: Ask, Reason: fmt.Sprintf("permission mode %s: %s", mode, what)}
	v.suggest(ClaudeName(tool))
	return v
}

func (p *Policy) checkOther(mode Mode, tool string, k kind.Kind) Verdict {
	if r, ok := firstAll(p.deny, tool); ok {
		return denied(r, "")
	}
	if v, ok := modeLimit(mode, k, false); ok {
		return v
	}
	if r, ok := firstAll(p.ask, tool); ok {
		return asked(r, "")
	}
	if r, ok := firstAll(p.allow, tool); ok {
		return allowed(r)
	}
	return modeDefault(mode, tool, k, false)
}

// pathRules are the path rules of rules that cover tool.
func pathRules(rules []Rule, tools ...string) []Rule {
	var out []Rule
	for _, r := range rules {
		if r.kind != specPath {
			continue
		}
		for _, t := range tools {
			if r.covers(t) {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

// denyPath finds the deny rule among rules that covers a path, as
// written, resolved, or as another name (hard link) of a covered file.
func (p *Policy) denyPath(rules []Rule, forms []string, abs string) (Rule, string, bool) {
	for _, r := range rules {
		for i, f := range forms {
			if r.matchPath(f, true) {
				why := ""
				if i > 0 {
					why = fmt.Sprintf(" (%s resolves to %s)", forms[0], f)
				}
				return r, why, true
			}
		}
	}
	if len(rules) == 0 {
		return Rule{}, "", false
	}
	var hit Rule
	pats := make([]string, 0, 2*len(rules))
	for _, r := range rules {
		pats = append(pats, r.pattern, r.deep) // deep is part of what covers means
	}
	if p.hardLinked(abs, pats, func(form string) bool {
		for _, r := range rules {
			if r.matchPath(form, true) {
				hit = r
				return true
			}
		}
		return false
	}) {
		return hit, fmt.Sprintf(" (%s is a hard link to a file it covers)", forms[0]), true
	}
	return Rule{}, "", false
}

// protects reports whether a write to these forms touches a protected
// path: the path itself, what it resolves to, or another name of it.
func (p *Policy) protects(forms []string, abs string, removes bool) bool {
	for _, f := range forms {
		if p.isProtected(f) || removes && p.holdsProtected(f) || p.protectedExtra(f, removes) {
			return true
		}
	}
	return p.hardLinked(abs, p.protectedPatterns(), p.isProtected)
}

// holdsProtected reports whether a folder holds a protected path, so that
// removing or moving it takes that path away.
func (p *Policy) holdsProtected(form string) bool {
	if form == "." || form == "" {
		return true
	}
	if filepath.IsAbs(form) && p.workspace != "" {
		ws := filepath.ToSlash(filepath.Clean(p.workspace))
		if form == "/" || strings.HasPrefix(ws+"/", strings.TrimSuffix(form, "/")+"/") {
			return true
		}
	}
	for _, pat := range p.protectedPatterns() {
		if strings.HasPrefix(pat, strings.TrimSuffix(form, "/")+"/") {
			return true
		}
	}
	return false
}

// explicitAllow reports whether allow rules name every form of a path
// explicitly (not Edit or Edit(**)): what lifts a protected path.
func (p *Policy) explicitAllow(tool string, forms []string) (Rule, bool) {
	var first Rule
	for i, f := range forms {
		found := false
		for _, r := range pathRules(p.allow, tool) {
			if r.explicit && r.matchPath(f, false) {
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

// allowPath reports whether allow rules cover every form of a path.
func (p *Policy) allowPath(tool string, forms []string) (Rule, bool) {
	if r, ok := firstAll(p.allow, tool); ok {
		return r, true
	}
	rules := pathRules(p.allow, tool)
	var first Rule
	for i, f := range forms {
		found := false
		for _, r := range rules {
			if r.matchPath(f, false) {
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
	return first, len(rules) > 0
}

// editRule is the Edit rule that names one path form: an absolute path is
// written with //, as Claude Code's syntax wants.
func editRule(form string) string {
	if strings.HasPrefix(form, "/") {
		return "Edit(/" + form + ")"
	}
	return "Edit(" + form + ")"
}

func protectedVerdict(what string) Verdict {
	v := Verdict{Effect: Deny, Hard: true, Rule: "protected path",
		Reason: fmt.Sprintf("%s is a protected path (troupe's and Claude Code's settings, state, hooks and git's hooks and config are never written by an agent, in any mode); only an allow rule that names it lifts this", what)}
	v.suggest(editRule(what))
	return v
}

func (p *Policy) checkPath(mode Mode, tool string, k kind.Kind, raw string) Verdict {
	if r, ok := firstAll(p.deny, tool); ok {
		return denied(r, "")
	}
	forms, abs := p.pathForms(raw)
	if r, why, ok := p.denyPath(pathRules(p.deny, tool), forms, abs); ok {
		return denied(r, why)
	}
	// Anything but a read may write the path; a tool of unknown kind too.
	if k != kind.Read && p.protects(forms, abs, false) {
		if _, ok := p.explicitAllow(tool, forms); !ok {
			return protectedVerdict(forms[0])
		}
	}
	if v, ok := modeLimit(mode, k, false); ok {
		return v
	}
	if r, ok := firstAll(p.ask, tool); ok {
		return asked(r, "")
	}
	for _, r := range pathRules(p.ask, tool) {
		for _, f := range forms {
			if r.matchPath(f, true) {
				return asked(r, "")
			}
		}
	}
	if r, ok := p.allowPath(tool, forms); ok {
		return allowed(r)
	}
	v := modeDefault(mode, tool, k, true)
	if v.Effect == Ask && k == kind.Edit {
		v.suggest(editRule(forms[0]))
	}
	return v
}

// DeniesPath reports whether a deny rule forbids tool the workspace-relative
// path rel, as written, after symlinks resolve, or as a hard link to a
// denied file: what a search over a folder must leave out.
func (p *Policy) DeniesPath(tool, rel string) bool {
	if p == nil {
		return false
	}
	if _, ok := firstAll(p.deny, tool); ok {
		return true
	}
	rules := pathRules(p.deny, tool)
	if len(rules) == 0 {
		return false
	}
	forms, abs := p.pathForms(rel)
	_, _, ok := p.denyPath(rules, forms, abs)
	return ok
}

func from(src string) string {
	if src == "" {
		return ""
	}
	return " (" + src + ")"
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
		p.wsOnce.Do(func() { p.wsForms = workspaceForms(p.workspace) })
		for _, base := range p.wsForms {
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

// inside reports whether a path form lies inside the workspace.
func inside(form string) bool {
	return !filepath.IsAbs(form) && form != ".." && !strings.HasPrefix(form, "../")
}
