package shell

import (
	"maps"
	"slices"
	"strings"

	"github.com/troupe-dev/troupe/internal/secret"
)

// Scrubbed reports whether the variable name is kept out of every tool's
// environment (bash, hooks, MCP servers). The rule, in one place:
//   - the variables of the model providers troupe talks to: every
//     ANTHROPIC_* and OPENAI_* variable (keys, tokens, and base URLs, which
//     may carry a password);
//   - every credential secret.Credential names (CLAUDE_CODE_OAUTH_TOKEN,
//     AWS_BEARER_TOKEN_BEDROCK, …);
//   - troupe's own TROUPE_* variables, which describe troupe's internals
//     (its state directory, its benchmarks) to nobody but troupe.
//
// A tool that needs one of them gets it from settings' env, explicitly.
func Scrubbed(name string) bool {
	n := strings.ToUpper(name)
	return strings.HasPrefix(n, "ANTHROPIC_") || strings.HasPrefix(n, "OPENAI_") ||
		strings.HasPrefix(n, "TROUPE_") || secret.Credential(n)
}

// Environ returns the environment of a tool process: base (os.Environ()
// form) without the Scrubbed variables, then extra in key order, replacing
// any variable of the same name. extra is how settings' env adds a
// variable, scrubbed or not: the user named it.
func Environ(base []string, extra map[string]string) []string {
	out := make([]string, 0, len(base)+len(extra))
	for _, kv := range base {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || Scrubbed(k) {
			continue
		}
		if _, over := extra[k]; over {
			continue
		}
		out = append(out, kv)
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		out = append(out, k+"="+extra[k])
	}
	return out
}
