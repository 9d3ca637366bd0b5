package tool

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecode(t *testing.T) {
	one, five := 1, 5
	tests := []struct {
		name    string
		input   string
		want    readFileArgs
		wantErr string
	}{
		{"full", `{"path":"a.go","offset":1,"limit":5}`, readFileArgs{Path: "a.go", Offset: &one, Limit: &five}, ""},
		{"extra fields tolerated", `{"path":"a","why":"because"}`, readFileArgs{Path: "a"}, ""},
		{"integral float", `{"path":"a","limit":5.0}`, readFileArgs{Path: "a", Limit: &five}, ""},
		{"null optional", `{"path":"a","limit":null}`, readFileArgs{Path: "a"}, ""},
		{"missing required", `{"limit":5}`, readFileArgs{}, `"path" is required`},
		{"null required", `{"path":null}`, readFileArgs{}, `"path" is required`},
		{"empty input", ``, readFileArgs{}, `"path" is required`},
		{"null input", `null`, readFileArgs{}, `"path" is required`},
		{"string for int", `{"path":"a","limit":"5"}`, readFileArgs{}, `"limit" must be an integer, got string`},
		{"fraction", `{"path":"a","limit":1.5}`, readFileArgs{}, `"limit" must be an integer, got 1.5`},
		{"bool for int", `{"path":"a","offset":true}`, readFileArgs{}, `"offset" must be an integer, got boolean`},
		{"number for string", `{"path":3}`, readFileArgs{}, `"path" must be a string, got number`},
		{"object for string", `{"path":{}}`, readFileArgs{}, `"path" must be a string, got object`},
		{"array input", `[1]`, readFileArgs{}, `arguments must be a JSON object, got array`},
		{"string input", `"a"`, readFileArgs{}, `arguments must be a JSON object, got string`},
		{"broken json", `{"path":`, readFileArgs{}, `arguments are not valid JSON`},
		{"trailing garbage", `{"path":"a"} x`, readFileArgs{}, `arguments are not valid JSON`},
		{"huge int", `{"path":"a","limit":1e300}`, readFileArgs{}, `"limit" must be an integer, got 1e300`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode[readFileArgs](json.RawMessage(tt.input))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Decode(%s) error = %v, want %q", tt.input, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Decode(%s) (-want +got):\n%s", tt.input, diff)
			}
		})
	}
}

func TestDecodeBool(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"task_id":"bg_1","block":"yes"}`, `"block" must be a boolean (true or false), got string`},
		{`{"task_id":"bg_1","block":1}`, `"block" must be a boolean (true or false), got number`},
	} {
		_, err := Decode[taskOutputArgs](json.RawMessage(tc.in))
		if err == nil || err.Error() != tc.want {
			t.Errorf("Decode(%s) = %v, want %q", tc.in, err, tc.want)
		}
	}
	got, err := Decode[taskOutputArgs](json.RawMessage(`{"task_id":"bg_1","block":false}`))
	if err != nil || got.Block == nil || *got.Block {
		t.Errorf("block:false decoded as %+v, %v", got, err)
	}
}

// The message a model sees names the tool.
func TestInvalidArgumentsResult(t *testing.T) {
	env := newTestEnv(t)
	got := editFileTool{}.Run(t.Context(), env, json.RawMessage(`{"path":"a","new_string":"x"}`))
	want := Errorf(`invalid arguments for edit_file: "old_string" is required`)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestSchemas(t *testing.T) {
	want := map[string][]string{
		"bash": {"command"}, "read_file": {"path"}, "write_file": {"path", "content"},
		"edit_file": {"path", "old_string", "new_string"}, "glob": {"pattern"}, "grep": {"pattern"},
		"TaskOutput": {"task_id"}, "TaskStop": {"task_id"},
	}
	got := map[string][]string{}
	for _, tl := range append(Builtins(), JobTools()...) {
		spec := tl.Spec()
		var schema struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(spec.InputSchema, &schema); err != nil {
			t.Fatalf("%s: schema: %v", spec.Name, err)
		}
		if schema.Type != "object" || len(schema.Properties) == 0 {
			t.Errorf("%s: schema %s", spec.Name, spec.InputSchema)
		}
		for _, r := range schema.Required {
			if _, ok := schema.Properties[r]; !ok {
				t.Errorf("%s: required %q is not a property", spec.Name, r)
			}
		}
		if len(spec.Description) < 100 {
			t.Errorf("%s: description too short: %q", spec.Name, spec.Description)
		}
		got[spec.Name] = schema.Required
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("required fields (-want +got):\n%s", diff)
	}
}

func TestBuiltinsOrder(t *testing.T) {
	var names []string
	readOnly := map[string]bool{}
	for _, tl := range append(Builtins(), JobTools()...) {
		names = append(names, tl.Spec().Name)
		readOnly[tl.Spec().Name] = tl.ReadOnly()
	}
	if diff := cmp.Diff([]string{"bash", "read_file", "write_file", "edit_file", "glob", "grep", "TaskOutput", "TaskStop"}, names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	wantRO := map[string]bool{"bash": false, "read_file": true, "write_file": false, "edit_file": false, "glob": true, "grep": true, "TaskOutput": true, "TaskStop": false}
	if diff := cmp.Diff(wantRO, readOnly); diff != "" {
		t.Errorf("ReadOnly (-want +got):\n%s", diff)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{``, `null`, `{}`, `[]`, `{"path":"a","limit":5}`, `{"command":"ls","timeout":1e400}`,
		`{"block":true,"task_id":"x"}`, `{"max_results":-1,"context":"2"}`, `{"a":{"b":[1,2,{}]}}`, `{"limit":-9223372036854775809}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		raw := json.RawMessage(in)
		Decode[bashArgs](raw)
		Decode[readFileArgs](raw)
		Decode[writeFileArgs](raw)
		Decode[editFileArgs](raw)
		Decode[globArgs](raw)
		Decode[grepArgs](raw)
		Decode[taskOutputArgs](raw)
		Decode[taskStopArgs](raw)
	})
}
