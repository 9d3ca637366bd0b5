package fakeapi

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

// DefaultAgentPattern finds the agent's name in a system prompt such as
// "You are 'team-lead', ..." or "You are teammate 'alice' (backend) in team
// 'x'": group 1 of its first match is the name.
const DefaultAgentPattern = `You are (?:teammate )?'([^']+)'`

// FaultKind names a failure the server can inject in place of a reply.
type FaultKind string

// The fault kinds.
const (
	// FaultRateLimit answers 429 rate_limit_error with a retry-after header.
	FaultRateLimit FaultKind = "rate_limit"
	// FaultOverloaded answers 529 overloaded_error.
	FaultOverloaded FaultKind = "overloaded"
	// FaultServerError answers 500 api_error.
	FaultServerError FaultKind = "server_error"
	// FaultDrop closes the connection without sending a byte.
	FaultDrop FaultKind = "drop"
	// FaultCut sends the start of the reply, then closes the connection
	// mid-message.
	FaultCut FaultKind = "cut"
)

func (k FaultKind) valid() bool {
	switch k {
	case FaultRateLimit, FaultOverloaded, FaultServerError, FaultDrop, FaultCut:
		return true
	}
	return false
}

// Fault is a failure injected at one call.
type Fault struct {
	// Call is the 1-based number of the POST /v1/messages it replaces
	// (ignored by [Server.InjectFault], which takes the number apart).
	Call int `yaml:"call"`
	// Kind is what goes wrong.
	Kind FaultKind `yaml:"kind"`
	// RetryAfter is the retry-after header of a rate_limit fault, in
	// seconds (fractions allowed: the SDK honours 0.05); 0 means 1.
	RetryAfter float64 `yaml:"retry_after"`
	// Message replaces the default error message of an HTTP fault.
	Message string `yaml:"message"`
}

// Script is a parsed, checked script. It is immutable: a [Server] keeps
// its own count of how often each rule has answered.
type Script struct {
	agentRE  *regexp.Regexp
	model    string
	faults   map[int]Fault
	fallback rule
	rules    []rule
}

// rule is one checked rule (or the fallback, whose conditions are empty).
type rule struct {
	fakescript.Cond
	latency    time.Duration
	reply      []block
	stopReason string
	usage      usageSpec
}

// block is one reply content block; exactly one field is set.
type block struct {
	text     *string
	thinking *string
	toolUse  *toolUseSpec
}

// The YAML shapes. Decoding is strict: an unknown key is an error.
type (
	scriptSpec struct {
		AgentPattern *string       `yaml:"agent_pattern"`
		Model        string        `yaml:"model"`
		Faults       []Fault       `yaml:"faults"`
		Fallback     *fallbackSpec `yaml:"fallback"`
		Rules        []yaml.Node   `yaml:"rules"`
	}
	fallbackSpec struct {
		Reply      []blockSpec   `yaml:"reply"`
		StopReason string        `yaml:"stop_reason"`
		Usage      usageSpec     `yaml:"usage"`
		Latency    time.Duration `yaml:"latency"`
	}
	ruleSpec struct {
		Agent      string        `yaml:"agent"`
		Contains   string        `yaml:"contains"`
		Regex      string        `yaml:"regex"`
		Times      *int          `yaml:"times"`
		Latency    time.Duration `yaml:"latency"`
		Reply      []blockSpec   `yaml:"reply"`
		StopReason string        `yaml:"stop_reason"`
		Usage      usageSpec     `yaml:"usage"`
	}
	blockSpec struct {
		Text     *string      `yaml:"text"`
		Thinking *string      `yaml:"thinking"`
		ToolUse  *toolUseSpec `yaml:"tool_use"`
	}
	toolUseSpec struct {
		Name  string         `yaml:"name"`
		Input map[string]any `yaml:"input"`
	}
	// usageSpec: a nil field is estimated (tokens) or zero (cache).
	usageSpec struct {
		InputTokens              *int `yaml:"input_tokens"`
		OutputTokens             *int `yaml:"output_tokens"`
		CacheReadInputTokens     *int `yaml:"cache_read_input_tokens"`
		CacheCreationInputTokens *int `yaml:"cache_creation_input_tokens"`
	}
)

// set reports whether the script fixed any usage figure: then the rule's
// usage is the script's, not the prompt cache simulation's.
func (u usageSpec) set() bool {
	return u.InputTokens != nil || u.OutputTokens != nil || u.CacheReadInputTokens != nil || u.CacheCreationInputTokens != nil
}

