package tool

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

//go:embed read_file.md
var readFileDescription string

const readDefaultLimit = 2000

type readFileArgs struct {
	Path   string `json:"path" required:"true" desc:"The file to read, relative to the workspace or absolute inside it."`
	Offset *int   `json:"offset" desc:"The 1-based line to start at; default 1."`
	Limit  *int   `json:"limit" desc:"How many lines to read; default 2000."`
}

type readFileTool struct{}

var readFileSpec = lazySpec[readFileArgs]("read_file", readFileDescription)

func (readFileTool) Spec() llm.ToolSpec { return readFileSpec() }
func (readFileTool) ReadOnly() bool     { return true }
func (readFileTool) Kind() kind.Kind    { return kind.Read }

func (readFileTool) Run(ctx context.Context, env *Env, input json.RawMessage) Result {
	args, res, ok := decodeArgs[readFileArgs]("read_file", input)
	if !ok {
		return res
	}
	offset, limit := 1, readDefaultLimit
	if args.Offset != nil {
		offset = *args.Offset
	}
	if args.Limit != nil {
		limit = *args.Limit
	}
	if offset < 1 {
		return Errorf(`invalid arguments for read_file: "offset" is 1-based and must be at least 1, got %d`, offset)
	}
	if limit < 1 {
		return Errorf(`invalid arguments for read_file: "limit" must be at least 1, got %d`, limit)
	}
	ws, res, ok := workspaceOf(env, "read_file")
	if !ok {
		return res
	}
	place, err := ws.Locate(args.Path)
	if err != nil {
		return Errorf("read_file: %v", err)
	}
	rel, root := place.Rel, place.Root()
	// Stat before opening: opening a FIFO or a device could block.
	fi, err := root.Stat(rel)
	if err != nil {
		return Errorf("read_file: %v", ws.Explain(args.Path, err))
	}
	if fi.IsDir() {
		return Errorf("read_file: %q is a directory; use glob to list its files", args.Path)
	}
	if !fi.Mode().IsRegular() {
		return Errorf("read_file: %q is not a regular file (%v)", args.Path, fi.Mode().Type())
	}
	f, err := root.Open(rel)
	if err != nil {
		return Errorf("read_file: %v", ws.Explain(args.Path, err))
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64*1024)
	if head, _ := r.Peek(binarySniff); isBinary(head) {
		return Errorf("read_file: %q is a binary file (%s); it cannot be shown as text", args.Path, plural(int(fi.Size()), "byte"))
	}
	if fi.Size() == 0 {
		return OK(fmt.Sprintf("(%s is empty)", args.Path))
	}

	var b, raw strings.Builder
	n := 0 // lines read so far
	shown := 0
	for {
		if n%1024 == 0 && ctx.Err() != nil {
			return Errorf("read_file: %v", ctx.Err())
		}
		line, err := readLine(r, n+1 >= offset && shown < limit)
		if err == io.EOF {
			break
		}
		if err != nil {
			return Errorf("read_file: %v", ws.Explain(args.Path, err))
		}
		n++
		if n >= offset && shown < limit {
			fmt.Fprintf(&b, "%6d\t%s\n", n, line)
			raw.WriteString(line + "\n")
			shown++
		}
	}
	if offset > n {
		return Errorf("read_file: offset %d is past the end of %q, which has %s", offset, args.Path, plural(n, "line"))
	}
	if last := offset + shown - 1; last < n {
		fmt.Fprintf(&b, "\n(showing lines %d-%d of %d; %s more: continue with offset=%d)\n", offset, last, n, plural(n-last, "line"), last+1)
	}
	res = OK(b.String())
	res.Response = ReadResponse{Type: "text", File: ReadFile{FilePath: place.Abs(), Content: raw.String(),
		NumLines: shown, StartLine: offset, TotalLines: n}}
	return res
}

// readLine returns the next line without its line ending, cut like
// cutLine when it is long. When keep is false the line is only skipped.
// A huge line costs no memory: only what can be shown is kept.
func readLine(r *bufio.Reader, keep bool) (string, error) {
	var buf []byte
	total := 0
	const keepMax = maxLineLen + utf8.UTFMax + 1 // room for a whole rune and the newline
	for {
		chunk, err := r.ReadSlice('\n')
		total += len(chunk)
		if keep && len(buf) < keepMax {
			buf = append(buf, chunk[:min(len(chunk), keepMax-len(buf))]...)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && total == 0:
			return "", io.EOF
		case err != nil && err != io.EOF:
			return "", err
		}
		if !keep {
			return "", nil
		}
		lineLen := total
		if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
			lineLen--
		}
		if len(buf) == total { // the whole line was kept
			buf = bytes.TrimSuffix(buf, []byte("\n"))
			return cutLine(string(bytes.TrimSuffix(buf, []byte("\r")))), nil
		}
		n := maxLineLen
		for n > 0 && !utf8.RuneStart(buf[n]) {
			n--
		}
		return fmt.Sprintf("%s… [line cut: %d more bytes]", buf[:n], lineLen-n), nil
	}
}
