package team

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/store"
)

func TestTaskRefs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		text string
		want []string
	}{
		{"I take #3, the parser.", []string{"3"}},
		{"Taking task 12 and task #4 next", []string{"12", "4"}},
		{"#x, #, task later, 3 things", nil},
		{"(#7)", []string{"7"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, taskRefs(tt.text)); diff != "" {
			t.Errorf("taskRefs(%q):\n%s", tt.text, diff)
		}
	}
}

func TestCastMember(t *testing.T) {
	t.Parallel()
	r := &store.Roster{Personas: []store.Persona{
		{Name: "Marlow", Role: "lead", Member: store.LeadName},
		{Name: "Wren", Role: "implementer"},
		{Name: "Oswin", Role: "tester"},
	}}
	var got []string
	for _, m := range []struct{ name, role string }{{"t1", "tester"}, {"i1", "designer"}, {"t1", "tester"}, {"x", ""}} {
		p, ok := castMember(r, m.name, m.role)
		if !ok {
			got = append(got, m.name+":-")
			continue
		}
		got = append(got, m.name+":"+p.Name)
	}
	// The role's persona first, then the first free; a member keeps its
	// own; none left is no persona.
	if diff := cmp.Diff([]string{"t1:Oswin", "i1:Wren", "t1:Oswin", "x:-"}, got); diff != "" {
		t.Error(diff)
	}
	releasePersona(r, "i1")
	if p, ok := castMember(r, "x", ""); !ok || p.Name != "Wren" {
		t.Errorf("a released persona is not cast again: %+v %v", p, ok)
	}
}
