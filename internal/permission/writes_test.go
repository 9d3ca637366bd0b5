package permission

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWrites(t *testing.T) {
	for _, tc := range []struct {
		line    string
		want    []Written
		unknown bool
	}{
		{line: "echo hi > src/a.go", want: []Written{{Path: "src/a.go"}}},
		{line: "echo hi >> src/a.go 2>/dev/null", want: []Written{{Path: "src/a.go"}}},
		{line: "sed -i s/a/b/ src/a.go", want: []Written{{Path: "s/a/b/"}, {Path: "src/a.go"}}},
		{line: "cp x.go src/", want: []Written{{Path: "src/"}, {Path: "src/x.go"}}},
		{line: "rm -rf src", want: []Written{{Path: "src", Removes: true}}},
		{line: "echo x | tee -a b.txt", want: []Written{{Path: "b.txt"}}},
		{line: "sh -c 'touch c.txt'", want: []Written{{Path: "c.txt"}}},
		{line: "cat a.go | grep x", want: nil},
		{line: `echo hi > "$f"`, unknown: true},
		{line: `$cmd a.go`, unknown: true},
	} {
		got, unknown := Writes(tc.line)
		if diff := cmp.Diff(tc.want, got); diff != "" || unknown != tc.unknown {
			t.Errorf("Writes(%q): unknown %v, want %v; targets (-want +got):\n%s", tc.line, unknown, tc.unknown, diff)
		}
	}
}
