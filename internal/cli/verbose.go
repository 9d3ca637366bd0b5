package cli

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// verboseEvent is a journal event as one line of `-v` text output: who
// (always named), then what happened in words, or for the rarer kinds the
// kind and its fields as key=value.
func verboseEvent(e store.Event) string {
	who := e.Agent
	if who == "" {
		who = "troupe"
	}
	env, err := teamevent.Decode(e)
	if err != nil {
		return fmt.Sprintf("· %s %s %s", who, e.Type, fieldsText(e.Fields))
	}
	var what string
	switch ev := env.Event.(type) {
	case teamevent.TeamCreate:
		what = "creates team " + e.Team
	case teamevent.TeamDelete:
		what = "deletes team " + e.Team
	case teamevent.Spawn:
		var parts []string
		for _, p := range [][2]string{{"role ", ev.Role}, {"model ", ev.Model}, {"", ev.Mode}} {
			if p[1] != "" {
				parts = append(parts, p[0]+p[1])
			}
		}
		if ev.PlanModeRequired {
			parts = append(parts, "plan mode")
		}
		what = "spawns " + ev.Member
		if len(parts) > 0 {
			what += " (" + strings.Join(parts, ", ") + ")"
		}
	case teamevent.Stopped:
		what = subject(who, ev.Member) + "stops"
		if ev.Why != "" {
			what += ": " + oneLine(ev.Why, 80)
		}
	case teamevent.Status:
		what = subject(who, ev.Member) + "is " + ev.Status
		if ev.Why != "" {
			what += ": " + oneLine(ev.Why, 80)
		}
	case teamevent.TaskCreate:
		what = fmt.Sprintf("adds task #%s: %s", ev.Task, oneLine(ev.Subject, 80))
	case teamevent.TaskUpdate:
		what = fmt.Sprintf("updates task #%s (status %s, owner %s)", ev.Task, orDash(ev.Status), orDash(ev.Owner))
	case teamevent.TaskComplete:
		what = fmt.Sprintf("completes task #%s", ev.Task)
	case teamevent.Claim:
		what = fmt.Sprintf("claims task #%s: %s", ev.Task, oneLine(ev.Subject, 80))
	case teamevent.Send:
		what = fmt.Sprintf("→ %s [%s] %s", ev.To, ev.MsgType, oneLine(cmpOr(ev.Summary, ev.Content), 100))
	case teamevent.Deliver:
		what = fmt.Sprintf("reads %d message(s) (%s)", len(ev.IDs), ev.At)
	case teamevent.Usage:
		what = fmt.Sprintf("model call: %s, %d in, %d out, %d cache read, %d cache write tokens",
			orDash(ev.Model), ev.InputTokens, ev.OutputTokens, ev.CacheReadTokens, ev.CacheWriteTokens)
	case teamevent.Tool:
		switch {
		case ev.Error != "":
			what = fmt.Sprintf("%s failed: %s", ev.Tool, oneLine(ev.Error, 100))
		case ev.Command != "":
			what = fmt.Sprintf("runs %s: %s", ev.Tool, oneLine(ev.Command, 100))
		default:
			what = fmt.Sprintf("runs %s on %s", ev.Tool, ev.Path)
		}
	default:
		what = e.Type + " " + fieldsText(e.Fields)
	}
	return fmt.Sprintf("· %s %s", who, strings.TrimSpace(what))
}

// fieldsText writes an event's own fields as sorted key=value pairs, values
// as JSON when they are not plain strings.
func fieldsText(fields map[string]any) string {
	var keys []string
	for k := range fields {
		switch k {
		case "type", "ts", "agent", "team":
		default:
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		v, ok := fields[k].(string)
		if !ok {
			data, _ := json.Marshal(fields[k])
			v = string(data)
		}
		fmt.Fprintf(&b, " %s=%s", k, v)
	}
	return oneLine(strings.TrimSpace(b.String()), 160)
}

// subject is "" when an event's member is its own writer, else the member
// and a space: "alice is idle" rather than "alice alice is idle".
func subject(who, member string) string {
	if member == "" || member == who {
		return ""
	}
	return member + " "
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// agentOr names the agent of an event; a lone agent's events may carry none.
func agentOr(name string) string {
	if name == "" {
		return store.LeadName
	}
	return name
}
