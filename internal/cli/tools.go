package cli

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/team"
)

// toolsCmd is `troupe tools`: exactly what a model in each role is offered.
func (a *app) toolsCmd() *cobra.Command {
	var (
		role   string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "List the tools an agent of a role is offered, with their input schemas",
		Long: `Lists the tools offered to a model in the given role, in the order they are
sent: lead (the main agent), teammate, subagent (a general subagent) or
subagent:explore (the read-only kind). --json prints the specs as sent to the
model: name, description and input schema.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			specs, err := team.ToolSpecs(role)
			if err != nil {
				return withCode(ExitUsage, err)
			}
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(specs)
			}
			for _, s := range specs {
				var schema struct {
					Properties map[string]any `json:"properties"`
					Required   []string       `json:"required"`
				}
				_ = json.Unmarshal(s.InputSchema, &schema)
				var params []string
				for name := range schema.Properties {
					params = append(params, name)
				}
				sort.Strings(params)
				for i, p := range params {
					for _, r := range schema.Required {
						if r == p {
							params[i] = p + "*"
						}
					}
				}
				desc, _, _ := strings.Cut(strings.TrimSpace(s.Description), "\n")
				fmt.Fprintf(a.stdout, "%-12s %s\n%-12s (%s)\n", s.Name, oneLine(desc, 100), "", strings.Join(params, ", "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&role, "role", team.RoleLead, "lead, teammate, subagent or subagent:explore")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the specs as JSON")
	return cmd
}
