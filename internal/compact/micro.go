package compact

import (
	"fmt"
	"strings"

	"github.com/troupe-dev/troupe/internal/llm"
)

// markerPrefix opens every micro-compaction marker; a result that starts
// with it is never compacted again.
const markerPrefix = "[old tool result of "

// MicroPolicy says which tool results micro-compaction replaces.
//
// A tool result is replaced by a one-line marker ("[old tool result of
// read_file compacted: 12,345 chars]") when it is older than the Keep most
// recent results and at least MinResultChars long. The model keeps the call
// that produced it (the tool_use, with its input) and can repeat the call if
// it needs the content again.
//
// Every replacement rewrites the conversation from the replaced result on,
// which is a miss of the provider's prefix cache for everything after it.
// So replacement is batched: nothing is rewritten until the results that
// qualify add up to at least MinReclaimChars, and then all of them are
// replaced at once. Between two such rewrites the history only grows at its
// end, the prefix of every request is the previous request, and the cache
// hits; a rewrite happens once per MinReclaimChars of bulky output, not on
// every call as "always keep only the last Keep" would do.
type MicroPolicy struct {
	Keep            int // 0: DefaultKeep
	MinResultChars  int // 0: DefaultMinResultChars
	MinReclaimChars int // 0: DefaultMinReclaimChars; negative: no threshold
}

// Micro applies the default policy with keep recent results kept.
func Micro(msgs []llm.Message, keep int) ([]llm.Message, bool) {
	return MicroPolicy{Keep: keep}.Apply(msgs)
}

// Apply returns msgs with the qualifying results replaced, and whether
// anything was. msgs itself is never modified: changed messages are copies.
func (p MicroPolicy) Apply(msgs []llm.Message) ([]llm.Message, bool) {
	keep, minChars, minReclaim := p.Keep, p.MinResultChars, p.MinReclaimChars
	if keep <= 0 {
		keep = DefaultKeep
	}
	if minChars <= 0 {
		minChars = DefaultMinResultChars
	}
	if minReclaim == 0 {
		minReclaim = DefaultMinReclaimChars
	}

	type pos struct{ msg, block int }
	var results []pos
	names := map[string]string{} // tool_use id -> tool name
	for i, m := range msgs {
		for j, b := range m.Content {
			switch b.Type {
			case llm.BlockToolUse:
				names[b.ID] = b.Name
			case llm.BlockToolResult:
				results = append(results, pos{i, j})
			}
		}
	}
	if len(results) <= keep {
		return msgs, false
	}
	var (
		todo    []pos
		reclaim int
	)
	for _, at := range results[:len(results)-keep] {
		b := msgs[at.msg].Content[at.block]
		if len(b.Content) < minChars || strings.HasPrefix(b.Content, markerPrefix) {
			continue
		}
		todo = append(todo, at)
		reclaim += len(b.Content) - len(marker(names[b.ToolUseID], len(b.Content)))
	}
	if len(todo) == 0 || reclaim < minReclaim {
		return msgs, false
	}
	out := append([]llm.Message(nil), msgs...)
	copied := map[int]bool{}
	for _, at := range todo {
		if !copied[at.msg] {
			out[at.msg].Content = append([]llm.Block(nil), out[at.msg].Content...)
			copied[at.msg] = true
		}
		b := &out[at.msg].Content[at.block]
		b.Content = marker(names[b.ToolUseID], len(b.Content))
	}
	return out, true
}

// marker is the line that stands for a compacted result of n characters.
func marker(tool string, n int) string {
	if tool == "" {
		tool = "a tool"
	}
	return fmt.Sprintf("%s%s compacted: %s chars; call the tool again if you need it]", markerPrefix, tool, thousands(n))
}

// thousands writes n with commas: 12345 -> "12,345".
func thousands(n int) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
