package cli

import (
	"fmt"
	"strings"
)

// addDirs widens what the agents reach to the settings'
// additionalDirectories and the --add-dir flags, as Claude Code does: the
// file tools reach each through its own os.Root, the permission engine
// treats it as it treats the workspace (acceptEdits accepts edits there;
// the built-in protected paths are protected there too), and the bash
// sandbox, when on, may write there. A settings entry that is not a
// directory is reported and skipped; a flag's is an error (checked
// before).
func (e *env) addDirs(flagDirs []string) error {
	var dirs []string
	if e.settings != nil {
		for _, d := range e.settings.AdditionalDirectories {
			if err := e.ws.AddDir(d.Rule); err != nil {
				e.logger.Warn("additional directory skipped", "dir", d.Rule, "source", d.Source.String(), "err", err)
				if e.warn != nil {
					fmt.Fprintf(e.warn, "troupe: settings: %s (%s): %v; skipped\n", d.Rule, d.Source, err)
				}
				continue
			}
			dirs = append(dirs, d.Rule)
		}
	}
	for _, d := range flagDirs {
		if err := e.ws.AddDir(d); err != nil {
			return withCode(ExitUsage, fmt.Errorf("--add-dir: %w", err))
		}
		dirs = append(dirs, d)
	}
	if len(dirs) == 0 || e.rules == nil {
		return nil
	}
	e.logger.Info("additional directories", "dirs", dirs)
	// The model is told, as Claude Code tells it, or it would never
	// reach them.
	e.sections = append(e.sections, "Additional working directories (reach them by absolute path; the same permission rules apply as in the workspace):\n- "+strings.Join(e.ws.Dirs(), "\n- "))
	e.rules.Policy.AddDirs(dirs...)
	if e.rules.Sandbox != nil {
		e.rules.Sandbox.Writable = append(e.rules.Sandbox.Writable, e.ws.Dirs()...)
	}
	return nil
}
