package fakeopenai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/troupe-dev/troupe/internal/llm/fakescript"
)

// DefaultAgentPattern finds the agent's name in a system message such as
// "You are 'team-lead', ..." or "You are teammate 'alice' (backend) in team
// 'x'": group 1 of its first match is the name. It is fakeapi's pattern, so
// one script idea serves both fakes.
const DefaultAgentPattern = `You are (?:teammate )?'([^']+)'`

// FaultKind names a failure the server can inject in place of a reply.
type FaultKind string

// The fault kinds.
const (
	// FaultRateLimit answers 429 with a retry-after header.
	FaultRateLimit FaultKind = "rate_limit"
	// FaultServerError answers 500 server_error.
	FaultServerError FaultKind = "server_error"
	// FaultDrop closes the connection without sending a byte.
	FaultDrop FaultKind = "drop"
	// FaultCut sends the start of the reply, then closes the connection
	// before the finish_reason and [DONE].
	FaultCut FaultKind = "cut"
)

func (k FaultKind) valid() bool {
	switch k {
	case FaultRateLimit, FaultServerError, FaultDrop, FaultCut:
		return true
	}
	return false
}

// Fault is a failure injected at one call.
type Fault struct {
	// Call is the 1-based number of the POST /v1/chat/completions it
	// replaces.
	Call int `yaml:"call"`
	// Kind is what goes wrong.
	Kind FaultKind `yaml:"kind"`
	// RetryAfter is the retry-after header of a rate_limit fault, in
	// seconds (fractions allowed); 0 means 1.
	RetryAfter float64 `yaml:"retry_after"`
	// Message replaces the default error message of an HTTP fault.
	Message string `yaml:"message"`
}

// Script is a parsed, checked script. It is immutable: a [Server] keeps its
// own count of how often each rule has answered.
type Script struct {
	agentRE  *regexp.Regexp
	model    string
	faults   map[int]Fault
	fallback rule
	rules    []rule
}

type rule struct {
	fakescript.Cond
	latency time.Duration
	reply   []part
	finish  string
	usage   usageSpec
}

// part is one piece of a reply: text, or a tool call.
type part struct {
	text *string
	call *callSpec
}

// The YAML shapes. Decoding is strict: an unknown key is an error.
type (
	scriptSpec struct {
		AgentPattern *string    `yaml:"agent_pattern"`
		Model        string     `yaml:"model"`
		Faults       []Fault    `yaml:"faults"`
		Fallback     *ruleSpec  `yaml:"fallback"`
		Rules        []ruleSpec `yaml:"rules"`
	}
	ruleSpec struct {
		Agent        string        `yaml:"agent"`
		Contains     string        `yaml:"contains"`
		Regex        string        `yaml:"regex"`
		Times        *int          `yaml:"times"`
		Latency      time.Duration `yaml:"latency"`
		Reply        []partSpec    `yaml:"reply"`
		FinishReason string        `yaml:"finish_reason"`
		Usage        usageSpec     `yaml:"usage"`
	}
	partSpec struct {
		Text     *string   `yaml:"text"`
		ToolCall *callSpec `yaml:"tool_call"`
	}
	callSpec struct {
		Name      string         `yaml:"name"`
		Arguments map[string]any `yaml:"arguments"`
	}
	// usageSpec: a nil field is estimated (tokens) or zero (cached).
	usageSpec struct {
		PromptTokens     *int `yaml:"prompt_tokens"`
		CompletionTokens *int `yaml:"completion_tokens"`
		CachedTokens     *int `yaml:"cached_tokens"`
	}
)

