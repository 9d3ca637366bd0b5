package pattern

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ConfigPath is seed 004's configuration file of team patterns and themes,
// relative to the workspace.
const ConfigPath = ".claude/team-themes/config.json"

// Config is what .claude/team-themes/config.json says. Seed 004 names the
// file but not its keys; troupe reads "default_pattern" (and
// "defaultPattern" or "pattern" as the same).
type Config struct {
	DefaultPattern string `json:"default_pattern"`
	// Path is the file it came from ("" when there is none).
	Path string `json:"-"`
}

// ReadConfig reads the workspace's .claude/team-themes/config.json. A
// missing file is an empty Config and no error; a file that is not a JSON
// object is an error naming it.
func ReadConfig(workspace string) (Config, error) {
	path := filepath.Join(workspace, filepath.FromSlash(ConfigPath))
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Config{}, nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("team patterns config: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return Config{}, fmt.Errorf("team patterns config %s: %w", path, err)
	}
	c := Config{Path: path}
	for _, k := range []string{"default_pattern", "defaultPattern", "pattern"} {
		v, ok := raw[k]
		if !ok {
			continue
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return Config{}, fmt.Errorf("team patterns config %s: %s: want a pattern name (a string)", path, k)
		}
		if s = strings.TrimSpace(s); s != "" {
			c.DefaultPattern = s
			break
		}
	}
	return c, nil
}

// Choice is a default pattern's name and where it was set.
type Choice struct {
	Name string
	// Source is the file that named it, or "builtin".
	Source string
}

// DefaultChoice picks the default pattern's name: troupe's settings
// (team.defaultPattern) when they name one, else seed 004's config file,
// else DefaultName.
func DefaultChoice(settingsValue, settingsSource string, cfg Config) Choice {
	switch {
	case strings.TrimSpace(settingsValue) != "":
		return Choice{Name: strings.TrimSpace(settingsValue), Source: settingsSource}
	case cfg.DefaultPattern != "":
		return Choice{Name: cfg.DefaultPattern, Source: cfg.Path}
	}
	return Choice{Name: DefaultName, Source: "builtin"}
}
