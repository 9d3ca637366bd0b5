package tool

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// noResponse leaves Result.Response out of comparisons that are about what
// the model sees; TestResponses checks it.
var noResponse = cmpopts.IgnoreFields(Result{}, "Response")

// TestResponses checks the tool_response objects the file and bash tools
// give hooks, in Claude Code's shape.
func TestResponses(t *testing.T) {
	env := newTestEnv(t)
	dir := env.Workspace.Dir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\ntwo\nthree\nfour\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	orig := "one\ntwo\nthree\nfour\n"
	tests := []struct {
		name string
		tool Tool
		args map[string]any
		want any
	}{
		{"read", readFileTool{}, map[string]any{"path": "a.txt", "offset": 2, "limit": 2},
			ReadResponse{Type: "text", File: ReadFile{FilePath: filepath.Join(dir, "a.txt"), Content: "two\nthree\n", NumLines: 2, StartLine: 2, TotalLines: 4}}},
		{"edit", editFileTool{}, map[string]any{"path": "a.txt", "old_string": "two", "new_string": "TWO"},
			EditResponse{FilePath: filepath.Join(dir, "a.txt"), OldString: "two", NewString: "TWO", OriginalFile: orig,
				StructuredPatch: []Hunk{{OldStart: 1, OldLines: 4, NewStart: 1, NewLines: 4, Lines: []string{" one", "-two", "+TWO", " three", " four"}}}}},
		{"write new", writeFileTool{}, map[string]any{"path": "sub/b.txt", "content": "hi\n"},
			WriteResponse{Type: "create", FilePath: filepath.Join(dir, "sub/b.txt"), Content: "hi\n", StructuredPatch: []Hunk{}}},
		{"write again", writeFileTool{}, map[string]any{"path": "sub/b.txt", "content": "ho\n"},
			WriteResponse{Type: "update", FilePath: filepath.Join(dir, "sub/b.txt"), Content: "ho\n", OriginalFile: ptr("hi\n"),
				StructuredPatch: []Hunk{{OldStart: 1, OldLines: 1, NewStart: 1, NewLines: 1, Lines: []string{"-hi", "+ho"}}}}},
		{"bash", bashTool{}, map[string]any{"command": "echo out"}, BashResponse{Stdout: "out\n"}},
	}
	for _, tt := range tests {
		got := call(t, tt.tool, env, tt.args)
		if got.IsError {
			t.Fatalf("%s: %s", tt.name, got.Content)
		}
		if diff := cmp.Diff(tt.want, got.Response); diff != "" {
			t.Errorf("%s response (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestPatch(t *testing.T) {
	tests := []struct {
		name, old, new string
		want           []Hunk
	}{
		{"same", "a\n", "a\n", []Hunk{}},
		{"append", "a\n", "a\nb\n", []Hunk{{OldStart: 1, OldLines: 1, NewStart: 1, NewLines: 2, Lines: []string{" a", "+b"}}}},
		{"create", "", "x\n", []Hunk{{OldStart: 0, OldLines: 0, NewStart: 1, NewLines: 1, Lines: []string{"+x"}}}},
		{"far context", "1\n2\n3\n4\n5\n6\n7\n8\n", "1\n2\n3\n4\nV\n6\n7\n8\n",
			[]Hunk{{OldStart: 2, OldLines: 7, NewStart: 2, NewLines: 7, Lines: []string{" 2", " 3", " 4", "-5", "+V", " 6", " 7", " 8"}}}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, Patch(tt.old, tt.new)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

func ptr(s string) *string { return &s }
