package tool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

// Limits shared by the builtin tools.
const (
	// OutputCap bounds what bash returns to the model.
	OutputCap = 50_000
	// maxLineLen is where read_file and grep cut a long line.
	maxLineLen = 2000
	// binarySniff is how much of a file is looked at to call it binary.
	binarySniff = 8000
)

// Builtins returns the builtin file and shell tools in the order they are
// offered: bash, read_file, write_file, edit_file, glob, grep.
func Builtins() []Tool {
	return []Tool{bashTool{}, readFileTool{}, writeFileTool{}, editFileTool{}, globTool{}, grepTool{}}
}

// JobTools returns the tools over an agent's background jobs: TaskOutput,
// TaskStop. They need Env.Jobs.
func JobTools() []Tool {
	return []Tool{taskOutputTool{}, taskStopTool{}}
}

// All returns one of each tool this package defines, whatever agent it
// would be given to: the builtins, the job tools, TodoWrite, Task, Skill and
// compact (their handlers and lists empty). It is what KindOf reads.
func All() []Tool {
	out := append(Builtins(), JobTools()...)
	return append(out, TodoWriteTool(nil), TaskTool(TaskHandlers{}), SkillTool(nil), CompactTool())
}

// KindOf returns the kind the tool of this package called name declares,
// kind.Unknown for any other name: a caller that holds a call but not the
// registry it came from (a permission request relayed by name) learns
// the kind from the tool itself, never from a table of names. Tools of
// other packages (the team's) are known to their registry: Registry.Kind.
func KindOf(name string) kind.Kind {
	for _, t := range All() {
		if t.Spec().Name == name {
			return t.Kind()
		}
	}
	return kind.Unknown
}

// newSpec builds a spec whose input schema comes from the argument struct.
func newSpec[T any](name, description string) llm.ToolSpec {
	return llm.ToolSpec{Name: name, Description: description, InputSchema: schemaOf[T]()}
}

// lazySpec is newSpec made on first use: the schemas are built by
// reflection, and every troupe process would pay for them at start, though
// most never offer a tool.
func lazySpec[T any](name, description string) func() llm.ToolSpec {
	return sync.OnceValue(func() llm.ToolSpec { return newSpec[T](name, description) })
}

// decodeArgs decodes input for tool name, or returns the error Result.
func decodeArgs[T any](name string, input json.RawMessage) (T, Result, bool) {
	args, err := Decode[T](input)
	if err != nil {
		return args, Errorf("invalid arguments for %s: %v", name, err), false
	}
	return args, Result{}, true
}

// workspaceOf returns env's workspace, or the error Result when the agent
// has none.
func workspaceOf(env *Env, name string) (*Workspace, Result, bool) {
	if env == nil || env.Workspace == nil {
		return nil, Errorf("%s is not available: this agent has no workspace", name), false
	}
	return env.Workspace, Result{}, true
}

// isBinary reports whether the start of a file looks like binary data.
func isBinary(head []byte) bool {
	return bytes.IndexByte(head[:min(len(head), binarySniff)], 0) >= 0
}

// cutLine shortens a line longer than maxLineLen bytes at a rune boundary
// and says how much was cut.
func cutLine(line string) string {
	if len(line) <= maxLineLen {
		return line
	}
	n := maxLineLen
	for n > 0 && !utf8.RuneStart(line[n]) {
		n--
	}
	return fmt.Sprintf("%s… [line cut: %d more bytes]", line[:n], len(line)-n)
}

// plural returns "1 line" or "2 lines".
func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
