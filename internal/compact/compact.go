// Package compact keeps a conversation inside the model's context window:
// micro-compaction replaces old, bulky tool results with one-line markers,
// and full compaction replaces the whole history with a summary the model
// writes of it.
//
// Both are written so that the provider's prompt cache keeps hitting: the
// request prefix (tools, system prompt, earlier turns) may only change when
// the gain is worth a cache miss, never a little on every call.
//
// It may use llm; it must never depend on agents, tools, teams or the
// store. The agent loop reaches it through agent.Compactor, which
// *Compactor satisfies.
package compact

import (
	"context"
	"fmt"
	"strings"

	"github.com/troupe-dev/troupe/internal/llm"
)

// Defaults of a zero Compactor.
const (
	// DefaultKeep is how many of the most recent tool results stay whole.
	DefaultKeep = 3
	// DefaultMinResultChars is the size under which a tool result is never
	// replaced: a marker would save next to nothing.
	DefaultMinResultChars = 2_000
	// DefaultMinReclaimChars is how much micro-compaction must be able to
	// reclaim at once before it rewrites anything (about 10k tokens).
	DefaultMinReclaimChars = 40_000
	// DefaultThreshold is the share of the window at which the history is
	// summarised.
	DefaultThreshold = 0.8
	// DefaultWindow is the context window of a model the table does not
	// know, in tokens.
	DefaultWindow = 200_000
)

// Compactor holds the compaction policy of one agent. The zero value uses
// the defaults above; it is safe for concurrent use since it is never
// changed by its methods.
type Compactor struct {
	// Keep is how many of the most recent tool results micro-compaction
	// leaves whole (0: DefaultKeep).
	Keep int
	// MinResultChars: results shorter than this stay whole (0: default).
	MinResultChars int
	// MinReclaimChars: micro-compaction fires only when it can reclaim at
	// least this many characters (0: default; negative: always).
	MinReclaimChars int
	// Window is the model's context window in tokens (0: WindowFor the
	// model of the call).
	Window int64
	// Threshold is the share of Window at which Due says yes (0: 0.8).
	Threshold float64
}

// Micro is micro-compaction with c's settings; see MicroPolicy.
func (c *Compactor) Micro(msgs []llm.Message) ([]llm.Message, bool) {
	return MicroPolicy{Keep: c.keep(), MinResultChars: c.MinResultChars, MinReclaimChars: c.MinReclaimChars}.Apply(msgs)
}

func (c *Compactor) keep() int {
	if c == nil || c.Keep <= 0 {
		return DefaultKeep
	}
	return c.Keep
}

// Due reports whether the history must be summarised before the next call
// to model. reported is the context the last call used, as the provider
// reported it (llm.Usage.ContextTokens); since are the messages added to
// the conversation after that call's prompt (its answer, tool results,
// delivered messages), whose size is estimated. With no call made yet,
// reported is 0 and since is the whole conversation.
func (c *Compactor) Due(model string, reported int64, since []llm.Message) bool {
	window := c.Window
	if window <= 0 {
		window = WindowFor(model)
	}
	threshold := c.Threshold
	if threshold <= 0 || threshold > 1 {
		threshold = DefaultThreshold
	}
	used := reported + EstimateTokens(since)
	return float64(used) >= threshold*float64(window)
}

// windows maps model name prefixes to context windows, longest prefix
// first where one prefix extends another.
var windows = []struct {
	prefix string
	tokens int64
}{
	{"claude-", 200_000},
	{"gpt-4.1", 1_047_576},
	{"gpt-4o", 128_000},
	{"gpt-5", 400_000},
	{"o3", 200_000},
	{"o4-mini", 200_000},
}

// WindowFor returns the context window of model in tokens, DefaultWindow
// for a model the table does not know.
func WindowFor(model string) int64 {
	for _, w := range windows {
		if strings.HasPrefix(model, w.prefix) {
			return w.tokens
		}
	}
	return DefaultWindow
}

// EstimateTokens estimates the tokens of msgs at four characters a token,
// which is close for English and code and errs high for neither.
func EstimateTokens(msgs []llm.Message) int64 {
	var chars int
	for _, m := range msgs {
		for _, b := range m.Content {
			chars += len(b.Text) + len(b.Content) + len(b.Input) + len(b.Thinking) + len(b.Name)
		}
	}
	return int64(chars+3) / 4
}

