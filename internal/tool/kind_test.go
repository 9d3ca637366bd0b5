package tool_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

// TestKinds: every tool of the package says what it does, and the kind a
// caller looks up by name (KindOf, Registry.Kind) is the one it declares.
func TestKinds(t *testing.T) {
	want := map[string]kind.Kind{
		"bash": kind.Execute, "read_file": kind.Read, "write_file": kind.Edit, "edit_file": kind.Edit,
		"glob": kind.Read, "grep": kind.Read, "TaskOutput": kind.Manage, "TaskStop": kind.Manage,
		"TodoWrite": kind.Manage, "Task": kind.Manage, "Skill": kind.Read, "compact": kind.Manage,
	}
	got := map[string]kind.Kind{}
	for _, tl := range tool.All() {
		name := tl.Spec().Name
		if tl.Kind() == kind.Unknown {
			t.Errorf("%s declares no kind", name)
		}
		if _, dup := got[name]; dup {
			t.Errorf("All holds %s twice", name)
		}
		got[name] = tl.Kind()
		if k := tool.KindOf(name); k != tl.Kind() {
			t.Errorf("KindOf(%s) = %s, want %s", name, k, tl.Kind())
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
	// Read-only tools change nothing: none of them edits or executes.
	for _, tl := range tool.All() {
		if tl.ReadOnly() && tl.Kind().Changes() {
			t.Errorf("%s is read-only but of kind %s", tl.Spec().Name, tl.Kind())
		}
	}
	if k := tool.KindOf("mcp__github__create_issue"); k != kind.Unknown {
		t.Errorf("KindOf of a name troupe has no tool for = %s, want unknown", k)
	}
	r := tool.NewRegistry(tool.Builtins()...)
	if k := r.Kind("write_file"); k != kind.Edit {
		t.Errorf("Registry.Kind(write_file) = %s", k)
	}
	if k := r.Kind("Task"); k != kind.Unknown {
		t.Errorf("Registry.Kind of a tool it lacks = %s, want unknown", k)
	}
}