var (
	toolNameRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`) })
	finishReasons = map[string]bool{"stop": true, "tool_calls": true, "length": true, "content_filter": true}
)

// LoadScript reads and parses the script file at path.
func LoadScript(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load script: %w", err)
	}
	s, err := ParseScript(data)
	if err != nil {
		return nil, fmt.Errorf("load script %s: %w", path, err)
	}
	return s, nil
}

// ParseScript parses a script in YAML or JSON. Every error names the rule
// (numbered from 0, as [Recorded.Rule] is) or fault it is about.
func ParseScript(data []byte) (*Script, error) {
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
		// JSON is YAML, except for the tabs JSON writers indent with.
		var buf bytes.Buffer
		if json.Indent(&buf, t, "", "  ") == nil {
			data = buf.Bytes()
		}
	}
	var spec scriptSpec
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&spec); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse script: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	s := &Script{model: spec.Model, faults: map[int]Fault{}}
	pattern := DefaultAgentPattern
	if spec.AgentPattern != nil {
		pattern = *spec.AgentPattern
	}
	var err error
	if s.agentRE, err = regexp.Compile(pattern); err != nil {
		return nil, fmt.Errorf("agent_pattern: %w", err)
	}
	if s.agentRE.NumSubexp() < 1 {
		return nil, fmt.Errorf("agent_pattern %q: needs a capture group for the agent's name", pattern)
	}
	for i, f := range spec.Faults {
		if err := checkFault(f); err != nil {
			return nil, fmt.Errorf("fault %d: %w", i, err)
		}
		if _, dup := s.faults[f.Call]; dup {
			return nil, fmt.Errorf("fault %d: call %d already has a fault", i, f.Call)
		}
		s.faults[f.Call] = f
	}
	if fb := spec.Fallback; fb != nil {
		if fb.Agent != "" || fb.Contains != "" || fb.Regex != "" || fb.Times != nil {
			return nil, errors.New("fallback: takes only reply, finish_reason, usage and latency")
		}
		if s.fallback, err = buildRule(*fb); err != nil {
			return nil, fmt.Errorf("fallback: %w", err)
		}
		s.fallback.Times = 0
	} else {
		text := "fakeopenai: no rule matched for agent ${agent}"
		s.fallback = rule{reply: []part{{text: &text}}, finish: "stop"}
	}
	for i, rs := range spec.Rules {
		r, err := buildRule(rs)
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", i, err)
		}
		s.rules = append(s.rules, r)
	}
	return s, nil
}

func checkFault(f Fault) error {
	if f.Call < 1 {
		return fmt.Errorf("call must be 1 or more, got %d", f.Call)
	}
	if !f.Kind.valid() {
		return fmt.Errorf("unknown kind %q (want rate_limit, server_error, drop or cut)", f.Kind)
	}
	if f.RetryAfter < 0 {
		return fmt.Errorf("retry_after must not be negative, got %v", f.RetryAfter)
	}
	return nil
}

func buildRule(rs ruleSpec) (rule, error) {
	r := rule{Cond: fakescript.Cond{Agent: rs.Agent, Contains: rs.Contains, Times: 1}, latency: rs.Latency, finish: rs.FinishReason, usage: rs.Usage}
	if rs.Times != nil {
		if *rs.Times < 0 {
			return r, fmt.Errorf("times must be 0 (unlimited) or more, got %d", *rs.Times)
		}
		r.Times = *rs.Times
	}
	if rs.Latency < 0 {
		return r, fmt.Errorf("latency must not be negative, got %v", rs.Latency)
	}
	if rs.Regex != "" {
		re, err := regexp.Compile(rs.Regex)
		if err != nil {
			return r, fmt.Errorf("regex: %w", err)
		}
		r.Re = re
	}
	calls := false
	for j, ps := range rs.Reply {
		switch {
		case ps.Text != nil && ps.ToolCall != nil:
			return r, fmt.Errorf("reply part %d: has text and tool_call (want exactly one)", j)
		case ps.Text != nil:
			r.reply = append(r.reply, part{text: ps.Text})
		case ps.ToolCall != nil:
			tc := ps.ToolCall
			if !toolNameRE().MatchString(tc.Name) {
				return r, fmt.Errorf("reply part %d: tool_call name %q must match %s", j, tc.Name, toolNameRE())
			}
			args, err := fakescript.JSONable(tc.Arguments)
			if err != nil {
				return r, fmt.Errorf("reply part %d: tool_call arguments: %w", j, err)
			}
			m, _ := args.(map[string]any)
			if m == nil {
				m = map[string]any{}
			}
			calls = true
			r.reply = append(r.reply, part{call: &callSpec{Name: tc.Name, Arguments: m}})
		default:
			return r, fmt.Errorf("reply part %d: has no kind (want text or tool_call)", j)
		}
	}
	if r.finish == "" {
		r.finish = "stop"
		if calls {
			r.finish = "tool_calls"
		}
	} else if !finishReasons[r.finish] {
		return r, fmt.Errorf("unknown finish_reason %q (want stop, tool_calls, length or content_filter)", r.finish)
	}
	u := r.usage
	for name, v := range map[string]*int{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens, "cached_tokens": u.CachedTokens} {
		if v != nil && *v < 0 {
			return r, fmt.Errorf("usage.%s must not be negative", name)
		}
	}
	if u.PromptTokens != nil && u.CachedTokens != nil && *u.CachedTokens > *u.PromptTokens {
		return r, fmt.Errorf("usage.cached_tokens (%d) must not exceed prompt_tokens (%d): cached tokens are part of the prompt", *u.CachedTokens, *u.PromptTokens)
	}
	return r, nil
}

// vars are the substitutions of one call's reply.
type vars = fakescript.Vars
