package tool

import (
	"encoding/json"

	"github.com/troupe-dev/troupe/internal/llm"
)

// NewSpec builds a tool spec whose input schema is derived from the argument
// struct T (tags json, required, desc, enum), for tools defined outside this
// package.
func NewSpec[T any](name, description string) llm.ToolSpec { return newSpec[T](name, description) }

// DecodeArgs decodes input for the tool called name, or returns the error
// Result the model should see.
func DecodeArgs[T any](name string, input json.RawMessage) (T, Result, bool) {
	return decodeArgs[T](name, input)
}
