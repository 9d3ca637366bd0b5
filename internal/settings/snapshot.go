package settings

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// SnapshotVersion is the version of the snapshot file's schema.
const SnapshotVersion = 1

// SnapshotFileName is the name of a session's snapshot file in the state
// directory's snapshots/ folder (see cli).
const SnapshotFileName = "settings.snapshot.json"

// Snapshot is the settings a session started with: the bytes of every
// settings file it read (and which files it looked for and did not find),
// the hashes of the hook scripts they name, and the merged result for
// people reading the file. Settings rebuilds the merged settings from it
// without reading a settings file again, so a file changed during the run
// changes nothing until the next session; Changed says what changed.
type Snapshot struct {
	Version int       `json:"version"`
	TakenAt time.Time `json:"taken_at"`
	// Options are those the settings were loaded with.
	Options Options `json:"options"`
	// Files are the settings files in merge order, present or not.
	Files []SnapshotFile `json:"files"`
	// Scripts are the hook scripts of the merged hooks (HookScripts).
	Scripts []SnapshotScript `json:"hook_scripts"`
	// Resolved is the merged settings, with their sources; informative
	// only: Settings parses Files again.
	Resolved *Settings `json:"resolved,omitempty"`
}

// SnapshotFile is one settings file of a Snapshot.
type SnapshotFile struct {
	Source Source `json:"source"`
	Exists bool   `json:"exists"`
	SHA256 string `json:"sha256,omitempty"`
	// Content is the file as read.
	Content string `json:"content,omitempty"`
}

// SnapshotScript is one hook script of a Snapshot.
type SnapshotScript struct {
	Path   string `json:"path"`
	Exists bool   `json:"exists"`
	SHA256 string `json:"sha256,omitempty"`
}

// Snapshot records s as loaded; it reads the hook scripts to hash them.
func (s *Settings) Snapshot(now time.Time) *Snapshot {
	snap := &Snapshot{Version: SnapshotVersion, TakenAt: now.UTC(), Options: s.opts, Resolved: s}
	for _, src := range s.opts.Paths() {
		sf := SnapshotFile{Source: src}
		for _, f := range s.Files {
			if f.Source == src && f.data != nil {
				sf.Exists, sf.SHA256, sf.Content = true, hash(f.data), string(f.data)
			}
		}
		snap.Files = append(snap.Files, sf)
	}
	snap.Scripts = scripts(s.HookScripts(s.opts.Workspace))
	return snap
}

func scripts(paths []string) []SnapshotScript {
	out := []SnapshotScript{}
	for _, p := range paths {
		sc := SnapshotScript{Path: p}
		if data, err := os.ReadFile(p); err == nil {
			sc.Exists, sc.SHA256 = true, hash(data)
		}
		out = append(out, sc)
	}
	return out
}

func hash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Settings merges the snapshot's files again, as Load merged them, without
// reading any settings file.
func (snap *Snapshot) Settings() (*Settings, error) {
	if snap.Version != SnapshotVersion {
		return nil, fmt.Errorf("%w: settings snapshot version %d, want %d", ErrMalformed, snap.Version, SnapshotVersion)
	}
	var files []*File
	for _, sf := range snap.Files {
		if !sf.Exists {
			continue
		}
		f, err := Parse([]byte(sf.Content), sf.Source)
		if err != nil {
			return nil, fmt.Errorf("settings snapshot: %w", err)
		}
		f.data = []byte(sf.Content)
		files = append(files, f)
	}
	s := Merge(files...)
	s.resolve(snap.Options)
	return s, nil
}

// Current reads, now, the files and hook scripts snap recorded, and the
// hook scripts the files name now. A file that no longer parses is still
// recorded (its hash changed); it just names no scripts.
func (snap *Snapshot) Current(now time.Time) *Snapshot {
	cur := &Snapshot{Version: SnapshotVersion, TakenAt: now.UTC(), Options: snap.Options}
	var files []*File
	for _, old := range snap.Files {
		sf := SnapshotFile{Source: old.Source}
		var data []byte
		var err error
		if old.Source.Path == FlagSource {
			data = []byte(old.Content) // inline JSON cannot change
		} else {
			data, err = os.ReadFile(old.Source.Path)
		}
		if err == nil {
			sf.Exists, sf.SHA256, sf.Content = true, hash(data), string(data)
			if f, perr := Parse(data, old.Source); perr == nil {
				files = append(files, f)
			}
		}
		cur.Files = append(cur.Files, sf)
	}
	s := Merge(files...)
	s.resolve(snap.Options)
	paths := s.HookScripts(snap.Options.Workspace)
	for _, sc := range snap.Scripts {
		if !slices.Contains(paths, sc.Path) {
			paths = append(paths, sc.Path)
		}
	}
	slices.Sort(paths)
	cur.Scripts = scripts(paths)
	return cur
}

