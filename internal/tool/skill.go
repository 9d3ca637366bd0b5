package tool

import (
	"context"
	_ "embed"
	"encoding/json"
	"strings"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/skill"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

//go:embed skill.md
var skillDescription string

// SkillToolName is the name the Skill tool is offered under.
const SkillToolName = "Skill"

type skillArgs struct {
	Name string `json:"name" required:"true" desc:"The name of the skill to load, as listed under available skills."`
}

type skillTool struct{ set *skill.Set }

var skillSpec = lazySpec[skillArgs](SkillToolName, skillDescription)

// SkillTool returns the Skill tool, which loads the body of one of set's
// skills for the model. A nil set has no skills: every call is an error
// saying so. The agent loop puts set.Prompt() in the system prompt, so that
// the model knows which names exist.
func SkillTool(set *skill.Set) Tool { return skillTool{set: set} }

func (skillTool) Spec() llm.ToolSpec { return skillSpec() }
func (skillTool) ReadOnly() bool     { return true }
func (skillTool) Kind() kind.Kind    { return kind.Read }

func (t skillTool) Run(ctx context.Context, _ *Env, input json.RawMessage) Result {
	if err := ctx.Err(); err != nil {
		return Errorf("Skill was not run: %v", err)
	}
	args, res, ok := decodeArgs[skillArgs](SkillToolName, input)
	if !ok {
		return res
	}
	if strings.TrimSpace(args.Name) == "" {
		return Errorf(`invalid arguments for Skill: "name" is empty; %s`, skillsAvailable(t.set))
	}
	body, err := t.set.Load(args.Name)
	if err != nil {
		return Errorf("%v", err)
	}
	return OK(body)
}

func skillsAvailable(set *skill.Set) string {
	if set.Len() == 0 {
		return "no skills are installed"
	}
	return "the skills available are: " + strings.Join(set.Names(), ", ")
}
