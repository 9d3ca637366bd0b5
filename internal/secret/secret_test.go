package secret

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRedact(t *testing.T) {
	t.Cleanup(Reset)
	Reset()
	Register("sk-ant-api03-abcdefgh", "short", `pa"ss<word>1`)
	RegisterURL("http://user:hunter2hunter2@proxy.example:8080/v1")
	RegisterURL("http://user@host") // no password: nothing
	RegisterURL("://bad")
	for _, tc := range []struct{ in, want string }{
		{"nothing here", "nothing here"},
		{"key=sk-ant-api03-abcdefgh;", "key=[redacted];"},
		{"twice sk-ant-api03-abcdefgh sk-ant-api03-abcdefgh", "twice [redacted] [redacted]"},
		{"short stays", "short stays"},
		{"cannot reach the model endpoint http://user:hunter2hunter2@proxy.example:8080/v1", "cannot reach the model endpoint http://user:[redacted]@proxy.example:8080/v1"},
		{`{"text":"pa\"ss\u003cword\u003e1"}`, `{"text":"[redacted]"}`},
		{`raw pa"ss<word>1`, `raw [redacted]`},
	} {
		if diff := cmp.Diff(tc.want, Redact(tc.in)); diff != "" {
			t.Errorf("Redact(%q) (-want +got):\n%s", tc.in, diff)
		}
		if diff := cmp.Diff(tc.want, string(RedactBytes([]byte(tc.in)))); diff != "" {
			t.Errorf("RedactBytes(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestRegisterLongestFirst(t *testing.T) {
	t.Cleanup(Reset)
	Reset()
	Register("abcdefgh", "abcdefghijkl")
	if got := Redact("x abcdefghijkl y"); got != "x [redacted] y" {
		t.Errorf("got %q, want the longer secret masked whole", got)
	}
}

func TestRegisterEnviron(t *testing.T) {
	t.Cleanup(Reset)
	Reset()
	RegisterEnviron([]string{
		"ANTHROPIC_API_KEY=sk-ant-one-1234567",
		"OPENAI_API_KEY=sk-openai-12345678",
		"CLAUDE_CODE_OAUTH_TOKEN=oauth-token-123456",
		"AWS_BEARER_TOKEN_BEDROCK=bedrock-1234567",
		"ANTHROPIC_BASE_URL=https://me:basepassword@gw.example",
		"ANTHROPIC_MODEL=claude-opus-4-99", // not a credential
		"HOME=/home/someone-long",
		"BROKEN",
	})
	in := "sk-ant-one-1234567 sk-openai-12345678 oauth-token-123456 bedrock-1234567 basepassword claude-opus-4-99 /home/someone-long"
	want := "[redacted] [redacted] [redacted] [redacted] [redacted] claude-opus-4-99 /home/someone-long"
	if diff := cmp.Diff(want, Redact(in)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestCredential(t *testing.T) {
	for name, want := range map[string]bool{
		"ANTHROPIC_API_KEY": true, "ANTHROPIC_AUTH_TOKEN": true, "OPENAI_API_KEY": true,
		"CLAUDE_CODE_OAUTH_TOKEN": true, "AWS_BEARER_TOKEN_BEDROCK": true, "anthropic_api_key": true,
		"ANTHROPIC_BASE_URL": false, "ANTHROPIC_MODEL": false, "GITHUB_TOKEN": false, "PATH": false,
	} {
		if got := Credential(name); got != want {
			t.Errorf("Credential(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestNoSecretReturnsInput(t *testing.T) {
	t.Cleanup(Reset)
	Reset()
	in := []byte("plain text")
	if got := RedactBytes(in); &got[0] != &in[0] {
		t.Error("RedactBytes copied its input with no secret registered")
	}
	Register("a-long-secret")
	if got := RedactBytes(in); &got[0] != &in[0] {
		t.Error("RedactBytes copied its input holding no secret")
	}
}

func TestWriter(t *testing.T) {
	t.Cleanup(Reset)
	Reset()
	Register("topsecretvalue")
	var buf bytes.Buffer
	w := Writer(&buf)
	in := "line with topsecretvalue in it\n"
	n, err := w.Write([]byte(in))
	if err != nil || n != len(in) {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(in))
	}
	if diff := cmp.Diff("line with [redacted] in it\n", buf.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

type failWriter struct{}

func (failWriter) Write(p []byte) (int, error) { return 3, errors.New("disk full") }

func TestWriterError(t *testing.T) {
	n, err := Writer(failWriter{}).Write([]byte("abcdef"))
	if err == nil || n != 3 {
		t.Errorf("Write = %d, %v; want 3 and the error", n, err)
	}
}

func TestHandler(t *testing.T) {
	t.Cleanup(Reset)
	Reset()
	Register("topsecretvalue")
	var buf bytes.Buffer
	log := slog.New(Handler(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})))
	log.With("key", "with topsecretvalue").WithGroup("g").Info("msg topsecretvalue",
		"s", "topsecretvalue", "err", errors.New("bad topsecretvalue"), "n", 3,
		slog.Group("sub", "x", "topsecretvalue"), "any", struct{ K string }{"topsecretvalue"})
	got := buf.String()
	if strings.Contains(got, "topsecretvalue") {
		t.Errorf("the secret was logged: %s", got)
	}
	want := `level=INFO msg="msg [redacted]" key="with [redacted]" g.s=[redacted] g.err="bad [redacted]" g.n=3 g.sub.x=[redacted] g.any={[redacted]}` + "\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func BenchmarkRedactNoSecret(b *testing.B) {
	Reset()
	b.Cleanup(Reset)
	Register("sk-ant-api03-abcdefghijklmnop", "hunter2hunter2")
	s := strings.Repeat("an ordinary line of a transcript\n", 100)
	for b.Loop() {
		_ = Redact(s)
	}
}
