package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
)

// mergeCmd is `troupe merge TEAM`: the merge queue of the team's
// teammates in worktrees, oldest first.
func (a *app) mergeCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "merge TEAM",
		Short: "Show a team's merge queue: each completed task's branch, merged (fast-forward or merge commit) or conflicted",
		Args:  a.teamArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, t, err := a.openTeam(args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			board, err := t.Tasks().Board(cmd.Context())
			if err != nil {
				return withCode(ExitError, err)
			}
			q := team.MergeQueue(board)
			if asJSON {
				if q == nil {
					q = []team.MergeRecord{}
				}
				return writeJSON(a.stdout, q)
			}
			fmt.Fprintln(a.stdout, team.FormatMergeQueue(q))
			printLeases(a.stdout, board)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printLeases lists the file leases in-progress tasks hold, if any.
func printLeases(w io.Writer, b store.Board) {
	ls := team.Leases(b)
	if len(ls) == 0 {
		return
	}
	fmt.Fprintln(w, "Leases:")
	for _, t := range ls {
		inferred := ""
		if team.FilesInferred(t) {
			inferred = " (inferred from its edits)"
		}
		fmt.Fprintf(w, "  #%s %s: %s%s\n", t.ID, t.Owner, strings.Join(team.TaskFiles(t), ", "), inferred)
	}
}
