package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/troupe-dev/troupe/internal/settings"
	"github.com/troupe-dev/troupe/internal/skill"
	"github.com/troupe-dev/troupe/internal/tui"
)

// settingsFlags say where a session's settings come from.
type settingsFlags struct {
	// file is --settings: a settings file, or a JSON object, ranked above
	// every file but managed settings (wired by the run flags).
	file string
	// snapshot is troupe agent's --settings-snapshot: the lead's snapshot,
	// loaded instead of the files, so that a teammate process runs on the
	// settings its lead started with; snapshotSum is its SHA-256, so that
	// a snapshot rewritten on disk meanwhile is refused.
	snapshot, snapshotSum string
}

// settingsOptions are the settings files a session in dir reads.
func (a *app) settingsOptions(dir string) settings.Options {
	flag := a.settings.file
	if flag == "" {
		flag = a.run.settingsInline
	}
	return settings.Options{Workspace: dir, Flag: flag, Extra: a.run.settingsFiles}
}

// loadSettings reads the session's settings: from the lead's snapshot when
// this process is a teammate given one, else from the files, which are then
// snapshotted under the state directory for the session's teammates and for
// spotting changes made during the run. The snapshot file is removed when the
// session's env closes.
func (e *env) loadSettings(a *app) (*settings.Settings, error) {
	if a.settings.snapshot != "" {
		read := settings.ReadSnapshot
		if a.settings.snapshotSum != "" {
			read = func(p string) (*settings.Snapshot, error) { return settings.ReadSnapshotSum(p, a.settings.snapshotSum) }
		}
		snap, err := read(a.settings.snapshot)
		if err != nil {
			return nil, err
		}
		e.snapshot = snap
		return snap.Settings()
	}
	s, err := settings.Load(a.settingsOptions(e.dir))
	if err != nil {
		return nil, err
	}
	e.snapshot = s.Snapshot(time.Now())
	path := filepath.Join(e.stateDir, "snapshots", fmt.Sprintf("%d-%d.json", os.Getpid(), time.Now().UnixNano()))
	if err := settings.WriteSnapshot(path, e.snapshot); err != nil {
		// Teammate processes then read the files themselves: worth a
		// warning, not a failed session.
		e.logger.Warn("settings snapshot", "err", err)
		return s, nil
	}
	if e.snapshotSum, err = settings.HashFile(path); err != nil {
		e.logger.Warn("settings snapshot", "err", err)
		os.Remove(path)
		return s, nil
	}
	e.snapshotPath = path
	return s, nil
}

// settingsChanges returns what changed in the settings files and hook
// scripts since the session started; they are not applied to it. The UI can
// call it to show them for review (nothing calls it there yet); close logs
// them.
func (e *env) settingsChanges() []settings.Change {
	if e.snapshot == nil {
		return nil
	}
	return e.snapshot.Changed()
}

// reportSettingsChanges logs the changes made during the run, and says so on
// warn (headless runs): the next session will apply them.
func (e *env) reportSettingsChanges() {
	for _, c := range e.settingsChanges() {
		e.logger.Warn("settings changed during the run; not applied", "change", c.String())
		if e.warn != nil {
			fmt.Fprintf(e.warn, "troupe: %s during the run; not applied to it (review it before the next run)\n", c)
		}
	}
}

// tuiCommands lists the skills and Claude Code commands the user can type
// as /name in the terminal UI.
func tuiCommands(set *skill.Set) []tui.Command {
	var out []tui.Command
	for _, c := range set.Commands() {
		out = append(out, tui.Command{Name: c.Name, ArgumentHint: c.ArgumentHint, Description: c.Description})
	}
	return out
}
