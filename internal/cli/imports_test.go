package cli

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// forbiddenInCLI are the concrete stores and providers cli must not name:
// package app opens stores from a URL and builds providers, in one place.
// The scripted fake servers (llm/fakeapi, llm/fakeopenai) are allowed: they
// are what troupe fake-api and the demo serve, not providers.
var forbiddenInCLI = []string{
	"github.com/troupe-dev/troupe/internal/store/file",
	"github.com/troupe-dev/troupe/internal/store/nats",
	"github.com/troupe-dev/troupe/internal/llm/anthropic",
	"github.com/troupe-dev/troupe/internal/llm/openai",
}

// TestCLIImportsNoConcreteStoreOrProvider reads the imports of cli's own
// (non-test) files.
func TestCLIImportsNoConcreteStoreOrProvider(t *testing.T) {
	t.Parallel()
	imports := goImports(t, ".", false)
	if len(imports["github.com/spf13/cobra"]) == 0 {
		t.Fatalf("read no import of cobra in cli's files: the check reads the wrong files (%d imports found)", len(imports))
	}
	if diff := cmp.Diff(map[string][]string{}, forbidden(imports, forbiddenInCLI)); diff != "" {
		t.Errorf("cli imports a concrete store or provider; open it through internal/app (-want +got):\n%s", diff)
	}
}

// TestForbiddenImportsFound proves the check sees an import: a file that
// names the file store is reported, one that does not is not.
func TestForbiddenImportsFound(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string
		want map[string][]string
	}{
		{"file store", "package x\nimport (\n\t\"fmt\"\n\tfs \"github.com/troupe-dev/troupe/internal/store/file\"\n)\n",
			map[string][]string{"github.com/troupe-dev/troupe/internal/store/file": {"x.go"}}},
		{"app only", "package x\nimport \"github.com/troupe-dev/troupe/internal/app\"\n", map[string][]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(tt.src), 0o644); err != nil {
				t.Fatal(err)
			}
			got := forbidden(goImports(t, dir, false), forbiddenInCLI)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// goImports maps each import path of the Go files in dir (test files too
// when withTests) to the files that import it.
func goImports(t *testing.T, dir string, withTests bool) map[string][]string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	fset := token.NewFileSet()
	for _, name := range names {
		if !withTests && strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatalf("%s: import %s: %v", name, imp.Path.Value, err)
			}
			out[path] = append(out[path], filepath.Base(name))
		}
	}
	return out
}

// forbidden is the part of imports whose paths are in banned.
func forbidden(imports map[string][]string, banned []string) map[string][]string {
	out := map[string][]string{}
	for _, b := range banned {
		if files := imports[b]; len(files) > 0 {
			sort.Strings(files)
			out[b] = files
		}
	}
	return out
}
