package tool

import "strings"

// The types below are Claude Code's tool_response objects, as its hooks
// receive them after a call of Bash, Read, Write or Edit (field names as
// Claude Code documents and sends them). A tool fills Result.Response with
// one; the model never sees it.

// BashResponse is Bash's tool_response.
type BashResponse struct {
	Stdout      string `json:"stdout"`
	Stderr      string `json:"stderr"`
	Interrupted bool   `json:"interrupted"`
	IsImage     bool   `json:"isImage"`
	// BackgroundTaskID is the job of a run_in_background call.
	BackgroundTaskID string `json:"backgroundTaskId,omitempty"`
}

// ReadResponse is Read's tool_response for a text file.
type ReadResponse struct {
	Type string   `json:"type"` // "text"
	File ReadFile `json:"file"`
}

// ReadFile is the part of a file a Read call returned.
type ReadFile struct {
	FilePath   string `json:"filePath"`
	Content    string `json:"content"`
	NumLines   int    `json:"numLines"`
	StartLine  int    `json:"startLine"`
	TotalLines int    `json:"totalLines"`
}

// WriteResponse is Write's tool_response.
type WriteResponse struct {
	Type            string  `json:"type"` // "create" or "update"
	FilePath        string  `json:"filePath"`
	Content         string  `json:"content"`
	StructuredPatch []Hunk  `json:"structuredPatch"`
	OriginalFile    *string `json:"originalFile"` // nil for a new file
}

// EditResponse is Edit's tool_response.
type EditResponse struct {
	FilePath        string `json:"filePath"`
	OldString       string `json:"oldString"`
	NewString       string `json:"newString"`
	OriginalFile    string `json:"originalFile"`
	StructuredPatch []Hunk `json:"structuredPatch"`
	UserModified    bool   `json:"userModified"`
	ReplaceAll      bool   `json:"replaceAll"`
}

// Hunk is one hunk of a unified diff, as Claude Code's structuredPatch
// has it: lines start with ' ', '-' or '+'.
type Hunk struct {
	OldStart int      `json:"oldStart"`
	OldLines int      `json:"oldLines"`
	NewStart int      `json:"newStart"`
	NewLines int      `json:"newLines"`
	Lines    []string `json:"lines"`
}

// Patch returns the change from old to new as one hunk with up to three
// lines of context around the lines that differ (none when equal). One
// hunk is enough for what hooks read of it: where the change is and what
// it is.
func Patch(old, new string) []Hunk {
	a, b := splitLines(old), splitLines(new)
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	if pre == len(a) && pre == len(b) {
		return []Hunk{}
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	const context = 3
	start := max(0, pre-context)
	endA, endB := len(a)-suf, len(b)-suf
	tail := min(suf, context)
	h := Hunk{OldStart: start + 1, NewStart: start + 1}
	for _, l := range a[start:pre] {
		h.Lines = append(h.Lines, " "+l)
	}
	for _, l := range a[pre:endA] {
		h.Lines = append(h.Lines, "-"+l)
	}
	for _, l := range b[pre:endB] {
		h.Lines = append(h.Lines, "+"+l)
	}
	for _, l := range a[endA : endA+tail] {
		h.Lines = append(h.Lines, " "+l)
	}
	h.OldLines = endA + tail - start
	h.NewLines = endB + tail - start
	if h.OldLines == 0 {
		h.OldStart = start // as diff writes an empty range: the line before
	}
	if h.NewLines == 0 {
		h.NewStart = start
	}
	return []Hunk{h}
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
