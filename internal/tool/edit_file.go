package tool

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

//go:embed edit_file.md
var editFileDescription string

type editFileArgs struct {
	Path       string `json:"path" required:"true" desc:"The file to edit, relative to the workspace or absolute inside it."`
	OldString  string `json:"old_string" required:"true" desc:"The exact text to replace, including whitespace and indentation; it must occur exactly once unless replace_all is set."`
	NewString  string `json:"new_string" required:"true" desc:"The text to put in its place; it must differ from old_string."`
	ReplaceAll bool   `json:"replace_all" desc:"Replace every occurrence of old_string; default false."`
}

type editFileTool struct{}

var editFileSpec = lazySpec[editFileArgs]("edit_file", editFileDescription)

func (editFileTool) Spec() llm.ToolSpec { return editFileSpec() }
func (editFileTool) ReadOnly() bool     { return false }
func (editFileTool) Kind() kind.Kind    { return kind.Edit }

func (editFileTool) Run(ctx context.Context, env *Env, input json.RawMessage) Result {
	args, res, ok := decodeArgs[editFileArgs]("edit_file", input)
	if !ok {
		return res
	}
	if args.OldString == "" {
		return Errorf(`invalid arguments for edit_file: "old_string" is empty; to create a file or replace all of it, use write_file`)
	}
	if args.OldString == args.NewString {
		return Errorf(`invalid arguments for edit_file: "old_string" and "new_string" are the same; there is nothing to change`)
	}
	ws, res, ok := workspaceOf(env, "edit_file")
	if !ok {
		return res
	}
	place, err := ws.Locate(args.Path)
	if err != nil {
		return Errorf("edit_file: %v", err)
	}
	note, err := env.checkWrite(ctx, place)
	if err != nil {
		return Errorf("edit_file: %v", err)
	}
	rel, root := place.Rel, place.Root()
	fi, err := root.Stat(rel)
	if err != nil {
		return Errorf("edit_file: %v", ws.Explain(args.Path, err))
	}
	if fi.IsDir() {
		return Errorf("edit_file: %q is a directory", args.Path)
	}
	if !fi.Mode().IsRegular() {
		return Errorf("edit_file: %q is not a regular file (%v)", args.Path, fi.Mode().Type())
	}
	data, err := root.ReadFile(rel)
	if err != nil {
		return Errorf("edit_file: %v", ws.Explain(args.Path, err))
	}
	if isBinary(data) {
		return Errorf("edit_file: %q is a binary file", args.Path)
	}
	content := string(data)
	n := strings.Count(content, args.OldString)
	switch {
	case n == 0:
		return Errorf("edit_file: old_string matched 0 times in %q; read the file again and copy the text exactly, including whitespace and indentation", args.Path)
	case n > 1 && !args.ReplaceAll:
		return Errorf("edit_file: old_string matched %d times in %q; set replace_all to replace every occurrence, or include more surrounding context so that it matches exactly once", n, args.Path)
	}
	if err := ctx.Err(); err != nil {
		return Errorf("edit_file: %v", err)
	}
	first := strings.Index(content, args.OldString)
	updated := strings.Replace(content, args.OldString, args.NewString, max(n, 1))
	if !args.ReplaceAll {
		updated = content[:first] + args.NewString + content[first+len(args.OldString):]
	}
	if _, err := writeFile(root, rel, []byte(updated)); err != nil {
		return Errorf("edit_file: %v", ws.Explain(args.Path, err))
	}
	res = OK(fmt.Sprintf("Edited %s: replaced 1 occurrence. The result:\n%s", args.Path, snippet(updated, first, len(args.NewString))))
	if n > 1 {
		res = OK(fmt.Sprintf("Edited %s: replaced %s.", args.Path, plural(n, "occurrence")))
	}
	res.Response = EditResponse{FilePath: place.Abs(), OldString: args.OldString, NewString: args.NewString,
		OriginalFile: content, StructuredPatch: Patch(content, updated), ReplaceAll: args.ReplaceAll}
	return withNote(res, note)
}

// snippet returns the lines around content[at:at+n], numbered like
// read_file, so that the model sees the edit in place without reading the
// file again.
func snippet(content string, at, n int) string {
	const around = 3
	startLine := strings.Count(content[:at], "\n") // 0-based
	endLine := startLine + strings.Count(content[at:at+n], "\n")
	lines := strings.Split(content, "\n")
	if strings.HasSuffix(content, "\n") {
		lines = lines[:len(lines)-1]
	}
	var b strings.Builder
	for i := max(0, startLine-around); i <= min(len(lines)-1, endLine+around); i++ {
		fmt.Fprintf(&b, "%6d\t%s\n", i+1, cutLine(lines[i]))
	}
	return b.String()
}
