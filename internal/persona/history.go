package persona

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/gofrs/flock"
)

// HistoryFile is the theme history's name, as seed 004 keeps it in the
// user's ~/.claude (outside any repository).
const HistoryFile = "team-theme-history.json"

// maxHistory bounds the history: the oldest entries fall off.
const maxHistory = 200

// Entry is one team formed. Pattern, Theme and Characters are seed 004's
// common fields; Team, Time and Lead are troupe's pattern-independent
// additions (the lead's character is the session's own in mixed-genius).
type Entry struct {
	Pattern    string    `json:"pattern"`
	Theme      string    `json:"theme"`
	Characters []string  `json:"characters"`
	Lead       string    `json:"lead_character,omitempty"`
	Team       string    `json:"team,omitempty"`
	Workspace  string    `json:"workspace,omitempty"`
	Time       time.Time `json:"time"`
}

// History is the JSON array of teams formed, newest first, in one file.
type History struct {
	path string
}

// NewHistory returns the history kept in path.
func NewHistory(path string) *History { return &History{path: path} }

// DefaultHistoryPath is ~/.claude/team-theme-history.json, or the file in
// $CLAUDE_CONFIG_DIR when that is set (Claude Code's own config dir
// override); "" when neither is known.
func DefaultHistoryPath() string {
	if d := os.Getenv("CLAUDE_CONFIG_DIR"); d != "" {
		return filepath.Join(d, HistoryFile)
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return ""
	}
	return filepath.Join(home, ".claude", HistoryFile)
}

// Path is the history file.
func (h *History) Path() string {
	if h == nil {
		return ""
	}
	return h.path
}

// Read returns the entries, newest first. A missing file is an empty
// history; a file that is not a JSON array of entries is an error naming
// it (it is the user's, and may have been edited by hand).
func (h *History) Read() ([]Entry, error) {
	if h == nil || h.path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(h.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read theme history: %w", err)
	}
	var out []Entry
	if len(data) == 0 {
		return nil, nil
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("read theme history %s: %w", h.path, err)
	}
	return out, nil
}

// Prepend puts e first: under an exclusive lock on a sibling .lock file,
// read, prepend, and replace the file whole (temp file, fsync, rename), so
// concurrent teams never lose each other's entries and a crash leaves the
// old file or the new one. A file that cannot be read as a history is
// kept beside it (.bad) rather than overwritten silently.
func (h *History) Prepend(e Entry) error {
	if h == nil || h.path == "" {
		return errors.New("theme history: no file (no home directory)")
	}
	if err := os.MkdirAll(filepath.Dir(h.path), 0o755); err != nil {
		return fmt.Errorf("theme history: %w", err)
	}
	lock := flock.New(h.path + ".lock")
	if err := lock.Lock(); err != nil {
		return fmt.Errorf("theme history: lock %s: %w", h.path, err)
	}
	defer lock.Unlock()
	old, err := h.Read()
	if err != nil {
		if rerr := os.Rename(h.path, h.path+".bad"); rerr != nil {
			return err
		}
		old = nil
	}
	all := append([]Entry{e}, old...)
	if len(all) > maxHistory {
		all = all[:maxHistory]
	}
	data, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return fmt.Errorf("theme history: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(h.path), ".team-theme-history-*")
	if err != nil {
		return fmt.Errorf("theme history: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("theme history %s: %w", h.path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("theme history %s: %w", h.path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("theme history %s: %w", h.path, err)
	}
	if err := os.Rename(tmp.Name(), h.path); err != nil {
		return fmt.Errorf("theme history %s: %w", h.path, err)
	}
	return nil
}
