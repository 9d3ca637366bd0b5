package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// versionText is what `troupe --version` prints: the module version, the
// commit it was built from (and whether the tree had changes), and the Go
// toolchain. A binary built without module or VCS data says "unknown".
func versionText() string {
	version, commit, modified := "unknown", "unknown", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if modified {
		commit += " (modified)"
	}
	return fmt.Sprintf("troupe %s\ncommit %s\n%s %s/%s\n", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
