package cli

import (
	"time"

	"github.com/spf13/cobra"
)

// runTUI is `troupe` with no arguments: the interactive session. (Being
// built: until then it shows the help.)
func (a *app) runTUI(cmd *cobra.Command) error { return cmd.Help() }

// demoTUI plays the demo in the terminal UI; ok is false when the UI cannot
// run here (no terminal), and the caller falls back to the text timeline.
func (a *app) demoTUI(latency time.Duration, mode string) (ok bool, err error) { return false, nil }
