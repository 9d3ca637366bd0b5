package team

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/store/file"
)

// A team whose board holds a task that cannot be read is never done: the
// lead's wait reports it stuck, naming the task and its file; the TaskList
// tool shows it as corrupt where it belongs on the board.
func TestCorruptTaskKeepsTeamFromDone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := file.Open(dir, file.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	tm, err := st.CreateTeam(ctx, store.Roster{Name: "t1", Members: []store.Member{{Name: "alice", Status: store.StatusShutdown}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, subj := range []string{"one", "two", "three"} {
		if _, err := tm.Tasks().Create(ctx, store.Task{Subject: subj, Status: store.TaskCompleted}); err != nil {
			t.Fatal(err)
		}
	}
	s := &Session{proto: newProtocol()}
	if got, err := s.assess(ctx, tm); err != nil || !got.done {
		t.Fatalf("state of a finished board = %+v, %v; want done", got, err)
	}
	path := filepath.Join(dir, "teams/t1/tasks/2.json")
	if err := os.WriteFile(path, []byte(`{"id":"2","subject":"two","status":"in_pro`), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := s.assess(ctx, tm)
	if err != nil {
		t.Fatal(err)
	}
	if got.done || !got.stuck() || !strings.Contains(got.why(), "#2") || !strings.Contains(got.why(), "corrupt") || !strings.Contains(got.why(), path) {
		t.Errorf("state with corrupt task 2 = %+v; want stuck, naming #2, corrupt and %s", got, path)
	}

	res := taskListTool{b: &binding{fixed: tm}}.Run(ctx, nil, json.RawMessage(`{}`))
	lines := strings.Split(res.Content, "\n")
	if res.IsError || len(lines) != 3 || !strings.HasPrefix(lines[0], "#1 [completed]") ||
		!strings.HasPrefix(lines[1], "#2 [corrupt]") || !strings.Contains(lines[1], path) || !strings.HasPrefix(lines[2], "#3 [completed]") {
		t.Errorf("TaskList =\n%s", res.Content)
	}
}
