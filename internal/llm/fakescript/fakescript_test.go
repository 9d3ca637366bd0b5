package fakescript

import (
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMatch(t *testing.T) {
	re := regexp.MustCompile(`task #(\d+)`)
	for _, tc := range []struct {
		name   string
		c      Cond
		agent  string
		latest string
		used   int
		ok     bool
		groups []string
	}{
		{"any", Cond{}, "alice", "hi", 5, true, nil},
		{"agent", Cond{Agent: "bob"}, "alice", "hi", 0, false, nil},
		{"contains", Cond{Contains: "plan"}, "alice", "my plan", 0, true, nil},
		{"exhausted", Cond{Times: 2}, "alice", "hi", 2, false, nil},
		{"regex", Cond{Re: re}, "x", "claimed task #12 now", 0, true, []string{"task #12", "12"}},
		{"regex misses", Cond{Re: re}, "x", "nothing", 0, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			groups, ok := tc.c.Match(tc.agent, tc.latest, tc.used)
			if ok != tc.ok {
				t.Fatalf("ok = %v", ok)
			}
			if diff := cmp.Diff(tc.groups, groups); diff != "" {
				t.Errorf("groups (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	v := Vars{Agent: "alice", Call: 7, Groups: []string{"task #3", "3"}}
	got := v.ExpandAny(map[string]any{"cmd": "echo ${agent} ${call} ${1} ${HOME} ${9}", "n": 1.0, "l": []any{"${0}"}})
	want := map[string]any{"cmd": "echo alice 7 3 ${HOME} ", "n": 1.0, "l": []any{"task #3"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := v.Expand("unclosed ${agent"); got != "unclosed ${agent" {
		t.Errorf("unclosed = %q", got)
	}
}

func TestJSONable(t *testing.T) {
	got, err := JSONable(map[any]any{1: []any{map[any]any{"a": true}}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"1": []any{map[string]any{"a": true}}}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
