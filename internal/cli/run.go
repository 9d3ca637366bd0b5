package cli

import "github.com/spf13/cobra"

func (a *app) addRunFlags(root *cobra.Command) {}

func (a *app) benchTurnCmd() *cobra.Command {
	return &cobra.Command{Use: "turn", Short: "Measure the harness overhead per model turn"}
}
