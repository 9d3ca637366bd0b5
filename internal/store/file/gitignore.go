package file

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
)

// Gitignore is what the state directory's own .gitignore holds: everything
// the runtime writes (transcripts, inboxes, journals, logs, snapshots) stays
// out of commits, while the project's shared configuration kept there
// (settings.json, patterns/, skills/) can still be committed, as
// .claude/settings.json is. settings.local.json stays personal.
const Gitignore = `# Written by troupe: its state (transcripts, inboxes, logs) never belongs in a commit.
*
!/settings.json
!/patterns/
!/patterns/**
!/skills/
!/skills/**
`

// writeGitignore gives the state directory its .gitignore unless it has one
// (a user's own file is never replaced). Failing to write it (a read-only
// state directory) is logged, not fatal: reading a team must still work.
func writeGitignore(dir string, log *slog.Logger) {
	f, err := os.OpenFile(filepath.Join(dir, ".gitignore"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return
	}
	if err == nil {
		_, err = f.WriteString(Gitignore)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		log.Warn("state directory .gitignore not written", "dir", dir, "err", err)
	}
}