var (
	toolNameRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`) })
	stopReasons = map[string]bool{
		"end_turn": true, "tool_use": true, "max_tokens": true,
		"stop_sequence": true, "pause_turn": true, "refusal": true,
	}
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
	data = jsonToYAML(data)
	var spec scriptSpec
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&spec); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse script: %s", yamlMessage(err))
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

	s.fallback = rule{}
	if fb := spec.Fallback; fb != nil {
		r, err := buildRule(ruleSpec{Reply: fb.Reply, StopReason: fb.StopReason, Usage: fb.Usage, Latency: fb.Latency})
		if err != nil {
			return nil, fmt.Errorf("fallback: %w", err)
		}
		r.Times = 0
		s.fallback = r
	} else {
		text := "fakeapi: no rule matched for agent ${agent}"
		s.fallback = rule{reply: []block{{text: &text}}, stopReason: "end_turn"}
	}

	for i := range spec.Rules {
		node := &spec.Rules[i]
		var rs ruleSpec
		if err := decodeStrict(node, &rs); err != nil {
			return nil, fmt.Errorf("rule %d (line %d): %s", i, node.Line, err)
		}
		r, err := buildRule(rs)
		if err != nil {
			return nil, fmt.Errorf("rule %d (line %d): %w", i, node.Line, err)
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
		return fmt.Errorf("unknown kind %q (want rate_limit, overloaded, server_error, drop or cut)", f.Kind)
	}
	if f.RetryAfter < 0 {
		return fmt.Errorf("retry_after must not be negative, got %v", f.RetryAfter)
	}
	return nil
}

func buildRule(rs ruleSpec) (rule, error) {
	r := rule{
		Cond:       fakescript.Cond{Agent: rs.Agent, Contains: rs.Contains, Times: 1},
		latency:    rs.Latency,
		stopReason: rs.StopReason,
		usage:      rs.Usage,
	}
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
	hasToolUse := false
	for j, bs := range rs.Reply {
		var kinds []string
		if bs.Text != nil {
			kinds = append(kinds, "text")
		}
		if bs.Thinking != nil {
			kinds = append(kinds, "thinking")
		}
		if bs.ToolUse != nil {
			kinds = append(kinds, "tool_use")
		}
		switch len(kinds) {
		case 0:
			return r, fmt.Errorf("reply block %d: has no kind (want one of text, thinking, tool_use)", j)
		case 1:
		default:
			return r, fmt.Errorf("reply block %d: has %s (want exactly one kind)", j, strings.Join(kinds, " and "))
		}
		b := block{text: bs.Text, thinking: bs.Thinking}
		if tu := bs.ToolUse; tu != nil {
			hasToolUse = true
			if !toolNameRE().MatchString(tu.Name) {
				return r, fmt.Errorf("reply block %d: tool_use name %q must match %s", j, tu.Name, toolNameRE())
			}
			input, err := fakescript.JSONable(tu.Input)
			if err != nil {
				return r, fmt.Errorf("reply block %d: tool_use input: %w", j, err)
			}
			m, _ := input.(map[string]any)
			if m == nil {
				m = map[string]any{}
			}
			if _, err := json.Marshal(m); err != nil {
				return r, fmt.Errorf("reply block %d: tool_use input: %w", j, err)
			}
			b.toolUse = &toolUseSpec{Name: tu.Name, Input: m}
		}
		r.reply = append(r.reply, b)
	}
	if r.stopReason == "" {
		r.stopReason = "end_turn"
		if hasToolUse {
			r.stopReason = "tool_use"
		}
	} else if !stopReasons[r.stopReason] {
		return r, fmt.Errorf("unknown stop_reason %q (want end_turn, tool_use, max_tokens, stop_sequence, pause_turn or refusal)", r.stopReason)
	}
	for name, v := range map[string]*int{
		"input_tokens": r.usage.InputTokens, "output_tokens": r.usage.OutputTokens,
		"cache_read_input_tokens": r.usage.CacheReadInputTokens, "cache_creation_input_tokens": r.usage.CacheCreationInputTokens,
	} {
		if v != nil && *v < 0 {
			return r, fmt.Errorf("usage.%s must not be negative", name)
		}
	}
	return r, nil
}

// decodeStrict decodes one node rejecting unknown keys, which yaml.v3's
// Node.Decode does not do: the node goes back to text first.
func decodeStrict(node *yaml.Node, v any) error {
	data, err := yaml.Marshal(node)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		// Lines of the re-encoded text mean nothing to the script's author.
		return errors.New(yamlLineRE().ReplaceAllString(yamlMessage(err), ""))
	}
	return nil
}

var (
	yamlLineRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`line \d+: `) })
	yamlUnknownRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`field (\S+) not found in type \S+`) })
	yamlTypeRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?:fakeapi\.|\*)(\w+Spec|Fault|FaultKind)`) })
)

// yamlMessage makes yaml.v3's errors read in the script's terms.
func yamlMessage(err error) string {
	var te *yaml.TypeError
	msg := err.Error()
	if errors.As(err, &te) {
		msg = strings.Join(te.Errors, "; ")
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = yamlUnknownRE().ReplaceAllString(msg, `unknown key "$1"`)
	msg = yamlTypeRE().ReplaceAllStringFunc(msg, func(s string) string {
		s = strings.TrimPrefix(strings.TrimPrefix(s, "*"), "fakeapi.")
		switch s {
		case "ruleSpec":
			return "rule"
		case "blockSpec":
			return "reply block"
		case "toolUseSpec":
			return "tool_use"
		case "usageSpec":
			return "usage"
		case "fallbackSpec":
			return "fallback"
		case "scriptSpec":
			return "script"
		}
		return strings.ToLower(s)
	})
	return msg
}

// jsonToYAML passes YAML through and re-encodes a JSON document as YAML:
// JSON is YAML, except that YAML refuses the tabs JSON writers indent with.
func jsonToYAML(data []byte) []byte {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' || !bytes.Contains(trimmed, []byte("\t")) {
		return data
	}
	// Only whitespace tabs matter (JSON escapes tabs inside strings), so
	// re-indenting with spaces keeps every value.
	var buf bytes.Buffer
	if err := json.Indent(&buf, trimmed, "", "  "); err != nil {
		return data // not JSON after all: let the YAML parser report it
	}
	return buf.Bytes()
}
