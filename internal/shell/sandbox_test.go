package shell

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// sandboxOrSkip skips only when bubblewrap is truly missing or cannot
// create namespaces here; CI installs it.
func sandboxOrSkip(t *testing.T, s *Sandbox) {
	t.Helper()
	if err := CheckSandbox(t.Context(), s); err != nil {
		if !errors.Is(err, ErrNoSandbox) {
			t.Fatal(err)
		}
		t.Skipf("no sandbox here: %v", err)
	}
}

func TestSandbox(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	// Outside the workspace and outside /tmp (private in the sandbox), so
	// that a refused write is refused by the read-only filesystem.
	outside, err := os.MkdirTemp("/var/tmp", "troupe-sandbox-outside-")
	if err != nil {
		outside, err = os.MkdirTemp(".", "troupe-sandbox-outside-")
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	outside, _ = filepath.Abs(outside)
	// Everything outside the workspace is in the private /tmp of the
	// sandbox: the home directory under test lies in the workspace.
	home := filepath.Join(ws, "home")
	for _, d := range []string{ws, filepath.Join(ws, ".troupe"), filepath.Join(ws, ".git", "hooks"), filepath.Join(ws, ".claude"), filepath.Join(home, ".ssh")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for path, text := range map[string]string{
		filepath.Join(ws, ".git", "config"):       "[core]\n",
		filepath.Join(home, ".ssh", "id_ed25519"): "PRIVATE KEY",
		filepath.Join(home, ".netrc"):             "machine x password p",
		filepath.Join(home, "notes.txt"):          "readable",
	} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sb := &Sandbox{Protected: ProtectedPaths(ws), Hidden: HiddenPaths(home)}
	sandboxOrSkip(t, sb)
	if err := os.WriteFile("/tmp/troupe-sandbox-host-file", []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove("/tmp/troupe-sandbox-host-file") })

	tests := []struct {
		name, command string
		wantOK        bool
		wantOut       string
	}{
		{"write in the workspace", "echo hi > f && cat f", true, "hi\n"},
		{"outside is there", "test -d " + outside + " && echo yes", true, "yes\n"},
		{"write outside", "echo x > " + outside + "/f", false, ""},
		{"write to .troupe", "echo x > .troupe/evil", false, ""},
		{"write to .git/hooks", "echo x > .git/hooks/pre-commit", false, ""},
		{"write to .git/config", "echo x >> .git/config", false, ""},
		{"create .claude/settings.json", "mkdir -p .claude && echo '{}' > .claude/settings.json", false, ""},
		{"move .troupe away", "mv .troupe gone", false, ""},
		{"private /tmp", "test ! -e /tmp/troupe-sandbox-host-file && echo x > /tmp/scratch && cat /tmp/scratch", true, "x\n"},
		{"hidden key", "cat " + home + "/.ssh/id_ed25519 2>/dev/null; ls " + home + "/.ssh; cat " + home + "/.netrc; echo end", true, "end\n"},
		{"readable home", "cat " + home + "/notes.txt", true, "readable"},
		{"no network", "grep -c : /proc/net/dev", true, "1\n"}, // one line per interface: only lo
		{"setsid stays inside", "setsid sleep 1000 & echo started", true, "started\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Run(t.Context(), Options{Dir: ws, Command: tc.command, Sandbox: sb})
			if err != nil {
				t.Fatal(err)
			}
			if ok := got.ExitCode == 0; ok != tc.wantOK {
				t.Fatalf("exit %d, output %q; want success %v", got.ExitCode, got.Output, tc.wantOK)
			}
			if tc.wantOK && got.Output != tc.wantOut {
				t.Errorf("output %q, want %q", got.Output, tc.wantOut)
			}
		})
	}
	for _, p := range []string{filepath.Join(outside, "f"), filepath.Join(ws, ".troupe", "evil"), filepath.Join(ws, ".claude", "settings.json"), filepath.Join(ws, ".git", "hooks", "pre-commit")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written from inside the sandbox", p)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); string(b) != "[core]\n" {
		t.Errorf(".git/config changed: %q", b)
	}
}

func TestSandboxNetworkOn(t *testing.T) {
	sb := &Sandbox{Network: true}
	sandboxOrSkip(t, sb)
	got, err := Run(t.Context(), Options{Dir: t.TempDir(), Command: "grep -c : /proc/net/dev", Sandbox: sb})
	if err != nil {
		t.Fatal(err)
	}
	host, err := os.ReadFile("/proc/net/dev")
	if err != nil {
		t.Skip("no /proc/net/dev")
	}
	if want := strings.Count(string(host), ":"); got.Output != strconv.Itoa(want)+"\n" {
		t.Errorf("interfaces inside: %q, want the host's %d", got.Output, want)
	}
}

func TestSandboxMissingBwrap(t *testing.T) {
	_, err := Run(t.Context(), Options{Command: "true", Sandbox: &Sandbox{Bwrap: "no-such-bwrap-binary"}})
	if !errors.Is(err, ErrNoSandbox) || !strings.Contains(err.Error(), "bubblewrap") {
		t.Errorf("err = %v, want ErrNoSandbox naming bubblewrap", err)
	}
}
