package llm

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNormalize(t *testing.T) {
	u := func(b ...Block) Message { return Message{Role: RoleUser, Content: b} }
	as := func(b ...Block) Message { return Message{Role: RoleAssistant, Content: b} }
	use := Block{Type: BlockToolUse, ID: "t1", Name: "bash"}
	res := ToolResultBlock("t1", "out", false)
	for _, tc := range []struct {
		name    string
		in      []Message
		want    []Message
		wantErr bool
	}{
		{name: "already fine", in: []Message{u(TextBlock("a")), as(TextBlock("b")), u(TextBlock("c"))},
			want: []Message{u(TextBlock("a")), as(TextBlock("b")), u(TextBlock("c"))}},
		{name: "consecutive users merged", in: []Message{u(TextBlock("a")), u(TextBlock("b"))},
			want: []Message{u(TextBlock("a"), TextBlock("b"))}},
		{name: "merged results go first", in: []Message{u(TextBlock("go")), as(use), u(TextBlock("inbox")), u(res)},
			want: []Message{u(TextBlock("go")), as(use), u(res, TextBlock("inbox"))}},
		{name: "empty dropped", in: []Message{u(TextBlock("a")), as(), u(TextBlock("b"))},
			want: []Message{u(TextBlock("a"), TextBlock("b"))}},
		{name: "trailing assistant refused", in: []Message{u(TextBlock("a")), as(TextBlock("Noted."))}, wantErr: true},
		{name: "leading assistant refused", in: []Message{as(TextBlock("x")), u(TextBlock("a"))}, wantErr: true},
		{name: "nothing refused", in: nil, wantErr: true},
		{name: "bad role refused", in: []Message{{Role: "system", Content: []Block{TextBlock("x")}}}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Normalize(tc.in)
			if tc.wantErr {
				if !errors.Is(err, ErrInvalidRequest) {
					t.Fatalf("err = %v, want ErrInvalidRequest", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
