package pattern

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/gofrs/flock"
)

// HistoryEntry is one team that was formed.
type HistoryEntry struct {
	Time    time.Time `json:"time"`
	Team    string    `json:"team"`
	Pattern string    `json:"pattern"`
	Members []string  `json:"members"`
}

// History is the append-only record of the teams formed in a workspace
// (.troupe/history.jsonl), one JSON line per team.
type History struct {
	path string
}

// NewHistory returns the history kept in path.
func NewHistory(path string) *History { return &History{path: path} }

// Path is the history file.
func (h *History) Path() string { return h.path }

// Append adds an entry: one write of one line under an exclusive lock on a
// sibling .lock file, so that concurrent teams never interleave.
func (h *History) Append(e HistoryEntry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	if err := os.MkdirAll(filepath.Dir(h.path), 0o755); err != nil {
		return fmt.Errorf("append history: %w", err)
	}
	lock := flock.New(h.path + ".lock")
	if err := lock.Lock(); err != nil {
		return fmt.Errorf("append history: lock %s: %w", h.path, err)
	}
	defer lock.Unlock()
	f, err := os.OpenFile(h.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("append history: %w", err)
	}
	if _, err := f.Write(line); err != nil {
		f.Close()
		return fmt.Errorf("append history %s: %w", h.path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("append history %s: %w", h.path, err)
	}
	return f.Close()
}

// Read returns the entries, the newest first. A missing file is an empty
// history; a line that cannot be read (a torn last line, a hand edit) is
// skipped.
func (h *History) Read() ([]HistoryEntry, error) {
	data, err := os.ReadFile(h.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	var out []HistoryEntry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for sc.Scan() {
		var e HistoryEntry
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			out = append(out, e)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// UsedMembers returns every member name in the history, the most recently
// used first, each once.
func (h *History) UsedMembers() ([]string, error) {
	entries, err := h.Read()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, e := range entries {
		for _, m := range e.Members {
			if !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		}
	}
	return out, nil
}