// Change is one difference between two snapshots.
type Change struct {
	// What is "settings file" or "hook script".
	What string `json:"what"`
	// Kind is "added", "removed" or "modified".
	Kind string `json:"kind"`
	Path string `json:"path"`
}

func (c Change) String() string { return c.What + " " + c.Path + " " + c.Kind }

// The kinds of Change.
const (
	Added    = "added"
	Removed  = "removed"
	Modified = "modified"
)

// Diff returns what changed from before to now: settings files added,
// removed or modified, and hook scripts likewise, in before's order.
func Diff(before, now *Snapshot) []Change {
	var out []Change
	nowFiles := map[string]SnapshotFile{}
	for _, f := range now.Files {
		nowFiles[f.Source.Path] = f
	}
	for _, b := range before.Files {
		n := nowFiles[b.Source.Path]
		if k := kind(b.Exists, n.Exists, b.SHA256 != n.SHA256); k != "" {
			out = append(out, Change{What: "settings file", Kind: k, Path: b.Source.Path})
		}
	}
	nowScripts := map[string]SnapshotScript{}
	for _, s := range now.Scripts {
		nowScripts[s.Path] = s
	}
	seen := map[string]bool{}
	for _, b := range before.Scripts {
		seen[b.Path] = true
		n := nowScripts[b.Path]
		if k := kind(b.Exists, n.Exists, b.SHA256 != n.SHA256); k != "" {
			out = append(out, Change{What: "hook script", Kind: k, Path: b.Path})
		}
	}
	for _, n := range now.Scripts {
		if !seen[n.Path] && n.Exists {
			out = append(out, Change{What: "hook script", Kind: Added, Path: n.Path})
		}
	}
	return out
}

func kind(was, is, differ bool) string {
	switch {
	case !was && is:
		return Added
	case was && !is:
		return Removed
	case was && is && differ:
		return Modified
	}
	return ""
}

// Changed is Diff(snap, snap.Current(time.Now())): what changed on disk
// since snap was taken. The session shows it for review (UI) or logs it
// (headless); nothing is applied.
func (snap *Snapshot) Changed() []Change {
	return Diff(snap, snap.Current(time.Now()))
}

// WriteSnapshot writes snap to path (temp file and rename, mode 0600: the
// env of settings may hold secrets), creating its directory.
func WriteSnapshot(path string, snap *Snapshot) error {
	data, err := json.MarshalIndent(snap, "", "  ")
	if err != nil {
		return fmt.Errorf("write settings snapshot: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write settings snapshot: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write settings snapshot: %w", err)
	}
	_, werr := tmp.Write(append(data, '\n'))
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write settings snapshot %s: %w", path, werr)
	}
	return nil
}

// ErrNoSnapshot is returned by ReadSnapshot when the file does not exist.
var ErrNoSnapshot = errors.New("no settings snapshot")

// ReadSnapshot reads a snapshot written by WriteSnapshot.
func ReadSnapshot(path string) (*Snapshot, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNoSnapshot, path)
	}
	if err != nil {
		return nil, fmt.Errorf("read settings snapshot: %w", err)
	}
	return ParseSnapshot(data, path)
}

// ParseSnapshot decodes a snapshot file's content; name is used in errors.
func ParseSnapshot(data []byte, name string) (*Snapshot, error) {
	var snap Snapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return nil, fmt.Errorf("%w: settings snapshot %s: %v", ErrMalformed, name, err)
	}
	if snap.Version != SnapshotVersion {
		return nil, fmt.Errorf("%w: settings snapshot %s: version %d, want %d", ErrMalformed, name, snap.Version, SnapshotVersion)
	}
	return &snap, nil
}

// HashFile is the hex SHA-256 of a file, for checking that a snapshot file
// handed to another process is the one that was written.
func HashFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return hash(data), nil
}

// ReadSnapshotSum is ReadSnapshot that also requires the file's hex SHA-256
// to be sum: a snapshot rewritten after its session wrote it is refused.
func ReadSnapshotSum(path, sum string) (*Snapshot, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNoSnapshot, path)
	}
	if err != nil {
		return nil, fmt.Errorf("read settings snapshot: %w", err)
	}
	if got := hash(data); got != sum {
		return nil, fmt.Errorf("%w: settings snapshot %s was changed after its session wrote it (sha256 %s, want %s)", ErrMalformed, path, got, sum)
	}
	return ParseSnapshot(data, path)
}
