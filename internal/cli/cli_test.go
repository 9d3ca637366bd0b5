package cli

import (
	"github.com/troupe-dev/troupe/internal/racetest"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	fakeapiexamples "github.com/troupe-dev/troupe/examples/fakeapi"
	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
	"github.com/troupe-dev/troupe/internal/llm/fakeopenai"
)

// TestMain lets testscript run `troupe` as a command inside scripts: the test
// binary re-executes itself as the real CLI, in its own process.
func TestMain(m *testing.M) {
	racetest.QuickExit()
	if os.Getenv(asCLI) == "1" {
		os.Exit(Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	testscript.Main(m, map[string]func(){
		"troupe": func() {
			os.Exit(Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
		},
	})
}

// TestScripts runs the end-to-end CLI scripts in testdata/script.
func TestScripts(t *testing.T) {
	t.Parallel()
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			// Never let a developer's real key or endpoint reach a test.
			env.Setenv("ANTHROPIC_API_KEY", "")
			env.Setenv("ANTHROPIC_BASE_URL", "")
			env.Setenv("TROUPE_HOME", "")
			// Team keys go outside the workspace, as in real use, and
			// never into the developer's own state.
			keys, err := os.MkdirTemp("", "troupe-state-")
			if err != nil {
				return err
			}
			env.Defer(func() { os.RemoveAll(keys) })
			env.Setenv("XDG_STATE_HOME", keys)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"fakeapi":    cmdFakeAPI,
			"fakeopenai": cmdFakeOpenAI,
			"waitfor":    cmdWaitFor,
			"freeport":   cmdFreePort,
			"waitport":   cmdWaitPort,
		},
	})
}

// cmdFakeAPI serves the fake Anthropic API on loopback for the rest of the
// script and points ANTHROPIC_BASE_URL (and a dummy key) at it:
//
//	fakeapi [-latency D] SCRIPT-FILE | @single-agent
func cmdFakeAPI(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! fakeapi")
	}
	var latency time.Duration
	if len(args) == 3 && args[0] == "-latency" {
		d, err := time.ParseDuration(args[1])
		ts.Check(err)
		latency, args = d, args[2:]
	}
	if len(args) != 1 {
		ts.Fatalf("usage: fakeapi [-latency D] SCRIPT-FILE|@single-agent")
	}
	var data []byte
	switch {
	case args[0] == "@single-agent":
		data = fakeapiexamples.SingleAgent
	case strings.HasPrefix(args[0], "@"):
		ts.Fatalf("unknown bundled script %s", args[0])
	default:
		data = []byte(ts.ReadFile(args[0]))
	}
	script, err := fakeapi.ParseScript(data)
	ts.Check(err)
	srv := fakeapi.New(script, fakeapi.Options{Latency: latency})
	url, err := srv.Start("127.0.0.1:0")
	ts.Check(err)
	ts.Defer(func() { _ = srv.Close() })
	ts.Setenv("ANTHROPIC_BASE_URL", url)
	ts.Setenv("ANTHROPIC_API_KEY", "sk-fake-secret-key")
}

// cmdFakeOpenAI serves the scripted fake chat-completions API on loopback
// for the rest of the script and points OPENAI_BASE_URL at it:
//
//	fakeopenai SCRIPT-FILE
func cmdFakeOpenAI(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: fakeopenai SCRIPT-FILE")
	}
	script, err := fakeopenai.ParseScript([]byte(ts.ReadFile(args[0])))
	ts.Check(err)
	srv := fakeopenai.New(script, fakeopenai.Options{})
	url, err := srv.Start("127.0.0.1:0")
	ts.Check(err)
	ts.Defer(func() { _ = srv.Close() })
	ts.Setenv("OPENAI_BASE_URL", url)
}

// cmdWaitPort waits until something listens on 127.0.0.1:$NAME (a
// condition, polled with a deadline):
//
//	waitport NAME
func cmdWaitPort(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitport NAME")
	}
	addr := net.JoinHostPort("127.0.0.1", ts.Getenv(args[0]))
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitport: nothing listens on %s after 60s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cmdWaitFor waits until FILE exists and matches REGEX (a condition, polled
// with a deadline; no fixed sleep):
//
//	waitfor FILE REGEX
func cmdWaitFor(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitfor FILE REGEX")
	}
	re, err := regexp.Compile(args[1])
	ts.Check(err)
	path := ts.MkAbs(args[0])
	deadline := time.Now().Add(60 * time.Second)
	for {
		if data, err := os.ReadFile(path); err == nil && re.Match(data) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitfor: %s did not match %q within 60s", args[0], args[1])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cmdFreePort sets NAME to a loopback port that was free a moment ago:
//
//	freeport NAME
func cmdFreePort(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: freeport NAME")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	port := l.Addr().(*net.TCPAddr).Port
	ts.Check(l.Close())
	ts.Setenv(args[0], strconv.Itoa(port))
}
