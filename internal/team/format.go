package team

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"sort"
	"strings"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
)

// formatMessage renders an inbox message as the model sees it (DESIGN §4):
// <teammate-message from="alice" type="message" summary="…">text</teammate-message>.
func formatMessage(m store.Message) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<teammate-message from=%q type=%q", m.From, m.Type)
	attr := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, " %s=\"%s\"", k, html.EscapeString(v))
		}
	}
	attr("summary", m.Summary)
	attr("request_id", m.RequestID)
	attr("task_id", m.TaskID)
	if m.Approve != nil {
		attr("approve", fmt.Sprint(*m.Approve))
	}
	b.WriteString(">")
	content := m.Content
	if m.Feedback != "" {
		content = strings.TrimSpace(content + "\nFeedback: " + m.Feedback)
	}
	if m.Reason != "" {
		content = strings.TrimSpace(content + "\nReason: " + m.Reason)
	}
	b.WriteString(content)
	b.WriteString("</teammate-message>")
	return b.String()
}

// foldIdle keeps only the latest idle notification of each member and
// renders them as one line, so a lead that was busy does not pay for every
// idle-working-idle flap of its teammates.
func foldIdle(notes []store.Message) string {
	latest := map[string]store.Message{}
	for _, n := range notes {
		latest[n.From] = n
	}
	names := make([]string, 0, len(latest))
	for n := range latest {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		s := latest[n].Summary
		if s == "" {
			s = "idle"
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", n, s))
	}
	return fmt.Sprintf("<idle-notifications>Now idle: %s</idle-notifications>", strings.Join(parts, "; "))
}

// messageBlocks renders messages for delivery: idle notifications folded
// into one block after the others.
func messageBlocks(msgs []store.Message) []llm.Block {
	var blocks []llm.Block
	var idle []store.Message
	for _, m := range msgs {
		if m.Type == store.TypeIdleNotification {
			idle = append(idle, m)
			continue
		}
		blocks = append(blocks, llm.TextBlock(formatMessage(m)))
	}
	if len(idle) > 0 {
		blocks = append(blocks, llm.TextBlock(foldIdle(idle)))
	}
	return blocks
}

// taskText renders a task for a member that claimed or was given it.
func taskText(t store.Task, how string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<task id=%q status=%q>%s task #%s: %s", t.ID, t.Status, how, t.ID, t.Subject)
	if d := strings.TrimSpace(t.Description); d != "" {
		b.WriteString("\n\n")
		b.WriteString(d)
	}
	b.WriteString("\n\nWhen it is done, mark it completed with TaskUpdate.</task>")
	return b.String()
}

// compactJSON is a tool input as one compact line: the same text whatever
// spacing the model's stream used, so a replayed run shows the same.
func compactJSON(raw []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
