package subagent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/secret"
)

// Run names one run of a subagent, as its hooks and its transcript see it.
type Run struct {
	// ID is unique per run (Claude Code's agent_id).
	ID string
	// Name is the subagent's agent name ("team-lead:explore").
	Name string
	// Type is its type as Claude Code names it (Claude Code's agent_type:
	// "Explore", "general-purpose", a .claude/agents name).
	Type string
	// TranscriptPath is the file its messages are written to ("": none).
	TranscriptPath string
}

type runKey struct{}

// RunOf returns the run whose context ctx is: the context Runner.Start
// and Runner.Stop are given carries it.
func RunOf(ctx context.Context) (Run, bool) {
	r, ok := ctx.Value(runKey{}).(Run)
	return r, ok
}

// ClaudeType is the name Claude Code gives a built-in type ("Explore" for
// explore); other types keep theirs.
func ClaudeType(typ string) string {
	if typ == Explore {
		return "Explore"
	}
	return typ
}

func newRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// transcriptFile is the name of a run's transcript in the directory
// TranscriptDir gives: the parent's name, "-sub-", the run's id.
func transcriptFile(parent, id string) string {
	if parent == "" {
		parent = "agent"
	}
	return fmt.Sprintf("%s-sub-%s.jsonl", parent, id)
}

// transcript writes a run's messages, one JSON line each (the shape of the
// team's transcripts: ts and the message), secrets redacted. It is opened
// on the first message, so that a run that never speaks leaves no file.
type transcript struct {
	path string
	mu   sync.Mutex
	f    *os.File
	err  error
}

type transcriptLine struct {
	TS time.Time `json:"ts"`
	llm.Message
}

func (t *transcript) record(m llm.Message) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return
	}
	if t.f == nil {
		if t.err = os.MkdirAll(filepath.Dir(t.path), 0o755); t.err != nil {
			return
		}
		if t.f, t.err = os.OpenFile(t.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); t.err != nil {
			return
		}
	}
	line, err := json.Marshal(transcriptLine{TS: time.Now().UTC(), Message: m})
	if err != nil {
		t.err = err
		return
	}
	// A key that reached the subagent is written as [redacted], as in
	// every other transcript.
	_, t.err = t.f.Write(append(secret.RedactBytes(line), '\n'))
}

func (t *transcript) close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.f != nil {
		if err := t.f.Close(); t.err == nil {
			t.err = err
		}
		t.f = nil
	}
	return t.err
}
