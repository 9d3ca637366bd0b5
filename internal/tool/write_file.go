package tool

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

//go:embed write_file.md
var writeFileDescription string

type writeFileArgs struct {
	Path    string `json:"path" required:"true" desc:"The file to write, relative to the workspace or absolute inside it. Missing parent directories are created."`
	Content string `json:"content" required:"true" desc:"The complete new content of the file."`
}

type writeFileTool struct{}

var writeFileSpec = lazySpec[writeFileArgs]("write_file", writeFileDescription)

func (writeFileTool) Spec() llm.ToolSpec { return writeFileSpec() }
func (writeFileTool) ReadOnly() bool     { return false }
func (writeFileTool) Kind() kind.Kind    { return kind.Edit }

func (writeFileTool) Run(ctx context.Context, env *Env, input json.RawMessage) Result {
	args, res, ok := decodeArgs[writeFileArgs]("write_file", input)
	if !ok {
		return res
	}
	ws, res, ok := workspaceOf(env, "write_file")
	if !ok {
		return res
	}
	place, err := ws.Locate(args.Path)
	if err != nil {
		return Errorf("write_file: %v", err)
	}
	note, err := env.checkWrite(ctx, place)
	if err != nil {
		return Errorf("write_file: %v", err)
	}
	rel, root := place.Rel, place.Root()
	if err := ctx.Err(); err != nil {
		return Errorf("write_file: %v", err)
	}
	var original *string // for hooks: what the write replaced
	if b, err := root.ReadFile(rel); err == nil {
		o := string(b)
		original = &o
	}
	created, err := writeFile(root, rel, []byte(args.Content))
	if err != nil {
		return Errorf("write_file: %v", ws.Explain(args.Path, err))
	}
	verb, typ := "Updated", "update"
	if created {
		verb, typ = "Created", "create"
	}
	res = OK(fmt.Sprintf("%s %s (%s written)", verb, args.Path, plural(len(args.Content), "byte")))
	res.Response = WriteResponse{Type: typ, FilePath: place.Abs(), Content: args.Content, StructuredPatch: []Hunk{}}
	if !created && original != nil {
		res.Response = WriteResponse{Type: typ, FilePath: place.Abs(), Content: args.Content,
			StructuredPatch: Patch(*original, args.Content), OriginalFile: original}
	}
	return withNote(res, note)
}

// writeFile replaces the content of the root-relative file rel, creating it
// and its parent directories when missing. A regular file is replaced
// atomically (a temporary file beside it, then a rename) and keeps its
// mode. A symbolic link is written through, so that os.Root refuses one
// that leads out, dangling or not, instead of replacing the link. It
// reports whether the file was created.
func writeFile(root *os.Root, rel string, data []byte) (created bool, err error) {
	if rel == "." {
		return false, fmt.Errorf("%w: the path is the workspace directory itself", ErrBadPath)
	}
	mode := fs.FileMode(0o644)
	switch fi, err := root.Lstat(rel); {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		return writeThrough(root, rel, data)
	case err == nil && fi.IsDir():
		return false, namedErrorf("%q is a directory", rel)
	case err == nil && !fi.Mode().IsRegular():
		return false, namedErrorf("%q is not a regular file (%v)", rel, fi.Mode().Type())
	case err == nil:
		mode = fi.Mode().Perm()
	case errors.Is(err, fs.ErrNotExist):
		created = true
		if dir := filepath.Dir(rel); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return false, err
			}
		}
	default:
		return false, err
	}

	tmp := filepath.Join(filepath.Dir(rel), "."+filepath.Base(rel)+".troupe-tmp-"+randomSuffix())
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil {
			root.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, err
	}
	if err = root.Chmod(tmp, mode); err != nil { // the umask may have narrowed it
		return false, err
	}
	if err = root.Rename(tmp, rel); err != nil {
		return false, err
	}
	return created, nil
}

// writeThrough writes data to what the symbolic link rel points at,
// through the root.
func writeThrough(root *os.Root, rel string, data []byte) (created bool, err error) {
	_, statErr := root.Stat(rel)
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return false, err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return errors.Is(statErr, fs.ErrNotExist), err
}

func randomSuffix() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
