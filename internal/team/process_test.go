package team_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/troupe-dev/troupe/internal/llm/anthropic"
	"github.com/troupe-dev/troupe/internal/store/file"
	"github.com/troupe-dev/troupe/internal/team"
	"github.com/troupe-dev/troupe/internal/teamkey"
	"github.com/troupe-dev/troupe/internal/tool"
)

// agentEnv makes the test binary run as one teammate process, the way
// `troupe agent --team T --name N` does.
const agentEnv = "TROUPE_TEST_AGENT"

func runAgentProcess() int {
	var teamName, name string
	var mcpServers []string
	keyFD := -1
	for i := 1; i+1 < len(os.Args); i++ {
		switch os.Args[i] {
		case "--team":
			teamName = os.Args[i+1]
		case "--name":
			name = os.Args[i+1]
		case "--key-fd":
			keyFD, _ = strconv.Atoi(os.Args[i+1])
		case "--mcp-servers":
			mcpServers = strings.Split(os.Args[i+1], ",")
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "agent:", err)
		return 1
	}
	var key []byte
	if keyFD >= 0 {
		var err error
		if key, err = teamkey.ReadFD(keyFD); err != nil {
			return fail(err)
		}
	}
	if out := os.Getenv("TROUPE_TEST_AGENT_PROBE"); out != "" {
		// What the process received, for TestKeyReachesProcessByFD.
		probe := fmt.Sprintf("key=%x\nenv=%s\n", key, strings.Join(os.Environ(), "\x00"))
		if err := os.WriteFile(filepath.Join(out, name), []byte(probe), 0o600); err != nil {
			return fail(err)
		}
	}
	st, err := file.Open(os.Getenv("TROUPE_TEST_STATE"), file.Options{})
	if err != nil {
		return fail(err)
	}
	defer st.Close()
	tm, err := st.Team(ctx, teamName)
	if err != nil {
		return fail(err)
	}
	ws, err := tool.OpenWorkspace(os.Getenv("TROUPE_TEST_WS"))
	if err != nil {
		return fail(err)
	}
	defer ws.Close()
	p, err := anthropic.New(anthropic.Config{APIKey: "test", BaseURL: os.Getenv("TROUPE_TEST_URL"), MaxRetries: -1})
	if err != nil {
		return fail(err)
	}
	if err := team.RunMember(ctx, team.MemberConfig{Team: tm, Name: name, Provider: p, Workspace: ws, Key: key, Tools: processMCPTools(mcpServers)}); err != nil && ctx.Err() == nil {
		return fail(err)
	}
	return 0
}
