package todo

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReplace(t *testing.T) {
	many := make([]Item, MaxItems+1)
	for i := range many {
		many[i] = Item{Content: fmt.Sprint("step ", i), Status: Pending}
	}
	tests := []struct {
		name    string
		items   []Item
		want    []Item
		wantErr error
		errText string
	}{
		{name: "empty list clears", items: []Item{}, want: nil},
		{
			name: "trimmed",
			items: []Item{
				{Content: "  Write tests \n", Status: Completed},
				{Content: "Fix lint", Status: InProgress, ActiveForm: " Fixing lint "},
			},
			want: []Item{
				{Content: "Write tests", Status: Completed},
				{Content: "Fix lint", Status: InProgress, ActiveForm: "Fixing lint"},
			},
		},
		{name: "exactly the cap", items: many[:MaxItems], want: many[:MaxItems]},
		{
			name:    "over the cap",
			items:   many,
			wantErr: ErrTooMany,
			errText: "too many items: the list holds at most 20 items and got 21; merge small steps or drop finished ones",
		},
		{
			name:    "empty content",
			items:   []Item{{Content: "a", Status: Pending}, {Content: " \t", Status: Pending}},
			wantErr: ErrEmptyContent,
			errText: "empty content: item 2 has no content",
		},
		{
			name:    "unknown status",
			items:   []Item{{Content: "a", Status: "done"}},
			wantErr: ErrBadStatus,
			errText: `invalid status: item 1 ("a") has status "done"; use pending, in_progress or completed`,
		},
		{
			name: "two in progress",
			items: []Item{
				{Content: "Read code", Status: InProgress},
				{Content: "Plan", Status: Completed},
				{Content: "Write tests", Status: InProgress},
				{Content: "Fix lint", Status: InProgress},
			},
			wantErr: ErrManyInProgress,
			errText: `more than one item in progress: only one item may be in_progress at a time, but items 1 ("Read code"), 3 ("Write tests") and 4 ("Fix lint") are; keep the one you are working on and set the others to pending or completed`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l List
			before := []Item{{Content: "old", Status: Pending}}
			if err := l.Replace(before); err != nil {
				t.Fatal(err)
			}
			err := l.Replace(tt.items)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Replace error = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				if diff := cmp.Diff(tt.errText, err.Error()); diff != "" {
					t.Errorf("error text (-want +got):\n%s", diff)
				}
				tt.want = before // a refused list leaves the old one
			}
			if diff := cmp.Diff(tt.want, l.Items()); diff != "" {
				t.Errorf("Items (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderAndOpen(t *testing.T) {
	tests := []struct {
		name     string
		items    []Item
		want     string
		wantOpen bool
	}{
		{name: "empty", want: "", wantOpen: false},
		{
			name: "mixed",
			items: []Item{
				{Content: "Read the code", Status: Completed, ActiveForm: "Reading the code"},
				{Content: "Write the fix", Status: InProgress, ActiveForm: "Writing the fix"},
				{Content: "Run the tests", Status: Pending, ActiveForm: "Running the tests"},
				{Content: "Tidy", Status: Pending},
			},
			want:     "[x] Read the code\n[>] Writing the fix\n[ ] Run the tests\n[ ] Tidy",
			wantOpen: true,
		},
		{
			name:     "in progress without activeForm, multi-line content",
			items:    []Item{{Content: "Ship\nit", Status: InProgress}},
			want:     "[>] Ship it",
			wantOpen: true,
		},
		{
			name:     "all completed",
			items:    []Item{{Content: "a", Status: Completed}, {Content: "b", Status: Completed}},
			want:     "[x] a\n[x] b",
			wantOpen: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l List
			if err := l.Replace(tt.items); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, l.Render()); diff != "" {
				t.Errorf("Render (-want +got):\n%s", diff)
			}
			if got := l.Open(); got != tt.wantOpen {
				t.Errorf("Open = %v, want %v", got, tt.wantOpen)
			}
		})
	}
}

func TestAfterRound(t *testing.T) {
	openList := []Item{{Content: "Done", Status: Completed}, {Content: "Do", Status: InProgress, ActiveForm: "Doing"}}
	closedList := []Item{{Content: "Done", Status: Completed}}
	bash := []string{"bash"}
	two := []string{"read_file", "grep"}
	todo := []string{"bash", ToolName}

	tests := []struct {
		name   string
		items  []Item
		rounds [][]string
		// remind lists the 1-based rounds that must return a reminder.
		remind []int
	}{
		{name: "exactly after 3 rounds, then 3 more", items: openList, rounds: [][]string{bash, two, bash, bash, bash, bash, bash}, remind: []int{3, 6}},
		{name: "rounds without tools still count", items: openList, rounds: [][]string{nil, {}, nil}, remind: []int{3}},
		{name: "touched in round 2", items: openList, rounds: [][]string{bash, todo, bash, bash, bash}, remind: []int{5}},
		{name: "touched in every third round", items: openList, rounds: [][]string{bash, bash, todo, bash, bash, todo}, remind: nil},
		{name: "closed list", items: closedList, rounds: [][]string{bash, bash, bash, bash, bash, bash}, remind: nil},
		{name: "empty list", items: nil, rounds: [][]string{bash, bash, bash, bash}, remind: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l List
			if err := l.Replace(tt.items); err != nil {
				t.Fatal(err)
			}
			var got []int
			for i, names := range tt.rounds {
				if r := l.AfterRound(names); r != "" {
					got = append(got, i+1)
				}
			}
			if diff := cmp.Diff(tt.remind, got); diff != "" {
				t.Errorf("rounds with a reminder (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAfterRoundText(t *testing.T) {
	var l List
	if err := l.Replace([]Item{{Content: "Done", Status: Completed}, {Content: "Do", Status: InProgress, ActiveForm: "Doing"}, {Content: "Next", Status: Pending}}); err != nil {
		t.Fatal(err)
	}
	l.AfterRound(nil)
	l.AfterRound(nil)
	want := "<reminder>Your todo list has open items and has not been updated for 3 rounds:\n" +
		"[x] Done\n[>] Doing\n[ ] Next\n" +
		"If you have made progress, update it with TodoWrite now (mark finished items completed, set the one you are working on to in_progress); if it no longer fits the work, rewrite it. Do not mention this reminder to the user.</reminder>"
	if diff := cmp.Diff(want, l.AfterRound(nil)); diff != "" {
		t.Errorf("reminder (-want +got):\n%s", diff)
	}
}

func TestReplaceResetsCount(t *testing.T) {
	var l List
	items := []Item{{Content: "a", Status: Pending}}
	if err := l.Replace(items); err != nil {
		t.Fatal(err)
	}
	l.AfterRound(nil)
	l.AfterRound(nil)
	// Written by some path that does not report tool names: still fresh.
	if err := l.Replace(items); err != nil {
		t.Fatal(err)
	}
	if r := l.AfterRound(nil); r != "" {
		t.Errorf("reminder one round after Replace: %q", r)
	}
}

func TestConcurrent(t *testing.T) {
	var l List
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				_ = l.Replace([]Item{{Content: fmt.Sprint(i, j), Status: InProgress}})
				_ = l.AfterRound([]string{"bash"})
				_ = l.Render()
				_ = l.Open()
				if items := l.Items(); len(items) == 1 {
					items[0].Content = "mutating a copy"
				}
			}
		})
	}
	wg.Wait()
	if strings.Contains(l.Render(), "mutating") {
		t.Error("Items returned the list's own storage")
	}
}
