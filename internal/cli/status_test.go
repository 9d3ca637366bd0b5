package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	assembly "github.com/troupe-dev/troupe/internal/app"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// deadPID is the pid of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.ProcessState.Pid()
}

// TestTeamStatusDeadPID: a member whose recorded process is gone shows dead
// at once, though its heartbeat is fresh; the lead's model comes from its
// last model call and its status from the process that ran it.
func TestTeamStatusDeadPID(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC()
	dead := deadPID(t)
	for _, tc := range []struct {
		name    string
		members []store.Member
		spawns  map[string]string // member -> teammate mode
		want    []string
	}{
		{
			name: "in-process-team-gone",
			members: []store.Member{
				{Name: "alice", Role: "coder", Model: "sonnet", Status: store.StatusWorking, PID: dead, HeartbeatAt: now},
				{Name: "bob", Role: "tester", Status: store.StatusShutdown, PID: dead, HeartbeatAt: now},
			},
			spawns: map[string]string{"alice": team.ModeInProcess, "bob": team.ModeInProcess},
			want: []string{
				`(?m)^team-lead\s+lead\s+dead\s+claude-test-1\s+0$`,
				`(?m)^alice\s+coder\s+dead\s+sonnet\s+0$`,
				`(?m)^bob\s+tester\s+shutdown\s+-\s+0$`,
			},
		},
		{
			name: "live-lead-dead-process-teammate",
			members: []store.Member{
				{Name: "alice", Role: "coder", Status: store.StatusIdle, PID: os.Getpid(), HeartbeatAt: now},
				{Name: "carol", Role: "writer", Status: store.StatusWorking, PID: dead, HeartbeatAt: now},
			},
			spawns: map[string]string{"alice": team.ModeInProcess, "carol": team.ModeProcess},
			want: []string{
				`(?m)^team-lead\s+lead\s+running\s+claude-test-1\s+0$`,
				`(?m)^alice\s+coder\s+idle\s+-\s+0$`,
				`(?m)^carol\s+writer\s+dead\s+-\s+0$`,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ws := t.TempDir()
			s, err := assembly.OpenStore(ctx, "file:"+ws+"/.troupe")
			if err != nil {
				t.Fatal(err)
			}
			tm, err := s.CreateTeam(ctx, store.Roster{Name: "t1", Members: tc.members})
			if err != nil {
				t.Fatal(err)
			}
			for member, mode := range tc.spawns {
				appendEvent(t, tm, store.LeadName, teamevent.Spawn{Member: member, Mode: mode})
			}
			appendEvent(t, tm, store.LeadName, teamevent.Usage{AgentName: store.LeadName, Model: "claude-test-1"})
			s.Close()

			var stdout, stderr bytes.Buffer
			if code := Main(ctx, []string{"team", "status", "t1", "--workspace", ws}, strings.NewReader(""), &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			for _, w := range tc.want {
				if !regexp.MustCompile(w).MatchString(stdout.String()) {
					t.Errorf("status lacks %q:\n%s", w, stdout.String())
				}
			}
		})
	}
}

func appendEvent(t *testing.T, tm store.Team, agent string, ev teamevent.Event) {
	t.Helper()
	e, err := teamevent.Encode(agent, ev)
	if err != nil {
		t.Fatal(err)
	}
	if err := tm.Journal().Append(context.Background(), e); err != nil {
		t.Fatal(err)
	}
}
