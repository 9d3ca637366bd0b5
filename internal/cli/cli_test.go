package cli

import (
	"context"
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets testscript run `troupe` as a command inside scripts: the test
// binary re-executes itself as the real CLI.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"troupe": func() {
			os.Exit(Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
		},
	})
}

// TestScripts runs the end-to-end CLI scripts in testdata/script.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: false,
		Setup: func(env *testscript.Env) error {
			// Never let a developer's real key or endpoint reach a test.
			env.Setenv("ANTHROPIC_API_KEY", "")
			env.Setenv("ANTHROPIC_BASE_URL", "")
			env.Setenv("TROUPE_HOME", "")
			return nil
		},
	})
}
