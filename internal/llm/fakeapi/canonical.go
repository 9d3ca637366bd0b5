package fakeapi

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
)

// The simulated cache hashes every block of every request in a canonical
// form: its JSON with the keys sorted and cache_control left out. Through
// encoding/json that was a third of the fake server's CPU (reflection and
// a sort per map, for a history that grows every turn), so the decoded
// values (map[string]any, []any, string, json.Number, bool, nil: what
// decode makes) are written here directly. The bytes are encoding/json's,
// with HTML escaping off: TestCanonicalIsEncodingJSON and FuzzCanonical
// hold them to it.

// appendCanonical appends v's canonical JSON to buf. At the top level a
// map leaves out the key skip ("" leaves out nothing).
func appendCanonical(buf []byte, v any, skip string) []byte {
	switch x := v.(type) {
	case nil:
		return append(buf, "null"...)
	case bool:
		if x {
			return append(buf, "true"...)
		}
		return append(buf, "false"...)
	case string:
		return appendJSONString(buf, x)
	case json.Number:
		if x == "" {
			return append(buf, '0')
		}
		return append(buf, x...)
	case []any:
		buf = append(buf, '[')
		for i, e := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendCanonical(buf, e, "")
		}
		return append(buf, ']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			if skip == "" || k != skip {
				keys = append(keys, k)
			}
		}
		slices.SortFunc(keys, strings.Compare)
		buf = append(buf, '{')
		for i, k := range keys {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSONString(buf, k)
			buf = append(buf, ':')
			buf = appendCanonical(buf, x[k], "")
		}
		return append(buf, '}')
	default:
		// Not made by decode: encoding/json says what it is.
		data, err := json.Marshal(x)
		if err != nil {
			return append(buf, "null"...)
		}
		return append(buf, data...)
	}
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string the way encoding/json writes
// it with HTML escaping off: quote, backslash and control characters
// escaped, invalid UTF-8 as U+FFFD, U+2028 and U+2029 escaped.
func appendJSONString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch b {
			case '\\', '"':
				buf = append(buf, '\\', b)
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}