// SummaryPrompt is the instruction that ends the summary call. It asks for
// what a fresh conversation needs to carry on the work, not a narrative.
const SummaryPrompt = `Your context window is nearly full, so this conversation will now be replaced by a summary that you write. Write that summary now, as plain text, without calling any tool. It is all you will have of this conversation afterwards, so make it complete and concrete:

1. Goals: what you were asked to do, in the asker's own words where they matter, and any constraints.
2. Decisions: what was decided and why, including approaches tried and abandoned.
3. Files: every file read, created or changed, with what matters about each (paths exact).
4. State: what is done, what was verified (commands run, test results), what is broken.
5. Open work: what remains, in order, and the very next step.

Include exact names, identifiers, error messages and commands where they will be needed again. Leave out pleasantries and anything that no longer matters.`

// CompactedNote opens the conversation that replaces a compacted history.
const CompactedNote = "The earlier history of this conversation was compacted to save context: it was replaced by the summary below, which you wrote. The full history is kept in your transcript."

// Compact summarises req's conversation with one call to p and returns the
// conversation to carry on with, and the summary call's response (its text
// is the summary, its usage what the call cost).
//
// The summary call is req itself (same system prompt, same tools, same
// earlier turns) with one user turn added asking for the summary, so that
// its prefix is the one the provider has cached. focus, if not empty, is
// what the summary should dwell on (the argument of /compact).
//
// A trailing user turn that holds no tool results (fresh input the model has
// not seen yet) is not summarised: it is kept word for word after the
// summary, so the request it makes cannot be lost. Any other trailing turn
// is summarised, and the new conversation asks the model to carry on.
//
// The new conversation is a single user turn: identity (if not empty), the
// note that history was compacted, the summary and, last, the kept input or
// the request to continue. It always passes llm.Normalize.
func (c *Compactor) Compact(ctx context.Context, p llm.Provider, req llm.Request, identity, focus string) ([]llm.Message, *llm.Response, error) {
	history, input := splitInput(req.Messages)
	if len(history) == 0 {
		return nil, nil, ErrNothingToCompact
	}
	ask := SummaryPrompt
	if f := strings.TrimSpace(focus); f != "" {
		ask += "\n\nPay particular attention to: " + f
	}
	msgs := append(append([]llm.Message(nil), history...),
		llm.Message{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(ask)}})
	msgs, err := llm.Normalize(msgs)
	if err != nil {
		return nil, nil, fmt.Errorf("compact: %w", err)
	}
	req.Messages = msgs
	resp, err := llm.Collect(p.Stream(ctx, &req), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("compact: summary call: %w", err)
	}
	summary := strings.TrimSpace(resp.Message.Text())
	if summary == "" {
		return nil, resp, fmt.Errorf("compact: %w (stop reason %s)", ErrEmptySummary, resp.StopReason)
	}
	return Replacement(identity, summary, input), resp, nil
}

// Replacement is the conversation that replaces a compacted history: one
// user turn holding identity (if not empty), CompactedNote, the summary and
// then the blocks of input, or, with no input, a request to continue.
func Replacement(identity, summary string, input []llm.Block) []llm.Message {
	var b strings.Builder
	if id := strings.TrimSpace(identity); id != "" {
		b.WriteString(id)
		b.WriteString("\n\n")
	}
	b.WriteString(CompactedNote)
	b.WriteString("\n\n<summary>\n")
	b.WriteString(summary)
	b.WriteString("\n</summary>")
	blocks := []llm.Block{llm.TextBlock(b.String())}
	if len(input) > 0 {
		blocks = append(blocks, input...)
	} else {
		blocks = append(blocks, llm.TextBlock("Carry on with the open work from where the summary leaves off."))
	}
	return []llm.Message{{Role: llm.RoleUser, Content: blocks}}
}

// splitInput separates a trailing user turn without tool results (input the
// model has not answered) from the history before it.
func splitInput(msgs []llm.Message) (history []llm.Message, input []llm.Block) {
	n := len(msgs)
	if n == 0 || msgs[n-1].Role != llm.RoleUser {
		return msgs, nil
	}
	for _, b := range msgs[n-1].Content {
		if b.Type == llm.BlockToolResult {
			return msgs, nil
		}
	}
	return msgs[:n-1], msgs[n-1].Content
}
