package mcp

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNPMFilesystemServer runs the reference filesystem server published on
// the npm registry, when node and the installed package are here (CI
// installs it with `npm install -g @modelcontextprotocol/server-filesystem`);
// every one of its tool schemas must pass CheckSchema and a call must work.
func TestNPMFilesystemServer(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the npm reference server cannot run")
	}
	root, err := exec.Command("npm", "root", "-g").Output()
	if err != nil {
		t.Skipf("npm root -g: %v: the npm reference server cannot be found", err)
	}
	entry := filepath.Join(strings.TrimSpace(string(root)), "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		t.Skipf("%s is not installed (npm install -g @modelcontextprotocol/server-filesystem): %v", entry, err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hi there"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir, _ = filepath.EvalSymlinks(dir)
	m := newManager(t, Options{}, Server{Name: "fs", Type: TypeStdio, Command: node, Args: []string{entry, dir}})
	tools, probs := m.Tools(context.Background(), nil)
	if len(probs) != 0 {
		t.Errorf("problems with a published server: %v", probs)
	}
	res := run(t, find(t, tools, "mcp__fs__list_directory"), `{"path": "`+dir+`"}`)
	if res.IsError || !strings.Contains(res.Content, "hello.txt") {
		t.Errorf("list_directory = %+v", res)
	}
	res = run(t, find(t, tools, "mcp__fs__list_directory"), `{"path": "/etc"}`)
	if !res.IsError {
		t.Errorf("listing outside the allowed directory: %+v, want the server's error", res)
	}
}
