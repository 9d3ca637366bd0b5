//go:build unix

package tool

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSearchSkipsSpecialFiles: grep never opens a FIFO, a socket or a
// link to one, and naming one returns at once with an error; glob does not
// list FIFOs and sockets.
func TestSearchSkipsSpecialFiles(t *testing.T) {
	env := newTestEnv(t)
	ws := env.Workspace.Dir()
	writeFiles(t, ws, map[string]string{"a.txt": "needle\n", "sub/b.txt": "needle\n"})
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo.txt"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("fifo.txt", filepath.Join(ws, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(ws, "good.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub", filepath.Join(ws, "dir.txt")); err != nil {
		t.Fatal(err)
	}
	// A socket path is short-lived in a temp dir: bind it relative to the
	// workspace.
	wd, _ := os.Getwd()
	if err := os.Chdir(ws); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", "sock.txt")
	os.Chdir(wd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })

	tests := []struct {
		name string
		tool Tool
		args map[string]any
		want Result
	}{
		{"grep a folder", grepTool{}, map[string]any{"pattern": "needle"}, OK("a.txt\nsub/b.txt\n")},
		{"grep a FIFO", grepTool{}, map[string]any{"pattern": "needle", "path": "fifo.txt"}, Errorf(`grep: "fifo.txt" is not a regular file`)},
		{"grep a link to a FIFO", grepTool{}, map[string]any{"pattern": "needle", "path": "link.txt"}, Errorf(`grep: "link.txt" is not a regular file`)},
		{"grep a socket", grepTool{}, map[string]any{"pattern": "needle", "path": "sock.txt"}, Errorf(`grep: "sock.txt" is not a regular file`)},
		{"grep a link to a file", grepTool{}, map[string]any{"pattern": "needle", "path": "good.txt"}, OK("good.txt\n")},
		{"glob", globTool{}, map[string]any{"pattern": "*.txt"}, OK("a.txt\ndir.txt\ngood.txt\nlink.txt\n")}, // links listed as links
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan Result, 1)
			go func() { done <- call(t, tc.tool, env, tc.args) }()
			var got Result
			select {
			case got = <-done:
			case <-time.After(10 * time.Second): // a bound on a hang, not a synchronisation
				t.Fatal("the search blocked on a special file")
			}
			if tc.name == "glob" { // newest first: the links were made last
				lines := strings.Split(strings.TrimSpace(got.Content), "\n")
				slices.Sort(lines)
				got.Content = strings.Join(lines, "\n") + "\n"
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
