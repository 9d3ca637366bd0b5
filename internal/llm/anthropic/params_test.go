package anthropic

import (
	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/troupe-dev/troupe/internal/llm"
)

// buildParams translates a request into the SDK's params, with the cache
// breakpoints the encoder marks (see encoder.body): the whole request as
// the SDK encoded it before the encoder, the reference its bodies are
// tested against.
func buildParams(req *llm.Request) (sdk.MessageNewParams, error) {
	msgs, err := llm.Normalize(req.Messages)
	if err != nil {
		return sdk.MessageNewParams{}, err
	}
	model, maxTokens := requestDefaults(req)
	params := sdk.MessageNewParams{
		Model:     sdk.Model(model),
		MaxTokens: int64(maxTokens),
	}
	cache, err := cacheParam(req.CacheTTL)
	if err != nil {
		return params, err
	}
	params.System = systemParam(req.System, req.SystemTail, cache)
	for i, t := range req.Tools {
		tp, err := toolParam(t)
		if err != nil {
			return params, err
		}
		if i == len(req.Tools)-1 {
			tp.CacheControl = cache
		}
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: tp})
	}
	for i, m := range msgs {
		mp, err := messageParam(i, m)
		if err != nil {
			return params, err
		}
		params.Messages = append(params.Messages, mp)
	}
	// The conversation's breakpoint is its last block. The previous call
	// ended with the user turn before the last assistant turn: marking it
	// too reads that call's entry directly, even when the turn since added
	// more blocks than the cache looks back over (about 20: a reply with
	// many tool calls and their results).
	n := len(params.Messages)
	if n >= 3 {
		prev := params.Messages[n-3].Content
		setCache(&prev[len(prev)-1], cache)
	}
	if n >= 1 {
		last := params.Messages[n-1].Content
		setCache(&last[len(last)-1], cache)
	}
	return params, nil
}
