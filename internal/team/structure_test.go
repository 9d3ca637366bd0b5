package team

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The team wing's shape, checked so it stays rebuildable (issue 15): state
// has one owner per type, so no struct grows into a god object, and no file
// grows past what a reader takes in at once. The rule has no exceptions:
// a large option record (Config, MemberConfig, Rules) groups its options
// into embedded records, each of which counts as one field.
const (
	maxStructFields = 12
	maxFileLines    = 500
)

// TestStructure parses every Go file of the package (tests included) and
// fails on a struct type with more than maxStructFields fields or a file of
// more than maxFileLines lines.
func TestStructure(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files: %v", err)
	}
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range shapeProblems(name, src) {
			t.Error(p)
		}
	}
}

// shapeProblems returns what is wrong with the shape of one file.
func shapeProblems(name string, src []byte) []string {
	var out []string
	if n := strings.Count(string(src), "\n"); n > maxFileLines {
		out = append(out, name+": "+itoa(n)+" lines, over "+itoa(maxFileLines)+": split it by concern")
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return append(out, name+": "+err.Error())
	}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return true
		}
		fields := 0
		for _, fl := range st.Fields.List {
			if len(fl.Names) == 0 {
				fields++ // embedded
			}
			fields += len(fl.Names)
		}
		if fields > maxStructFields {
			out = append(out, fset.Position(ts.Pos()).String()+": struct "+ts.Name.Name+" has "+itoa(fields)+" fields, over "+itoa(maxStructFields)+": give part of its state an owner of its own")
		}
		return true
	})
	return out
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// TestStructureEmbedded checks that an embedded record counts as one field
// of the struct that embeds it, however many fields it has, so a record
// split into embedded groups passes while each group is itself checked.
func TestStructureEmbedded(t *testing.T) {
	t.Parallel()
	var src strings.Builder
	src.WriteString("package team\n\ntype group struct {\n")
	for i := range maxStructFields {
		src.WriteString("\tg" + itoa(i) + " int\n")
	}
	src.WriteString("}\n\ntype record struct {\n\tgroup\n\t*other\n")
	for i := range maxStructFields - 2 {
		src.WriteString("\tf" + itoa(i) + " int\n")
	}
	src.WriteString("}\n\ntype over struct {\n\tgroup\n")
	for i := range maxStructFields {
		src.WriteString("\tf" + itoa(i) + " int\n")
	}
	src.WriteString("}\n")
	got := shapeProblems("embed.go", []byte(src.String()))
	if len(got) != 1 || !strings.Contains(got[0], "struct over has 13 fields") {
		t.Errorf("problems = %q, want only struct over (12 fields and an embedded group) flagged", got)
	}
}

// TestStructureCanFail feeds the check a file that breaks both limits.
func TestStructureCanFail(t *testing.T) {
	t.Parallel()
	var src strings.Builder
	src.WriteString("package team\n\ntype god struct {\n")
	for i := range maxStructFields + 1 {
		src.WriteString("\tf" + itoa(i) + " int\n")
	}
	src.WriteString("}\n")
	for range maxFileLines {
		src.WriteString("\n")
	}
	got := shapeProblems("god.go", []byte(src.String()))
	if len(got) != 2 || !strings.Contains(got[0], "lines, over") || !strings.Contains(got[1], "struct god has 13 fields") {
		t.Errorf("problems of a god object in a long file = %q, want the length and the field count", got)
	}
}
