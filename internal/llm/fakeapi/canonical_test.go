package fakeapi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// viaEncodingJSON is what canonical JSON was before appendCanonical: the
// value through encoding/json, HTML escaping off, skip left out of a map.
func viaEncodingJSON(t testing.TB, v any, skip string) []byte {
	t.Helper()
	if m, ok := v.(map[string]any); ok && skip != "" {
		c := make(map[string]any, len(m))
		for k, x := range m {
			if k != skip {
				c[k] = x
			}
		}
		v = c
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("encoding/json: %v", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

var canonicalSeeds = []string{
	`{"type":"text","text":"hello","cache_control":{"type":"ephemeral","ttl":"1h"}}`,
	`{"b":1,"a":[1.5e300,-0,0.000001,12345678901234567890,true,false,null],"c":{"z":"","y":{}}}`,
	`{"text":"quote \" backslash \\ slash / tab \t nl \n cr \r bs \b ff \f nul \u0000 us \u001f del \u007f"}`,
	`{"text":"<html> & 'apos' \u2028 \u2029 é 😀 \ufffd"}`,
	`{"ключ":"значение","日本":"語","":"empty key","a\"b":"key with a quote"}`,
	`[]`, `{}`, `"just a string"`, `42`, `null`,
}

func TestCanonicalIsEncodingJSON(t *testing.T) {
	for _, s := range canonicalSeeds {
		v, err := decode([]byte(s))
		if err != nil {
			t.Fatalf("seed %s: %v", s, err)
		}
		for _, skip := range []string{"", "cache_control"} {
			if got, want := appendCanonical(nil, v, skip), viaEncodingJSON(t, v, skip); !bytes.Equal(got, want) {
				t.Errorf("%s (skip %q):\n got %s\nwant %s", s, skip, got, want)
			}
		}
	}
	// Strings decode cannot make: invalid UTF-8 in keys and values.
	bad := map[string]any{"a\xffb": "c\xfe\xfd", "x": []any{"\xc3", "ok\xe2\x80"}}
	if got, want := appendCanonical(nil, bad, ""), viaEncodingJSON(t, bad, ""); !bytes.Equal(got, want) {
		t.Errorf("invalid UTF-8:\n got %q\nwant %q", got, want)
	}
}

func FuzzCanonical(f *testing.F) {
	for _, s := range canonicalSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte("\xff\x00\u2028 plain"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// As a string value, whatever its bytes.
		s := string(data)
		if got, want := appendJSONString(nil, s), viaEncodingJSON(t, s, ""); !bytes.Equal(got, want) {
			t.Fatalf("string %q:\n got %q\nwant %q", s, got, want)
		}
		// As a document, when it is one.
		v, err := decode(data)
		if err != nil {
			return
		}
		for _, skip := range []string{"", "cache_control"} {
			if got, want := appendCanonical(nil, v, skip), viaEncodingJSON(t, v, skip); !bytes.Equal(got, want) {
				t.Fatalf("%s (skip %q):\n got %s\nwant %s", strings.TrimSpace(string(data)), skip, got, want)
			}
		}
	})
}
