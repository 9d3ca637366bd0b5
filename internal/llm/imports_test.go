package llm

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const module = "github.com/troupe-dev/troupe/"

// TestLLMImportsNothingAbove checks that llm and its subpackages, tests
// included, import no troupe package outside internal/llm: the record and
// replay of model traffic (internal/replay: cassette, pace) sits above llm
// and wraps providers from there; no arrow runs back up.
func TestLLMImportsNothingAbove(t *testing.T) {
	got, files := upwardImports(t, ".")
	if files < 10 {
		t.Fatalf("read %d Go files under internal/llm: the check reads the wrong tree", files)
	}
	if diff := cmp.Diff(map[string][]string{}, got); diff != "" {
		t.Errorf("internal/llm imports packages above it (-want +got):\n%s", diff)
	}
}

// TestUpwardImportsFound proves the check sees an import: a subpackage
// that imports the cassette is reported, one that imports llm/retry is not.
func TestUpwardImportsFound(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want map[string][]string
	}{
		{"cassette", "package x\nimport _ \"" + module + "internal/replay/cassette\"\n",
			map[string][]string{module + "internal/replay/cassette": {"sub/x.go"}}},
		{"old pace", "package x\nimport \"" + module + "internal/pace\"\n",
			map[string][]string{module + "internal/pace": {"sub/x.go"}}},
		{"retry", "package x\nimport \"" + module + "internal/llm/retry\"\n", map[string][]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "sub", "x.go"), []byte(tt.src), 0o644); err != nil {
				t.Fatal(err)
			}
			got, _ := upwardImports(t, dir)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// upwardImports walks the Go files under root and maps each troupe import
// outside internal/llm to the files (relative to root) that name it. It
// also returns how many files it read.
func upwardImports(t *testing.T, root string) (map[string][]string, int) {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		files++
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if strings.HasPrefix(p, module) && p != module+"internal/llm" && !strings.HasPrefix(p, module+"internal/llm/") {
				out[p] = append(out[p], filepath.ToSlash(rel))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out, files
}
