package app

import (
	"fmt"
	"strings"
)

// AddDirs widens what the agents reach to the settings'
// additionalDirectories and the --add-dir flags, as Claude Code does: the
// file tools reach each through its own os.Root, the permission engine
// treats it as it treats the workspace (acceptEdits accepts edits there;
// the built-in protected paths are protected there too), and the bash
// sandbox, when on, may write there. A settings entry that is not a
// directory is reported and skipped; a flag's is an error (checked
// before).
func (e *Env) AddDirs(flagDirs []string) error {
	var dirs []string
	if e.Settings != nil {
		for _, d := range e.Settings.AdditionalDirectories {
			if err := e.Workspace.AddDir(d.Rule); err != nil {
				e.Logger.Warn("additional directory skipped", "dir", d.Rule, "source", d.Source.String(), "err", err)
				if e.warn != nil {
					fmt.Fprintf(e.warn, "troupe: settings: %s (%s): %v; skipped\n", d.Rule, d.Source, err)
				}
				continue
			}
			dirs = append(dirs, d.Rule)
		}
	}
	for _, d := range flagDirs {
		if err := e.Workspace.AddDir(d); err != nil {
			return usageError(fmt.Errorf("--add-dir: %w", err))
		}
		dirs = append(dirs, d)
	}
	if len(dirs) == 0 || e.Rules == nil {
		return nil
	}
	e.Logger.Info("additional directories", "dirs", dirs)
	// The model is told, as Claude Code tells it, or it would never
	// reach them.
	e.Sections = append(e.Sections, "Additional working directories (reach them by absolute path; the same permission rules apply as in the workspace):\n- "+strings.Join(e.Workspace.Dirs(), "\n- "))
	e.Rules.Policy.AddDirs(dirs...)
	if e.Rules.Sandbox != nil {
		e.Rules.Sandbox.Writable = append(e.Rules.Sandbox.Writable, e.Workspace.Dirs()...)
	}
	return nil
}
