// Package fakeapitest starts a fake Anthropic API for the tests of other
// packages.
package fakeapitest

import (
	"testing"

	"github.com/troupe-dev/troupe/internal/llm/fakeapi"
)

// StartTest parses script, serves it on 127.0.0.1:0 with the test's log
// and closes it when the test ends. Use [fakeapi.Server.URL] as the base
// URL of the SDK client.
func StartTest(t testing.TB, script string) *fakeapi.Server {
	t.Helper()
	s, err := fakeapi.ParseScript([]byte(script))
	if err != nil {
		t.Fatalf("fakeapi script: %v", err)
	}
	srv := fakeapi.New(s, fakeapi.Options{Logf: t.Logf})
	if _, err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatalf("start fake API: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close fake API: %v", err)
		}
	})
	return srv
}
