package agent

import (
	"fmt"
	"strings"
)

// Identity says who an agent is. Its line is the one the fake API (and a
// human reading a transcript) uses to tell agents apart: "You are 'NAME'".
type Identity struct {
	Name string // "team-lead", "alice"
	Role string // "backend developer"; empty for the lead
	Team string // empty for a lone agent
	Lead bool
}

// Line is the identity sentence that opens the system prompt and is put back
// after compaction.
func (id Identity) Line() string {
	switch {
	case id.Team == "":
		return fmt.Sprintf("You are '%s', a coding agent run by troupe.", id.Name)
	case id.Lead:
		return fmt.Sprintf("You are '%s', the lead of team '%s'.", id.Name, id.Team)
	case id.Role != "":
		return fmt.Sprintf("You are teammate '%s' (%s) in team '%s'.", id.Name, id.Role, id.Team)
	default:
		return fmt.Sprintf("You are teammate '%s' in team '%s'.", id.Name, id.Team)
	}
}

// SplitSystem cuts a system prompt that opens with the identity line (as
// Prompt.String renders it) into the part agents of one kind share and the
// line itself, which is sent last (llm.Request.SystemTail) so that the
// shared part stays one cacheable prefix. A prompt that does not open with
// identity (replaced by the user, say) is all shared.
func SplitSystem(system, identity string) (shared, tail string) {
	if identity == "" {
		return system, ""
	}
	rest, ok := strings.CutPrefix(system, identity+"\n\n")
	if !ok || strings.TrimSpace(rest) == "" {
		return system, ""
	}
	return rest, identity
}

// Prompt gathers the parts of a system prompt. The order of the parts is
// fixed and none of them holds a clock or a counter, so the prompt is
// byte-identical from one turn to the next and the provider's cache hits.
type Prompt struct {
	Identity  Identity
	Workspace string
	// Instructions are the role's own instructions (a teammate's spawn
	// prompt, a subagent's task framing).
	Instructions string
	// Sections are appended in order (project memory, skills, …).
	Sections []string
}

// String renders the system prompt.
func (p Prompt) String() string {
	var b strings.Builder
	b.WriteString(p.Identity.Line())
	b.WriteString("\n\n")
	if p.Workspace != "" {
		fmt.Fprintf(&b, "You work in the workspace %s. Paths given to file tools are relative to it; nothing outside it can be read or written.\n\n", p.Workspace)
	}
	b.WriteString(guidelines)
	if s := strings.TrimSpace(p.Instructions); s != "" {
		b.WriteString("\n\n")
		b.WriteString(s)
	}
	for _, s := range p.Sections {
		if s = strings.TrimSpace(s); s != "" {
			b.WriteString("\n\n")
			b.WriteString(s)
		}
	}
	b.WriteString("\n")
	return b.String()
}

const guidelines = `How to work:
- Use the tools to inspect and change the workspace; do not guess file contents, read them.
- Prefer edit_file for small changes to existing files and write_file for new files.
- Keep going until the task is done, then end your turn with a short summary of what you did.
- A tool result marked as an error tells you what went wrong; fix the call rather than repeating it.`
