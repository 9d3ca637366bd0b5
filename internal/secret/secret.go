// Package secret keeps the values troupe knows to be secret (API keys,
// tokens, passwords in base URLs) and redacts them from whatever troupe
// writes: transcripts, cassettes, logs, command output and error messages.
// The registry is process-wide because a secret read once from the
// environment or a flag must stay hidden from every writer of the process,
// however far from the place it was read.
//
// It must never depend on any other troupe package.
package secret

import (
	"bytes"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Mask replaces every occurrence of a secret.
const Mask = "[redacted]"

// MinLen is the length below which a value is not registered: a short
// value would be found by chance in ordinary text and redacting it would
// mangle that text without hiding anything worth hiding.
const MinLen = 8

var (
	mu      sync.Mutex // serialises Register; readers use the atomic list
	secrets atomic.Pointer[[]string]
	// asBytes holds the same secrets, for searching byte slices without
	// a conversion per call.
	asBytes atomic.Pointer[[][]byte]
)

// Register adds values to the set of secrets. Values shorter than MinLen
// are ignored. A value whose JSON string form differs (it holds quotes,
// backslashes, <, >, & or control characters) is registered in that form
// too, so that it is found inside JSON documents as they are written.
func Register(values ...string) {
	mu.Lock()
	defer mu.Unlock()
	var cur []string
	if p := secrets.Load(); p != nil {
		cur = *p
	}
	next := slices.Clone(cur)
	for _, v := range values {
		for _, form := range forms(v) {
			if len(form) >= MinLen && !slices.Contains(next, form) {
				next = append(next, form)
			}
		}
	}
	if len(next) == len(cur) {
		return
	}
	// Longest first: a secret that contains another is masked whole.
	slices.SortStableFunc(next, func(a, b string) int { return len(b) - len(a) })
	bs := make([][]byte, len(next))
	for i, v := range next {
		bs[i] = []byte(v)
	}
	asBytes.Store(&bs)
	secrets.Store(&next)
}

// forms is v and, when it differs, v as it appears inside a JSON string.
func forms(v string) []string {
	b, err := json.Marshal(v)
	if err != nil {
		return []string{v}
	}
	if j := string(b[1 : len(b)-1]); j != v {
		return []string{v, j}
	}
	return []string{v}
}

// RegisterURL registers the password of a URL's user information
// (http://user:password@host), the only part of a base URL that is
// secret. A value that does not parse as a URL registers nothing.
func RegisterURL(raw string) {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return
	}
	if p, ok := u.User.Password(); ok {
		Register(p)
	}
}

// Credential reports whether an environment variable named name holds a
// credential of a model provider troupe talks to: the variables of the
// ANTHROPIC_, OPENAI_ and CLAUDE_CODE_ families whose names end in _KEY,
// _TOKEN, _SECRET or _PASSWORD (ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN,
// OPENAI_API_KEY, CLAUDE_CODE_OAUTH_TOKEN, …), and AWS_BEARER_TOKEN_BEDROCK.
func Credential(name string) bool {
	n := strings.ToUpper(name)
	if n == "AWS_BEARER_TOKEN_BEDROCK" {
		return true
	}
	if !strings.HasPrefix(n, "ANTHROPIC_") && !strings.HasPrefix(n, "OPENAI_") && !strings.HasPrefix(n, "CLAUDE_CODE_") {
		return false
	}
	for _, s := range []string{"_KEY", "_TOKEN", "_SECRET", "_PASSWORD"} {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	return false
}

// RegisterEnviron registers the secrets of an environment in os.Environ
// form: the values of Credential variables and the passwords of the
// provider families' URLs (ANTHROPIC_BASE_URL=http://u:p@host).
func RegisterEnviron(environ []string) {
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" {
			continue
		}
		switch {
		case Credential(k):
			Register(v)
		case strings.HasSuffix(strings.ToUpper(k), "_URL"):
			RegisterURL(v)
		}
	}
}

// Redact returns s with every registered secret replaced by Mask. When no
// secret occurs in s it returns s itself, after one substring search per
// secret.
func Redact(s string) string {
	p := secrets.Load()
	if p == nil {
		return s
	}
	for _, v := range *p {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, Mask)
		}
	}
	return s
}

// RedactBytes is Redact for a byte slice. It returns b itself when no
// secret occurs in it, and a new slice otherwise (b is never modified).
func RedactBytes(b []byte) []byte {
	p := asBytes.Load()
	if p == nil {
		return b
	}
	for _, v := range *p {
		if bytes.Contains(b, v) {
			return []byte(Redact(string(b)))
		}
	}
	return b
}

// Any reports whether a secret is registered.
func Any() bool {
	p := secrets.Load()
	return p != nil && len(*p) > 0
}

// Reset forgets every secret. It is for tests, which share the
// process-wide registry.
func Reset() {
	mu.Lock()
	defer mu.Unlock()
	secrets.Store(nil)
	asBytes.Store(nil)
}
