package cli

import (
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

// tuiCommands lists the skills and Claude Code commands the user can type
// as /name in the terminal UI.
func tuiCommands(set *skill.Set) []tui.Command {
	var out []tui.Command
	for _, c := range set.Commands() {
		out = append(out, tui.Command{Name: c.Name, ArgumentHint: c.ArgumentHint, Description: c.Description})
	}
	return out
}
