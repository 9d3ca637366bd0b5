package cli

import "github.com/spf13/cobra"

// fakeAPICmd is `troupe fake-api`.
func (a *app) fakeAPICmd() *cobra.Command {
	return &cobra.Command{Use: "fake-api", Short: "Serve the scripted fake Anthropic API (not built yet)"}
}
