package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/team"
)

// claudeFlags are the flags of Claude Code's command line that a run
// (headless or in the terminal UI) takes the same way.
type claudeFlags struct {
	allowed, allowedKebab       []string // --allowedTools, --allowed-tools
	disallowed, disallowedKebab []string // --disallowedTools, --disallowed-tools
	systemPrompt                string
	appendSystemPrompt          string
	addDirs                     []string
	mcpConfig                   []string
	mcpStartup                  string
	skipPermissions             bool
}

func (f *claudeFlags) add(fs *pflag.FlagSet) {
	const allowHelp = "permission rules to allow without asking, as in settings (\"Bash(git log:*)\", Read); repeat the flag or separate rules with commas or spaces"
	const denyHelp = "permission rules to deny, as in settings (\"Bash(rm:*)\", Edit); repeat the flag or separate rules with commas or spaces"
	fs.StringArrayVar(&f.allowed, "allowedTools", nil, allowHelp)
	fs.StringArrayVar(&f.allowedKebab, "allowed-tools", nil, allowHelp)
	fs.StringArrayVar(&f.disallowed, "disallowedTools", nil, denyHelp)
	fs.StringArrayVar(&f.disallowedKebab, "disallowed-tools", nil, denyHelp)
	fs.StringVar(&f.systemPrompt, "system-prompt", "", "replace the lead's whole system prompt with this text")
	fs.StringVar(&f.appendSystemPrompt, "append-system-prompt", "", "add this text at the end of the lead's system prompt")
	fs.StringArrayVar(&f.addDirs, "add-dir", nil, "another directory the agents' file tools may reach (by absolute path), under the same permission rules as the workspace; repeat for more")
	fs.StringArrayVar(&f.mcpConfig, "mcp-config", nil, "read MCP servers from this JSON file or string too (Claude Code's {\"mcpServers\": …}), beside .mcp.json and the settings' mcpServers; repeat for more")
	fs.StringVar(&f.mcpStartup, "mcp-startup", "session", "when MCP servers start: session (with the session) or lazy (at their first call, offering the tools they listed in an earlier session)")
	fs.BoolVar(&f.skipPermissions, "dangerously-skip-permissions", false, "run every agent in bypassPermissions mode: nothing asks (deny rules still refuse); same as --permission-mode bypassPermissions")
}

// resolveMode folds --dangerously-skip-permissions into the permission
// mode flag and checks the mode: an unknown mode stops the run, it never
// falls back to another.
func (f *claudeFlags) resolveMode(tf *teamFlags) error {
	if f.skipPermissions {
		if tf.permissionMode != "" && tf.permissionMode != team.PermBypass {
			return withCode(ExitUsage, fmt.Errorf("--dangerously-skip-permissions and --permission-mode %s contradict each other", tf.permissionMode))
		}
		tf.permissionMode = team.PermBypass
	}
	if tf.permissionMode == "" {
		return nil
	}
	if _, err := permission.ParseMode(tf.permissionMode); err != nil {
		return withCode(ExitUsage, fmt.Errorf("--permission-mode: %w", err))
	}
	return nil
}

// checkMode refuses a session whose mode, from whichever source, is
// unknown.
func checkMode(mode string) error {
	if _, err := permission.ParseMode(mode); err != nil || mode == "" {
		if err == nil {
			err = errors.New("empty permission mode")
		}
		return withCode(ExitUsage, err)
	}
	return nil
}

// splitRules splits rule lists given on the command line: each value may
// hold several rules separated by commas or spaces, outside parentheses
// ("Bash(git log:*),Read" is two rules; "Bash(npm run test:*)" one).
func splitRules(values ...[]string) []string {
	var out []string
	for _, vs := range values {
		for _, v := range vs {
			depth, start := 0, 0
			flush := func(end int) {
				if r := strings.TrimSpace(v[start:end]); r != "" {
					out = append(out, r)
				}
				start = end + 1
			}
			for i, c := range v {
				switch {
				case c == '(':
					depth++
				case c == ')' && depth > 0:
					depth--
				case (c == ',' || c == ' ') && depth == 0:
					flush(i)
				}
			}
			flush(len(v))
		}
	}
	return out
}

// applyFlagRules adds the rules of --allowedTools and --disallowedTools to
// the settings' allow and deny lists (source "flag") and rebuilds the
// policy from them. A malformed rule is a usage error.
func applyFlagRules(e *env, allow, deny []string) error {
	if err := e.AddFlagRules(allow, deny); err != nil {
		return withCode(ExitUsage, err)
	}
	return nil
}

// checkDirs makes --add-dir and --settings paths absolute and checks that
// they exist, as Claude Code does.
func checkPaths(paths []string, dir bool, flag string) ([]string, error) {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, withCode(ExitUsage, fmt.Errorf("%s %s: %w", flag, p, err))
		}
		st, err := os.Stat(abs)
		switch {
		case err != nil:
			return nil, withCode(ExitUsage, fmt.Errorf("%s %s: %w", flag, p, err))
		case dir && !st.IsDir():
			return nil, withCode(ExitUsage, fmt.Errorf("%s %s: not a directory", flag, p))
		case !dir && st.IsDir():
			return nil, withCode(ExitUsage, fmt.Errorf("%s %s: a directory, not a settings file", flag, p))
		}
		out = append(out, abs)
	}
	return out, nil
}

// apply puts the flags into a session's configuration: rules, prompts,
// and what process-mode teammates must be told too.
func (f *claudeFlags) apply(e *env, cfg *team.Config) error {
	allow, deny := splitRules(f.allowed, f.allowedKebab), splitRules(f.disallowed, f.disallowedKebab)
	if err := applyFlagRules(e, allow, deny); err != nil {
		return err
	}
	cfg.SystemPrompt, cfg.AppendSystemPrompt = f.systemPrompt, f.appendSystemPrompt
	if cfg.TeammateMode == team.ModeProcess {
		for _, r := range allow {
			cfg.AgentCommand = append(cfg.AgentCommand, "--allowedTools", r)
		}
		for _, r := range deny {
			cfg.AgentCommand = append(cfg.AgentCommand, "--disallowedTools", r)
		}
		for _, s := range e.ExtraSettings {
			cfg.AgentCommand = append(cfg.AgentCommand, "--settings", s)
		}
		for _, d := range f.addDirs {
			cfg.AgentCommand = append(cfg.AgentCommand, "--add-dir", d)
		}
		cfg.AgentCommand = append(cfg.AgentCommand, e.MCPConfigArgs()...)
	}
	n := len(e.Sections)
	if err := e.AddDirs(f.addDirs); err != nil {
		return appError(err)
	}
	cfg.Sections = append(cfg.Sections, e.Sections[n:]...)
	return checkMode(cfg.PermissionMode)
}
