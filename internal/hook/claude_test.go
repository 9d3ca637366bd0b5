package hook

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestClaudeShapes: troupe's tool names and inputs as Claude Code's hooks
// see them, and a hook's updatedInput mapped back.
func TestClaudeShapes(t *testing.T) {
	tests := []struct {
		tool, claudeName, in, claude, back string
	}{
		{"read_file", "Read", `{"path":"a.go","offset":3,"limit":10}`, `{"file_path":"/ws/a.go","limit":10,"offset":3}`, `{"limit":10,"offset":3,"path":"/ws/a.go"}`},
		{"write_file", "Write", `{"path":"/ws/b","content":"x"}`, `{"content":"x","file_path":"/ws/b"}`, `{"content":"x","path":"/ws/b"}`},
		{"edit_file", "Edit", `{"path":"c","old_string":"a","new_string":"b"}`, `{"file_path":"/ws/c","new_string":"b","old_string":"a","replace_all":false}`,
			`{"new_string":"b","old_string":"a","path":"/ws/c","replace_all":false}`},
		{"bash", "Bash", `{"command":"make","timeout":90}`, `{"command":"make","timeout":90000}`, `{"command":"make","timeout":90}`},
		{"grep", "Grep", `{"pattern":"x","ignore_case":true,"context":2,"max_results":5}`, `{"-C":2,"-i":true,"head_limit":5,"pattern":"x"}`,
			`{"context":2,"ignore_case":true,"max_results":5,"pattern":"x"}`},
		{"glob", "Glob", `{"pattern":"*.go","path":"sub"}`, `{"path":"/ws/sub","pattern":"*.go"}`, `{"path":"/ws/sub","pattern":"*.go"}`},
		{"Task", "Agent", `{"prompt":"p"}`, `{"prompt":"p"}`, `{"prompt":"p"}`},
		{"TaskCreate", "TaskCreate", `{"subject":"s"}`, `{"subject":"s"}`, `{"subject":"s"}`},
	}
	for _, tt := range tests {
		if got := ToolName(tt.tool); got != tt.claudeName {
			t.Errorf("ToolName(%s) = %s, want %s", tt.tool, got, tt.claudeName)
		}
		claude := claudeInput(tt.tool, json.RawMessage(tt.in), "/ws")
		if diff := cmp.Diff(tt.claude, string(claude)); diff != "" {
			t.Errorf("%s to Claude Code (-want +got):\n%s", tt.tool, diff)
		}
		back, err := troupeInput(tt.tool, claude)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.back, string(back)); diff != "" {
			t.Errorf("%s back (-want +got):\n%s", tt.tool, diff)
		}
	}
	if _, err := troupeInput("bash", json.RawMessage(`"rm"`)); err == nil {
		t.Error("an updatedInput that is not an object was taken")
	}
	if got, _ := troupeInput("bash", json.RawMessage(`{"command":"x","timeout":1500}`)); string(got) != `{"command":"x","timeout":2}` {
		t.Errorf("milliseconds round up to whole seconds: %s", got)
	}
}
