// Package fakescript is what the scripted fake model servers (fakeapi for
// the Anthropic Messages API, fakeopenai for chat completions) share: the
// conditions that pick a rule, the ${...} substitutions of a reply, and the
// turning of YAML values into JSON ones. The wire formats stay in the fakes.
//
// It must never depend on agents, teams or the store.
package fakescript

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Cond is when a rule answers: the agent (exact name, "" for any), a
// substring and a regular expression of the latest input, and how many
// calls it answers (0: any number).
type Cond struct {
	Agent    string
	Contains string
	Re       *regexp.Regexp
	Times    int
}

// Match reports whether the rule answers a call from agent whose latest
// input is latest, when it has answered used calls already; groups are the
// regex's submatches (nil without a regex).
func (c *Cond) Match(agent, latest string, used int) (groups []string, ok bool) {
	if c.Times > 0 && used >= c.Times {
		return nil, false
	}
	if c.Agent != "" && c.Agent != agent {
		return nil, false
	}
	if c.Contains != "" && !strings.Contains(latest, c.Contains) {
		return nil, false
	}
	if c.Re != nil {
		if groups = c.Re.FindStringSubmatch(latest); groups == nil {
			return nil, false
		}
	}
	return groups, true
}

// AgentOf returns group 1 of re's first match in a system prompt: the
// calling agent's name, or "".
func AgentOf(re *regexp.Regexp, system string) string {
	if m := re.FindStringSubmatch(system); len(m) > 1 {
		return m[1]
	}
	return ""
}

// Vars are the values of a reply's substitutions for one call.
type Vars struct {
	Agent  string
	Call   int
	Groups []string // Groups[0] is the whole match of the rule's regex
}

// Expand replaces ${agent}, ${call} and ${0}..${9} in s. Any other ${...}
// stays as written, so a shell command in a tool input keeps its variables.
func (v Vars) Expand(s string) string {
	if !strings.Contains(s, "${") {
		return s
	}
	var out strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			out.WriteString(s)
			return out.String()
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			out.WriteString(s)
			return out.String()
		}
		out.WriteString(s[:i])
		name := s[i+2 : i+end]
		switch {
		case name == "agent":
			out.WriteString(v.Agent)
		case name == "call":
			out.WriteString(strconv.Itoa(v.Call))
		case len(name) == 1 && name[0] >= '0' && name[0] <= '9':
			if g := int(name[0] - '0'); g < len(v.Groups) {
				out.WriteString(v.Groups[g])
			}
		default:
			out.WriteString(s[i : i+end+1])
		}
		s = s[i+end+1:]
	}
}

// ExpandAny expands every string inside a decoded JSON value, returning a
// copy.
func (v Vars) ExpandAny(x any) any {
	switch x := x.(type) {
	case string:
		return v.Expand(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = v.ExpandAny(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = v.ExpandAny(e)
		}
		return out
	}
	return x
}

// JSONable turns what yaml.v3 decodes into values encoding/json can
// marshal: maps with non-string keys get string keys, times become text,
// and numbers JSON cannot hold are an error.
func JSONable(v any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			n, err := JSONable(e)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			n, err := JSONable(e)
			if err != nil {
				return nil, err
			}
			out[fmt.Sprint(k)] = n
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			n, err := JSONable(e)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case time.Time:
		return v.Format(time.RFC3339Nano), nil
	case float64:
		if v != v || v > 1e308 || v < -1e308 {
			return nil, fmt.Errorf("number %v has no JSON form", v)
		}
	}
	return v, nil
}
