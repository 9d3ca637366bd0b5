package shellwords

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func texts(l Line) []string {
	var out []string
	for _, s := range l.Segments {
		out = append(out, s.Text)
	}
	return out
}

func TestParse(t *testing.T) {
	tests := []struct {
		cmd          string
		want         []string
		subst, redir bool
	}{
		{"git status", []string{"git status"}, false, false},
		{"git status && rm -rf x; ls | wc -l", []string{"git status", "rm -rf x", "ls", "wc -l"}, false, false},
		{`echo "a; b && c"`, []string{`echo "a; b && c"`}, false, false},
		{`echo 'x|y' & sleep 1`, []string{`echo 'x|y'`, "sleep 1"}, false, false},
		{"go test ./... 2>&1", []string{"go test ./... 2>&1"}, false, false},
		{"echo hi > out.txt", []string{"echo hi > out.txt"}, false, true},
		{"make &> log", []string{"make &> log"}, false, true},
		{`echo "$(rm -rf /)"`, []string{"rm -rf /", `echo "$(rm -rf /)"`}, true, false},
		{"echo `whoami`", []string{"whoami", "echo `whoami`"}, true, false},
		{"(cd x && rm y)", []string{"cd x", "rm y"}, false, false},
		{"{ ls; }", []string{"ls"}, false, false},
		{"a\nb", []string{"a", "b"}, false, false},
		{`echo \; rm`, []string{`echo \; rm`}, false, false},
		{"diff <(ls a) <(ls b)", []string{"ls a", "ls b", "diff <(ls a) <(ls b)"}, true, false},
		{"", nil, false, false},
	}
	for _, tt := range tests {
		l := Parse(tt.cmd)
		if diff := cmp.Diff(tt.want, texts(l)); diff != "" {
			t.Errorf("Parse(%q) segments (-want +got):\n%s", tt.cmd, diff)
		}
		if l.Substitution != tt.subst || l.Redirect != tt.redir {
			t.Errorf("Parse(%q): substitution %v redirect %v, want %v %v", tt.cmd, l.Substitution, l.Redirect, tt.subst, tt.redir)
		}
	}
}

func TestWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{`git commit -m "fix: a b"`, []string{"git", "commit", "-m", "fix: a b"}},
		{`echo 'it''s' "" x\ y`, []string{"echo", "its", "", "x y"}},
		{`echo "a \"q\" \n"`, []string{"echo", `a "q" \n`}},
		{`git commit -m "$(cat <<'EOF'` + "\nmsg (x)\nEOF\n)\"", []string{"git", "commit", "-m", "$(cat <<'EOF'\nmsg (x)\nEOF\n)"}},
		{"  ", nil},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, Words(tt.in)); diff != "" {
			t.Errorf("Words(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestStripAssignments(t *testing.T) {
	got := StripAssignments([]string{"FOO=1", "A_2=x=y", "rm", "B=2"})
	if diff := cmp.Diff([]string{"rm", "B=2"}, got); diff != "" {
		t.Error(diff)
	}
	if got := StripAssignments([]string{"=x", "ls"}); len(got) != 2 {
		t.Errorf("=x is not an assignment: %q", got)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"a && b", `echo "$(x)"`, "`a`", "((", "$(", `'`, `"\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l := Parse(s)
		for _, seg := range l.Segments {
			_ = seg.Words
		}
		_ = Words(s)
	})
}
