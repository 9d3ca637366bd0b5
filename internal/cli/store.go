package cli

import "github.com/spf13/cobra"

// storeCmds returns the commands that read and write a team's durable state
// (tasks, inbox, send, team). Owned by the store work (issue 3).
func (a *app) storeCmds() []*cobra.Command { return nil }

// benchStoreCmd is `troupe bench store`.
func (a *app) benchStoreCmd() *cobra.Command {
	return &cobra.Command{Use: "store", Short: "Measure the file store (not built yet)"}
}
