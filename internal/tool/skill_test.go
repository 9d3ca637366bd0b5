package tool_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/skill"
	"github.com/troupe-dev/troupe/internal/tool"
)

func TestSkillTool(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(ws, ".troupe", "skills", "review", "SKILL.md")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	text := "---\nname: review\ndescription: |\n  Review a change.\n---\nRead the tests first.\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	set, warns := skill.Discover(ws, skill.Options{NoUser: true})
	if len(warns) != 0 {
		t.Fatalf("warnings: %v", warns)
	}
	st := tool.SkillTool(set)
	if st.Spec().Name != "Skill" || !st.ReadOnly() {
		t.Errorf("spec name %q, read-only %v; want Skill, true", st.Spec().Name, st.ReadOnly())
	}
	var schema map[string]any
	if err := json.Unmarshal(st.Spec().InputSchema, &schema); err != nil {
		t.Fatalf("input schema: %v", err)
	}

	tests := []struct {
		name  string
		tool  tool.Tool
		input string
		want  tool.Result
	}{
		{
			name:  "known",
			tool:  st,
			input: `{"name":"review"}`,
			want:  tool.OK("<skill name=\"review\" dir=\".troupe/skills/review\">\nRead the tests first.\n</skill>"),
		},
		{
			name:  "unknown lists the known ones",
			tool:  st,
			input: `{"name":"deploy"}`,
			want:  tool.Errorf(`unknown skill "deploy"; the skills available are: review`),
		},
		{
			name:  "missing name",
			tool:  st,
			input: `{}`,
			want:  tool.Errorf(`invalid arguments for Skill: "name" is required`),
		},
		{
			name:  "blank name",
			tool:  st,
			input: `{"name":"  "}`,
			want:  tool.Errorf(`invalid arguments for Skill: "name" is empty; the skills available are: review`),
		},
		{
			name:  "wrong type",
			tool:  st,
			input: `{"name":3}`,
			want:  tool.Errorf(`invalid arguments for Skill: "name" must be a string, got number`),
		},
		{
			name:  "no skills",
			tool:  tool.SkillTool(nil),
			input: `{"name":"review"}`,
			want:  tool.Errorf(`unknown skill "review": no skills are installed`),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.tool.Run(context.Background(), &tool.Env{}, json.RawMessage(tt.input))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Run (-want +got):\n%s", diff)
			}
		})
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := st.Run(ctx, &tool.Env{}, json.RawMessage(`{"name":"review"}`)); !got.IsError {
		t.Errorf("Run with a cancelled context = %+v, want an error", got)
	}
}
