package app

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/troupe-dev/troupe/internal/settings"
)

// settingsOptions are the settings files a session in dir reads.
func (e *Env) settingsOptions(dir string) settings.Options {
	src := e.opts.Settings
	return settings.Options{Workspace: dir, Flag: src.Flag, Extra: src.Extra}
}

// loadSettings reads the session's settings: from the lead's snapshot when
// this process is a teammate given one, else from the files, which are then
// snapshotted under the state directory for the session's teammates and for
// spotting changes made during the run. The snapshot file is removed when the
// session's env closes.
func (e *Env) loadSettings() (*settings.Settings, error) {
	src := e.opts.Settings
	if src.Snapshot != "" {
		read := settings.ReadSnapshot
		if src.SnapshotSum != "" {
			read = func(p string) (*settings.Snapshot, error) { return settings.ReadSnapshotSum(p, src.SnapshotSum) }
		}
		snap, err := read(src.Snapshot)
		if err != nil {
			return nil, err
		}
		e.snapshot = snap
		return snap.Settings()
	}
	s, err := settings.Load(e.settingsOptions(e.Dir))
	if err != nil {
		return nil, err
	}
	e.snapshot = s.Snapshot(time.Now())
	path := filepath.Join(e.StateDir, "snapshots", fmt.Sprintf("%d-%d.json", os.Getpid(), time.Now().UnixNano()))
	if err := settings.WriteSnapshot(path, e.snapshot); err != nil {
		// Teammate processes then read the files themselves: worth a
		// warning, not a failed session.
		e.Logger.Warn("settings snapshot", "err", err)
		return s, nil
	}
	if e.snapshotSum, err = settings.HashFile(path); err != nil {
		e.Logger.Warn("settings snapshot", "err", err)
		os.Remove(path)
		return s, nil
	}
	e.snapshotPath = path
	return s, nil
}

// SettingsChanges returns what changed in the settings files and hook
// scripts since the session started; they are not applied to it. The UI
// shows them for review; Close logs them.
func (e *Env) SettingsChanges() []settings.Change {
	if e.snapshot == nil {
		return nil
	}
	return e.snapshot.Changed()
}

// reportSettingsChanges logs the changes made during the run, and says so on
// warn (headless runs): the next session will apply them.
func (e *Env) reportSettingsChanges() {
	for _, c := range e.SettingsChanges() {
		e.Logger.Warn("settings changed during the run; not applied", "change", c.String())
		if e.warn != nil {
			fmt.Fprintf(e.warn, "troupe: %s during the run; not applied to it (review it before the next run)\n", c)
		}
	}
}
