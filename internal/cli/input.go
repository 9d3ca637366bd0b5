package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
)

// maxInputLine bounds one line of --input-format stream-json.
const maxInputLine = 16 << 20

// userLine is one line of --input-format stream-json: a user message in
// Claude Code's SDK shape, {"type":"user","message":{"role":"user",
// "content":"…" or [blocks]}, …}.
type userLine struct {
	Type    string `json:"type"`
	Message struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
}

// readUserMessages yields the text of each user message on r, one turn of
// the lead each, as they arrive. Blank lines are skipped; a line that is
// not a user message made of text is an error naming it.
func readUserMessages(r io.Reader) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), maxInputLine)
		n := 0
		for sc.Scan() {
			n++
			line := strings.TrimSpace(sc.Text())
			if line == "" {
				continue
			}
			text, err := parseUserLine([]byte(line))
			if err != nil {
				yield("", fmt.Errorf("--input-format stream-json: line %d: %w", n, err))
				return
			}
			if !yield(text, nil) {
				return
			}
		}
		if err := sc.Err(); err != nil {
			yield("", fmt.Errorf("--input-format stream-json: read stdin: %w", err))
		}
	}
}

func parseUserLine(data []byte) (string, error) {
	var u userLine
	if err := json.Unmarshal(data, &u); err != nil {
		return "", fmt.Errorf("not a JSON object: %w", err)
	}
	if u.Type != "user" {
		return "", fmt.Errorf("type %q: only user messages are read", u.Type)
	}
	if u.Message.Role != "" && u.Message.Role != "user" {
		return "", fmt.Errorf("message role %q: want user", u.Message.Role)
	}
	var s string
	if err := json.Unmarshal(u.Message.Content, &s); err == nil {
		if strings.TrimSpace(s) == "" {
			return "", errors.New("empty message")
		}
		return s, nil
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(u.Message.Content, &blocks); err != nil {
		return "", errors.New("message.content must be a string or a list of content blocks")
	}
	var parts []string
	for _, b := range blocks {
		if b.Type != "text" {
			return "", fmt.Errorf("content block of type %q: only text is read", b.Type)
		}
		parts = append(parts, b.Text)
	}
	text := strings.Join(parts, "\n")
	if strings.TrimSpace(text) == "" {
		return "", errors.New("empty message")
	}
	return text, nil
}
