package skill

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Skill
		wantErr error
	}{
		{
			name: "plain",
			in:   "---\nname: pdf\ndescription: Fill PDF forms.\n---\n# PDF\n\nUse scripts/fill.py.\n",
			want: Skill{Name: "pdf", Description: "Fill PDF forms.", Body: "# PDF\n\nUse scripts/fill.py."},
		},
		{
			name: "literal block scalar",
			in:   "---\nname: review\ndescription: |\n  Review a change.\n  Look at tests first.\n---\nbody\n",
			want: Skill{Name: "review", Description: "Review a change.\nLook at tests first.", Body: "body"},
		},
		{
			name: "folded block scalar",
			in:   "---\nname: release\ndescription: >\n  Cut a release:\n  tag, build, publish.\n---\nbody\n",
			want: Skill{Name: "release", Description: "Cut a release: tag, build, publish.", Body: "body"},
		},
		{
			name: "extra keys, CRLF, BOM, trailing blanks on fences",
			in:   "\ufeff--- \r\nname: x1\r\ndescription: \"quoted: yes\"\r\nlicense: MIT\r\nallowed-tools: [bash]\r\nmetadata: {a: 1}\r\n---\t\r\n\r\n\r\n  indented first line\r\n",
			want: Skill{Name: "x1", Description: "quoted: yes", Body: "  indented first line"},
		},
		{
			name: "empty body",
			in:   "---\nname: a\ndescription: d\n---",
			want: Skill{Name: "a", Description: "d"},
		},
		{
			name: "a --- inside a block scalar ends the front matter only at column 0",
			in:   "---\nname: a\ndescription: |\n  before\n  ---\n  after\n---\nbody",
			want: Skill{Name: "a", Description: "before\n---\nafter", Body: "body"},
		},
		{name: "no front matter", in: "# Just markdown\n", wantErr: ErrNoFrontMatter},
		{name: "empty file", in: "", wantErr: ErrNoFrontMatter},
		{name: "fence alone", in: "---", wantErr: ErrUnclosedFrontMatter},
		{name: "unclosed", in: "---\nname: a\ndescription: d\n", wantErr: ErrUnclosedFrontMatter},
		{name: "invalid yaml", in: "---\nname: [a\ndescription: d\n---\n", wantErr: ErrInvalidYAML},
		{name: "not a mapping", in: "---\njust words\n---\n", wantErr: ErrInvalidYAML},
		{name: "empty front matter", in: "---\n---\nbody", wantErr: ErrMissingName},
		{name: "missing description", in: "---\nname: a\n---\n", wantErr: ErrMissingDescription},
		{name: "blank description", in: "---\nname: a\ndescription: \"  \"\n---\n", wantErr: ErrMissingDescription},
		{name: "upper case name", in: "---\nname: PDF\ndescription: d\n---\n", wantErr: ErrInvalidName},
		{name: "name with space", in: "---\nname: my skill\ndescription: d\n---\n", wantErr: ErrInvalidName},
		{name: "name starting with hyphen", in: "---\nname: -x\ndescription: d\n---\n", wantErr: ErrInvalidName},
		{name: "name too long", in: "---\nname: " + strings.Repeat("a", 65) + "\ndescription: d\n---\n", wantErr: ErrInvalidName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.in))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Parse error = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseNameLimit(t *testing.T) {
	name := strings.Repeat("a", 64)
	got, err := Parse([]byte("---\nname: " + name + "\ndescription: d\n---\n"))
	if err != nil || got.Name != name {
		t.Fatalf("Parse of a 64-character name = %q, %v; want it accepted", got.Name, err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"---\nname: pdf\ndescription: Fill PDF forms.\n---\nbody\n",
		"---\nname: a\ndescription: |\n  x\n  y\n---\n",
		"---\nname: a\ndescription: >\n  x\n  y\n---\n",
		"\ufeff---\r\nname: a\r\ndescription: d\r\n---\r\n",
		"---\n---\n",
		"---\nname: &a [*a]\n---\n",
		"---\na: &a [x,x]\nb: &b [*a,*a]\nc: [*b,*b]\n---\n",
		"---\nname: a\ndescription: d\n",
		"no front matter",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sk, err := Parse(data)
		if err != nil {
			if !cmp.Equal(sk, Skill{}) {
				t.Fatalf("Parse returned %+v with error %v", sk, err)
			}
			return
		}
		if !nameRE().MatchString(sk.Name) {
			t.Fatalf("accepted invalid name %q", sk.Name)
		}
		if strings.TrimSpace(sk.Description) == "" {
			t.Fatal("accepted an empty description")
		}
		if sk.Body != strings.TrimRight(sk.Body, " \t\n") || strings.HasPrefix(sk.Body, "\n") {
			t.Fatalf("body not trimmed: %q", sk.Body)
		}
	})
}
