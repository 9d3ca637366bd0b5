// Package fakeopenaitest starts a fake OpenAI chat-completions API for the
// tests of other packages.
package fakeopenaitest

import (
	"testing"

	"github.com/troupe-dev/troupe/internal/llm/fakeopenai"
)

// StartTest parses script, serves it on 127.0.0.1:0 with the test's log and
// closes it when the test ends. [fakeopenai.Server.URL] is the base URL an
// OpenAI client takes (it ends in /v1).
func StartTest(t testing.TB, script string) *fakeopenai.Server {
	t.Helper()
	return StartTestWith(t, script, fakeopenai.Options{})
}

// StartTestWith is StartTest with options (Logf defaults to the test's log).
func StartTestWith(t testing.TB, script string, opt fakeopenai.Options) *fakeopenai.Server {
	t.Helper()
	s, err := fakeopenai.ParseScript([]byte(script))
	if err != nil {
		t.Fatalf("fakeopenai script: %v", err)
	}
	if opt.Logf == nil {
		opt.Logf = t.Logf
	}
	srv := fakeopenai.New(s, opt)
	if _, err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatalf("start fake OpenAI API: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close fake OpenAI API: %v", err)
		}
	})
	return srv
}
