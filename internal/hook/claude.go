package hook

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/troupe-dev/troupe/internal/permission"
)

// Hooks see Claude Code's tool names and input shapes; the model keeps
// troupe's. This file translates both ways.

// subagentTool is Claude Code's current name of the tool that starts a
// subagent (troupe's Task); matchers written for its former name, Task,
// match it too.
const subagentTool = "Agent"

// ToolName is Claude Code's name for a troupe tool, as hooks see it in
// tool_name ("Bash" for bash, "Agent" for Task); tools both name alike keep
// their name.
func ToolName(name string) string {
	if name == "Task" {
		return subagentTool
	}
	return permission.ClaudeName(name)
}

// toolNames are the names a tool matcher is tried against: Claude Code's,
// the former one of the subagent tool, troupe's own.
func toolNames(name string) []string {
	out := []string{ToolName(name)}
	if name == "Task" {
		out = append(out, "Task")
	} else if name != out[0] {
		out = append(out, name)
	}
	return out
}

// field renames one input field between troupe and Claude Code.
type field struct {
	troupe, claude string
	path           bool // a path: absolute for hooks
	millis         bool // seconds in troupe, milliseconds in Claude Code
}

var toolFields = map[string][]field{
	"bash":       {{troupe: "timeout", claude: "timeout", millis: true}},
	"read_file":  {{troupe: "path", claude: "file_path", path: true}},
	"write_file": {{troupe: "path", claude: "file_path", path: true}},
	"edit_file":  {{troupe: "path", claude: "file_path", path: true}},
	"glob":       {{troupe: "path", claude: "path", path: true}},
	"grep": {{troupe: "path", claude: "path", path: true}, {troupe: "ignore_case", claude: "-i"},
		{troupe: "context", claude: "-C"}, {troupe: "max_results", claude: "head_limit"}},
}

// claudeInput returns a troupe tool's input in Claude Code's shape:
// file_path absolute (dir is the workspace), replace_all always present on
// Edit, a Bash timeout in milliseconds. Input that is not a JSON object is
// returned as it is.
func claudeInput(name string, input json.RawMessage, dir string) json.RawMessage {
	fields, known := toolFields[name]
	if !known {
		return input
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(input, &m) != nil || m == nil {
		return input
	}
	for _, f := range fields {
		v, ok := m[f.troupe]
		if !ok {
			continue
		}
		delete(m, f.troupe)
		switch {
		case f.path:
			var p string
			if json.Unmarshal(v, &p) == nil && p != "" && dir != "" && !filepath.IsAbs(p) {
				v, _ = json.Marshal(filepath.Join(dir, p))
			}
		case f.millis:
			var n float64
			if json.Unmarshal(v, &n) == nil {
				v, _ = json.Marshal(int64(n * 1000))
			}
		}
		m[f.claude] = v
	}
	if name == "edit_file" {
		if _, ok := m["replace_all"]; !ok {
			m["replace_all"] = json.RawMessage("false")
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		return input
	}
	return out
}

// troupeInput maps a hook's updatedInput (Claude Code's shape) back to
// the troupe tool's: the inverse of claudeInput. As in Claude Code, it
// replaces the whole input.
func troupeInput(name string, updated json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(updated, &m); err != nil || m == nil {
		return nil, fmt.Errorf("updatedInput for %s is not a JSON object", ToolName(name))
	}
	for _, f := range toolFields[name] {
		v, ok := m[f.claude]
		if !ok {
			continue
		}
		delete(m, f.claude)
		if f.millis {
			var n float64
			if err := json.Unmarshal(v, &n); err != nil {
				return nil, fmt.Errorf("updatedInput for %s: %s is not a number of milliseconds", ToolName(name), f.claude)
			}
			secs := int64(n+999) / 1000 // troupe counts whole seconds; round up
			v, _ = json.Marshal(max(secs, 1))
		}
		m[f.troupe] = v
	}
	return json.Marshal(m)
}
