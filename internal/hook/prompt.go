package hook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/settings"
)

// Asker asks a model one question and returns the text of its answer:
// what a prompt hook needs. model "" is the asker's default.
type Asker func(ctx context.Context, model, prompt string) (string, error)

// PromptTimeout is a prompt hook's timeout when its settings give none
// (as in Claude Code).
const PromptTimeout = 30 * time.Second

// promptSystem tells the model how a prompt hook must answer: Claude
// Code's response shape.
const promptSystem = `You evaluate a hook event of a coding agent and decide whether it may go on.
Answer with one JSON object and nothing else: {"ok": true} to let it go on, or
{"ok": false, "reason": "why, addressed to the agent"} to stop it.`

// ProviderAsker is an Asker over a model provider: one request, no tools.
func ProviderAsker(p llm.Provider, model string) Asker {
	return func(ctx context.Context, m, prompt string) (string, error) {
		if m == "" {
			m = model
		}
		req := llm.Request{Model: m, System: promptSystem, MaxTokens: 1024, Agent: "hook",
			Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(prompt)}}}}
		resp, err := llm.Collect(p.Stream(ctx, &req), nil)
		if err != nil {
			return "", err
		}
		return resp.Message.Text(), nil
	}
}

// SetAsker gives the runner the model its prompt hooks ask (the CLI sets
// the lead's once it has a provider). Until then they are reported and
// not run.
func (r *Runner) SetAsker(a Asker) {
	if r != nil {
		r.asker.Store(&a)
	}
}

func (r *Runner) getAsker() Asker {
	if a := r.asker.Load(); a != nil {
		return *a
	}
	return r.cfg.Ask
}

// askHook runs a prompt hook, or an agent hook (a read-only subagent that
// may look at the workspace before it answers): the event (in place of
// $ARGUMENTS, else after the prompt) goes to the model, whose
// {"ok": false, "reason"} blocks as "decision": "block" would.
func (r *Runner) askHook(ctx context.Context, h settings.Hook, stdin []byte) Result {
	res := Result{Hook: h, ExitCode: -1}
	ask, timeout := r.getAsker(), PromptTimeout
	if h.Type == "agent" {
		ask, timeout = r.agentAsker(), AgentTimeout
	}
	if ask == nil {
		res.Err = fmt.Errorf("%s is a %s hook and no model is set to answer it; it did not run", describe(h), h.Type)
		return res
	}
	if h.Timeout > 0 {
		timeout = h.Timeout
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	prompt := h.Prompt
	if strings.Contains(prompt, "$ARGUMENTS") {
		prompt = strings.ReplaceAll(prompt, "$ARGUMENTS", string(stdin))
	} else {
		prompt += "\n\n" + string(stdin)
	}
	start := r.cfg.Now()
	text, err := ask(tctx, h.Model, prompt)
	res.Duration = r.cfg.Now().Sub(start)
	switch {
	case err != nil && ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded):
		res.TimedOut = true
		res.Err = fmt.Errorf("%s timed out after %v", describe(h), timeout)
		return res
	case err != nil:
		res.Err = fmt.Errorf("%s: the model could not answer: %w", describe(h), err)
		return res
	}
	v, ok := okAnswer(text)
	if !ok {
		res.Err = fmt.Errorf("%s: the model answered %q, not {\"ok\": …}; ignored", describe(h), firstLine(text, 200))
		return res
	}
	res.ExitCode = 0
	if !v.ok {
		out, _ := json.Marshal(map[string]string{"decision": "block", "reason": nonEmpty(v.reason, describe(h)+" said no")})
		res.Stdout = string(out)
	}
	return res
}

type answer struct {
	ok     bool
	reason string
}

// okAnswer finds the model's {"ok": …, "reason": …} in its text: the last
// JSON object in it that has "ok" (an agent hook's subagent may write what
// it found before it).
func okAnswer(text string) (answer, bool) {
	var found answer
	ok := false
	for i := strings.IndexByte(text, '{'); i >= 0; {
		var v struct {
			OK     *bool  `json:"ok"`
			Reason string `json:"reason"`
		}
		if json.NewDecoder(strings.NewReader(text[i:])).Decode(&v) == nil && v.OK != nil {
			found, ok = answer{ok: *v.OK, reason: v.Reason}, true
		}
		j := strings.IndexByte(text[i+1:], '{')
		if j < 0 {
			break
		}
		i += j + 1
	}
	return found, ok
}
