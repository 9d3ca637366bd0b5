package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/hook"
	"github.com/troupe-dev/troupe/internal/pattern"
	"github.com/troupe-dev/troupe/internal/persona"
	"github.com/troupe-dev/troupe/internal/settings"
)

// loadSettings reads the workspace's settings (and the user's).
func (a *app) loadSettings() (string, *settings.Settings, error) {
	ws, err := a.Workspace()
	if err != nil {
		return "", nil, withCode(ExitError, err)
	}
	s, err := settings.Load(settings.Options{Workspace: ws})
	if err != nil {
		return "", nil, withCode(ExitError, err)
	}
	for _, w := range s.Warnings() {
		fmt.Fprintf(a.stderr, "troupe: warning: %s\n", w)
	}
	return ws, s, nil
}

// hooksCmd is `troupe hooks`: the configured hooks and their files.
func (a *app) hooksCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "hooks",
		Short: "List the configured hooks and where each came from",
		Long: `List the hooks of .troupe/settings.json, .claude/settings.json (Claude Code's
schema), their .local.json variants and the user's settings file, in the
order they are merged.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ws, s, err := a.loadSettings()
			if err != nil {
				return err
			}
			type jsonHook struct {
				Event          string  `json:"event"`
				Matcher        string  `json:"matcher"`
				Type           string  `json:"type"`
				Command        string  `json:"command"`
				TimeoutSeconds float64 `json:"timeout_seconds"`
				Source         string  `json:"source"`
				Scope          string  `json:"scope"`
				Runs           bool    `json:"runs"`
			}
			out := struct {
				Files []string   `json:"files"`
				Hooks []jsonHook `json:"hooks"`
			}{Files: []string{}, Hooks: []jsonHook{}}
			for _, f := range s.Files {
				out.Files = append(out.Files, f.Source.Path)
			}
			for _, h := range s.Hooks {
				t := h.Timeout
				prompt := (h.Type == "prompt" || h.Type == "agent") && strings.TrimSpace(h.Prompt) != ""
				if t <= 0 {
					t = hook.DefaultTimeout
					if prompt {
						t = hook.PromptTimeout
					}
				}
				command := h.Command
				if prompt {
					command = h.Type + ": " + h.Prompt
				}
				out.Hooks = append(out.Hooks, jsonHook{
					Event: h.Event, Matcher: h.Matcher, Type: h.Type, Command: command,
					TimeoutSeconds: t.Seconds(), Source: h.Source.Path, Scope: string(h.Source.Scope),
					Runs: (h.Type == "command" || prompt) && settings.KnownEvent(h.Event),
				})
			}
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			if len(out.Hooks) == 0 {
				fmt.Fprintln(a.stdout, "No hooks configured. Looked in:")
				for _, src := range (settings.Options{Workspace: ws}).Paths() {
					fmt.Fprintf(a.stdout, "  %s\n", src.Path)
				}
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "EVENT\tMATCHER\tTIMEOUT\tCOMMAND\tSOURCE")
			for _, h := range out.Hooks {
				m := h.Matcher
				if m == "" {
					m = "*"
				}
				c := oneLine(h.Command, 60)
				if !h.Runs {
					c += " (not run)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%gs\t%s\t%s\n", h.Event, m, h.TimeoutSeconds, c, rel(ws, h.Source))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// patternsCmd is `troupe patterns`: the team patterns and their files.
func (a *app) patternsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "patterns",
		Short: "List the team patterns (built-in and .troupe/patterns/*.yaml), the default and the persona themes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ws, s, err := a.loadSettings()
			if err != nil {
				return err
			}
			set := pattern.Load(filepath.Join(ws, ".troupe", "patterns"))
			for _, w := range set.Warnings {
				fmt.Fprintf(a.stderr, "troupe: warning: %s\n", w)
			}
			cfg, err := pattern.ReadConfig(ws)
			if err != nil {
				fmt.Fprintf(a.stderr, "troupe: warning: %v\n", err)
			}
			choice := pattern.DefaultChoice(s.DefaultPattern.Value, s.DefaultPattern.Source.Path, cfg)
			def, err := set.Default(choice.Name)
			if err != nil {
				fmt.Fprintf(a.stderr, "troupe: warning: default pattern in %s: %v\n", choice.Source, err)
			}
			defSource := choice.Source
			themes := persona.Load(filepath.Join(ws, filepath.FromSlash(persona.Dir)))
			for _, w := range themes.Warnings {
				fmt.Fprintf(a.stderr, "troupe: warning: %s\n", w)
			}
			if asJSON {
				out := struct {
					Default       string            `json:"default"`
					DefaultSource string            `json:"default_source"`
					Patterns      []pattern.Pattern `json:"patterns"`
					Themes        []persona.Theme   `json:"themes"`
				}{def.Name, defSource, set.All(), themes.All()}
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tALIASES\tLEAD\tSIZE\tROLES\tSOURCE")
			for _, p := range set.All() {
				name := p.Name
				if p.Name == def.Name {
					name += " (default)"
				}
				lead := "works"
				if p.ManageOnly() {
					lead = "manages only"
				}
				var roles []string
				for _, r := range p.Roles {
					roles = append(roles, r.Name)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", name, orDash(strings.Join(p.Aliases, ", ")), lead, p.SizeText(), strings.Join(roles, ", "), rel(ws, p.Source))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if def.Name != "" {
				fmt.Fprintf(a.stdout, "\nDefault pattern: %s (from %s)\n", def.Name, rel(ws, defSource))
			}
			fmt.Fprintln(a.stdout, "\nThemes:")
			for _, th := range themes.All() {
				var chars []string
				for _, c := range th.Characters {
					chars = append(chars, c.Name)
				}
				fmt.Fprintf(a.stdout, "  %s (%s): %s\n", th.Name, rel(ws, th.Source), strings.Join(chars, ", "))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// rel shows a path inside the workspace relative to it.
func rel(ws, path string) string {
	if r, err := filepath.Rel(ws, path); err == nil && filepath.IsAbs(path) && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}
