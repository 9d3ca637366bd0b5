package app

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/llm/anthropic"
	"github.com/troupe-dev/troupe/internal/llm/openai"
	"github.com/troupe-dev/troupe/internal/secret"
)

// ProviderChoice is the model endpoint of a run: --provider and --base-url.
type ProviderChoice struct {
	Name    string // anthropic or openai
	BaseURL string // the chosen provider's endpoint
}

// DefaultModel is the lead's model when none is named.
const DefaultModel = anthropic.DefaultModel

// BuildProvider returns the provider of a run and the endpoint it talks to:
// a router whose default is the chosen provider and which also reaches the
// other one when it is configured, so that one agent can use
// "openai:llama3.1" while the rest use the default. A missing key or
// endpoint is an *Error of its kind.
func BuildProvider(pf ProviderChoice, maxRetries int) (llm.Provider, string, error) {
	if maxRetries == 0 {
		maxRetries = -1
	}
	router := &llm.Router{Default: pf.Name, Providers: map[string]llm.Provider{}, Missing: map[string]string{
		"anthropic": "set ANTHROPIC_API_KEY",
		"openai":    "set OPENAI_BASE_URL, or run with --provider openai --base-url URL",
	}}
	anthropicURL, openaiURL := os.Getenv("ANTHROPIC_BASE_URL"), os.Getenv("OPENAI_BASE_URL")
	// A password in an endpoint is a secret wherever the URL is printed.
	secret.RegisterURL(pf.BaseURL)
	maxReply, err := maxReplyBytes()
	if err != nil {
		return nil, "", usageError(err)
	}
	switch pf.Name {
	case "anthropic":
		if pf.BaseURL != "" {
			anthropicURL = pf.BaseURL
		}
	case "openai":
		if pf.BaseURL != "" {
			openaiURL = pf.BaseURL
		}
		if openaiURL == "" {
			return nil, "", usageError(errors.New("--provider openai needs --base-url URL (or OPENAI_BASE_URL), e.g. http://localhost:11434/v1 for Ollama"))
		}
	default:
		return nil, "", usageError(fmt.Errorf("--provider must be anthropic or openai, not %q", pf.Name))
	}
	if key := os.Getenv("ANTHROPIC_API_KEY"); key != "" {
		p, err := anthropic.New(anthropic.Config{APIKey: key, BaseURL: anthropicURL, MaxRetries: maxRetries, MaxReplyBytes: maxReply})
		if err != nil {
			return nil, "", failure(err)
		}
		router.Providers["anthropic"] = p
	} else if pf.Name == "anthropic" {
		return nil, "", noKeyError(errors.New("ANTHROPIC_API_KEY is not set (export it, use --provider openai for a local server, or try `troupe demo`, which needs no key)"))
	}
	if openaiURL != "" {
		p, err := openai.New(openai.Config{APIKey: os.Getenv("OPENAI_API_KEY"), BaseURL: openaiURL, MaxRetries: maxRetries, MaxReplyBytes: maxReply})
		if err != nil {
			return nil, "", failure(err)
		}
		router.Providers["openai"] = p
	}
	endpoint := anthropicURL
	if pf.Name == "openai" {
		endpoint = openaiURL
	}
	if endpoint == "" {
		endpoint = "https://api.anthropic.com"
	}
	return router, endpoint, nil
}

// AnthropicAt is a provider of the Anthropic API at baseURL with apiKey:
// the scripted fake servers of the demo and the benchmarks, or a server a
// benchmark is pointed at. maxRetries 0 is the provider's default, -1 none.
func AnthropicAt(baseURL, apiKey string, maxRetries int) (llm.Provider, error) {
	return anthropic.New(anthropic.Config{APIKey: apiKey, BaseURL: baseURL, MaxRetries: maxRetries})
}

// AnthropicObserved is AnthropicAt telling observe how long each request
// body took to build and its size (troupe bench turn's encode_ms).
func AnthropicObserved(baseURL, apiKey string, maxRetries int, observe func(d time.Duration, bytes int)) (llm.Provider, error) {
	return anthropic.New(anthropic.Config{APIKey: apiKey, BaseURL: baseURL, MaxRetries: maxRetries, ObserveEncode: observe})
}

// maxReplyBytes is the cap on one model reply from TROUPE_MAX_REPLY_BYTES
// (0 or unset: the providers' default, 32 MiB; negative: no cap).
func maxReplyBytes() (int64, error) {
	v := strings.TrimSpace(os.Getenv("TROUPE_MAX_REPLY_BYTES"))
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("TROUPE_MAX_REPLY_BYTES must be a number of bytes, got %q", v)
	}
	return n, nil
}

// AgentProviderArgs are the flags and environment that give a teammate
// process the same providers as the lead (keys come from the inherited
// environment and are never written anywhere).
func AgentProviderArgs(pf ProviderChoice) (args, env []string) {
	args = []string{"--provider", pf.Name}
	if pf.BaseURL != "" {
		args = append(args, "--base-url", pf.BaseURL)
	}
	return args, nil
}
