package tool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// Decode parses a tool call's arguments into T, a struct whose fields carry
// json tags. It is stricter than encoding/json where a model benefits from
// being told: a field tagged `required:"true"` must be present and not
// null, and a value of the wrong JSON type is refused with the field's name
// and what was given ("limit" must be an integer, got string). Fields T
// does not know are ignored. A missing, empty or null input is {}.
//
// The error does not name the tool; callers prefix it ("invalid arguments
// for edit_file: ...").
func Decode[T any](input json.RawMessage) (T, error) {
	var v T
	rv := reflect.ValueOf(&v).Elem()
	if rv.Kind() != reflect.Struct {
		return v, fmt.Errorf("decode into %T: not a struct", v)
	}
	trimmed := bytes.TrimSpace(input)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		trimmed = []byte("{}")
	}
	if trimmed[0] != '{' {
		return v, fmt.Errorf("arguments must be a JSON object, got %s", jsonKind(trimmed))
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil {
		return v, fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	for _, f := range argFields(rv.Type()) {
		raw, ok := fields[f.name]
		present := ok && string(bytes.TrimSpace(raw)) != "null"
		if !present {
			if f.required {
				return v, fmt.Errorf("%q is required", f.name)
			}
			continue
		}
		if err := decodeField(rv.Field(f.index), f.name, bytes.TrimSpace(raw)); err != nil {
			return v, err
		}
	}
	return v, nil
}

// argField is one decodable field of an argument struct.
type argField struct {
	index    int
	name     string
	required bool
	desc     string
	enum     []string
}

func argFields(t reflect.Type) []argField {
	var out []argField
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		f := argField{index: i, name: name, required: sf.Tag.Get("required") == "true", desc: sf.Tag.Get("desc")}
		if e := sf.Tag.Get("enum"); e != "" {
			f.enum = strings.Split(e, "|")
		}
		out = append(out, f)
	}
	return out
}

func decodeField(fv reflect.Value, name string, raw []byte) error {
	if fv.Kind() == reflect.Pointer {
		p := reflect.New(fv.Type().Elem())
		if err := decodeField(p.Elem(), name, raw); err != nil {
			return err
		}
		fv.Set(p)
		return nil
	}
	kind := jsonKind(raw)
	switch fv.Kind() {
	case reflect.String:
		if kind != "string" {
			return fmt.Errorf("%q must be a string, got %s", name, kind)
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("%q: %v", name, err)
		}
		fv.SetString(s)
	case reflect.Bool:
		if kind != "boolean" {
			return fmt.Errorf("%q must be a boolean (true or false), got %s", name, kind)
		}
		fv.SetBool(raw[0] == 't')
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if kind != "number" {
			return fmt.Errorf("%q must be an integer, got %s", name, kind)
		}
		n, err := parseInt(raw)
		if err != nil {
			return fmt.Errorf("%q must be an integer, got %s", name, raw)
		}
		if fv.OverflowInt(n) {
			return fmt.Errorf("%q is out of range: %s", name, raw)
		}
		fv.SetInt(n)
	case reflect.Float32, reflect.Float64:
		if kind != "number" {
			return fmt.Errorf("%q must be a number, got %s", name, kind)
		}
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return fmt.Errorf("%q must be a number, got %s", name, raw)
		}
		fv.SetFloat(f)
	default:
		if err := json.Unmarshal(raw, fv.Addr().Interface()); err != nil {
			return fmt.Errorf("%q has the wrong shape: %v", name, err)
		}
	}
	return nil
}

// parseInt accepts integral JSON numbers, including 3.0 and 1e3.
func parseInt(raw []byte) (int64, error) {
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("not an integer")
	}
	return int64(f), nil
}

// jsonKind names the JSON type of a (valid, trimmed) value.
func jsonKind(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

// schemaOf builds the JSON Schema of an argument struct from the same tags
// Decode reads, so that what the model is offered and what is enforced
// cannot drift apart.
func schemaOf[T any]() json.RawMessage {
	t := reflect.TypeFor[T]()
	props := map[string]any{}
	required := []string{}
	for _, f := range argFields(t) {
		ft := t.Field(f.index).Type
		p := map[string]any{"type": schemaType(ft)}
		if ft.Kind() == reflect.Slice || ft.Kind() == reflect.Array {
			p["items"] = map[string]any{"type": schemaType(ft.Elem())}
		}
		if f.desc != "" {
			p["description"] = f.desc
		}
		if f.enum != nil {
			p["enum"] = f.enum
		}
		props[f.name] = p
		if f.required {
			required = append(required, f.name)
		}
	}
	b, err := json.Marshal(map[string]any{"type": "object", "properties": props, "required": required})
	if err != nil {
		panic(err) // only maps of strings: cannot fail
	}
	return b
}

func schemaType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	default:
		return "object"
	}
}
