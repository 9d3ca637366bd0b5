package llm

import (
	"bytes"
	"encoding/json"
)

// Marshal is json.Marshal as the model APIs encode: <, > and & stay
// literal instead of becoming \u003c, \u003e and \u0026, so a tool input
// such as {"command":"a > b"} keeps its bytes wherever it is shown again.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
