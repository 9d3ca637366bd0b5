package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/shell"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/tool/kind"
)

// Prefix starts every MCP tool's name, as in Claude Code: permission rules,
// hooks and matchers see mcp__<server>__<tool>, and mcp__<server> names
// all of a server's tools.
const Prefix = "mcp__"

// maxNameLen is the longest tool name offered: Claude Code leaves out a
// tool whose full name is longer.
const maxNameLen = 128

// Kind is the tool kind of every MCP tool: troupe cannot know what a
// server's tool does, so it asks in default mode unless a rule allows it.
const Kind = kind.Network

// ToolName returns the name a server's tool is offered under: both parts
// sanitised to the API's charset [a-zA-Z0-9_-] (anything else becomes _).
// A name longer than maxNameLen is not offered (Tools reports it).
func ToolName(server, name string) string {
	return Prefix + sanitize(server) + "__" + sanitize(name)
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		ok := c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !ok {
			b[i] = '_'
		}
	}
	return string(b)
}

// Tool is one server tool as a troupe tool.
type Tool struct {
	m      *Manager
	server string
	remote string // the server's own name for it
	spec   llm.ToolSpec
	ro     bool
}

// Spec implements tool.Tool.
func (t *Tool) Spec() llm.ToolSpec { return t.spec }

// ReadOnly implements tool.Tool: true only when the server says so
// (readOnlyHint), so that plan mode may allow it.
func (t *Tool) ReadOnly() bool { return t.ro }

// Kind is the tool's permission kind (network/unknown).
func (t *Tool) Kind() kind.Kind { return Kind }

// Server is the name of the tool's server.
func (t *Tool) Server() string { return t.server }

// Run implements tool.Tool: the call goes to the server through the
// manager; a crash, a timeout or a start failure is an error result.
func (t *Tool) Run(ctx context.Context, _ *tool.Env, input json.RawMessage) tool.Result {
	res, err := t.m.Call(ctx, t.server, t.remote, input)
	if err != nil {
		return tool.Errorf("%s: %v", t.spec.Name, err)
	}
	return ConvertResult(res)
}

// Image is an image a tool returned.
type Image struct {
	MIMEType string `json:"mimeType"`
	// Data is the image's bytes (decoded).
	Data []byte `json:"data"`
}

// Response is what hooks see of an MCP call (tool_response), and what a
// caller that can send image blocks finds the images in.
type Response struct {
	Content           string  `json:"content"`
	Images            []Image `json:"images,omitempty"`
	StructuredContent any     `json:"structuredContent,omitempty"`
	IsError           bool    `json:"isError,omitempty"`
}

// ConvertResult turns a server's result into what the model sees: text as
// text, an embedded resource as its text under its URI, an image as a
// note in the text and, when the model can take it, an image in
// Result.Images (a provider that cannot show images sends the note
// alone); the text is cut to tool.OutputCap with a note as bash output
// is. Hooks see the images' bytes in Response.Images.
func ConvertResult(res *sdk.CallToolResult) tool.Result {
	out := shell.NewBuffer(tool.OutputCap)
	resp := Response{IsError: res.IsError}
	var images []llm.Image
	sep := func() {
		if out.Len() > 0 {
			out.Write([]byte("\n"))
		}
	}
	for _, c := range res.Content {
		sep()
		switch c := c.(type) {
		case *sdk.TextContent:
			out.Write([]byte(c.Text))
		case *sdk.ImageContent:
			resp.Images = append(resp.Images, Image{MIMEType: c.MIMEType, Data: c.Data})
			fmt.Fprintf(out, "[image %d: %s, %d bytes", len(resp.Images), c.MIMEType, len(c.Data))
			switch {
			case !imageTypes[c.MIMEType]:
				out.Write([]byte(", not shown: the model takes only JPEG, PNG, GIF and WebP]"))
			case len(c.Data) > MaxImageBytes:
				fmt.Fprintf(out, ", not shown: larger than %d bytes]", MaxImageBytes)
			default:
				out.Write([]byte("]"))
				images = append(images, llm.Image{MediaType: c.MIMEType, Data: base64.StdEncoding.EncodeToString(c.Data)})
			}
		case *sdk.AudioContent:
			fmt.Fprintf(out, "[audio: %s, %d bytes, not shown]", c.MIMEType, len(c.Data))
		case *sdk.EmbeddedResource:
			r := c.Resource
			if r == nil {
				out.Write([]byte("[resource: empty]"))
				continue
			}
			if r.Text != "" || len(r.Blob) == 0 {
				fmt.Fprintf(out, "[resource %s]\n%s", r.URI, r.Text)
			} else {
				fmt.Fprintf(out, "[resource %s: %s, %d bytes of binary data, not shown]", r.URI, r.MIMEType, len(r.Blob))
			}
		case *sdk.ResourceLink:
			fmt.Fprintf(out, "[resource link %s", c.URI)
			if c.Name != "" {
				fmt.Fprintf(out, " (%s)", c.Name)
			}
			out.Write([]byte("]"))
		default:
			b, _ := json.Marshal(c)
			out.Write(b)
		}
	}
	if len(res.Content) == 0 && res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		out.Write(b)
	}
	resp.StructuredContent = res.StructuredContent
	text := out.String()
	if out.Truncated() {
		text += fmt.Sprintf("\n[output truncated: %d bytes in all, %d kept]", out.Len(), tool.OutputCap)
	}
	if text == "" && !res.IsError {
		text = "(no output)"
	}
	resp.Content = text
	return tool.Result{Content: text, IsError: res.IsError, Response: resp, Images: images}
}

// MaxImageBytes is the largest image passed to the model: the Messages API
// refuses an image over 5 MB, which its base64 form of this many bytes
// stays under.
const MaxImageBytes = 3_750_000

// imageTypes are the image types the model APIs take.
var imageTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}

// Problem is a tool or server that is not offered, and why.
type Problem struct {
	Server string
	Tool   string // empty for the whole server
	Err    error
}

func (p Problem) Error() string {
	if p.Tool == "" {
		return fmt.Sprintf("MCP server %s: %v", p.Server, p.Err)
	}
	return fmt.Sprintf("MCP server %s: tool %q: %v", p.Server, p.Tool, p.Err)
}

// Tools starts the servers allow admits (all when allow is nil) unless
// they run, and returns their tools, in server then tool order, ready for
// an agent's registry. A server that cannot start, a tool whose schema the
// API would refuse, and a name taken already are problems, reported and
// left out; the rest is offered. Of two tools whose offered names are the
// same, the one of the server first by name (then first in its server's
// list) keeps it.
func (m *Manager) Tools(ctx context.Context, allow []string) ([]tool.Tool, []Problem) {
	for _, s := range m.allowed(allow) {
		c, _ := m.conn(s)
		if list, ok := m.cached(c.srv); ok {
			c.mu.Lock()
			if c.state == StateIdle && c.tools == nil {
				c.tools = list // offered now, started at the first call
			}
			c.mu.Unlock()
			continue
		}
		_, _ = m.ListTools(ctx, s) // a failure is reported by Offered
	}
	return m.Offered(allow)
}

func (m *Manager) allowed(allow []string) []string {
	names := make([]string, 0, len(m.servers))
	for _, c := range m.servers {
		if allow == nil || slices.Contains(allow, c.srv.Name) {
			names = append(names, c.srv.Name)
		}
	}
	sort.Strings(names)
	return names
}

// Offered is Tools without starting anything: the tools of the servers
// allow admits that run now; the others are problems with their state.
func (m *Manager) Offered(allow []string) ([]tool.Tool, []Problem) {
	var out []tool.Tool
	var probs []Problem
	taken := map[string]string{} // offered name -> whose
	for _, s := range m.allowed(allow) {
		c, _ := m.conn(s)
		c.mu.Lock()
		list, state, err := c.tools, c.state, c.err
		c.mu.Unlock()
		if state != StateConnected && !(state == StateIdle && list != nil) {
			if err == nil {
				err = fmt.Errorf("%s", state)
			}
			probs = append(probs, Problem{Server: s, Err: err})
			continue
		}
		for _, rt := range list {
			schema, err := CheckSchema(rt.InputSchema)
			if err != nil {
				probs = append(probs, Problem{Server: s, Tool: rt.Name, Err: err})
				continue
			}
			name := ToolName(s, rt.Name)
			if len(name) > maxNameLen {
				probs = append(probs, Problem{Server: s, Tool: rt.Name, Err: fmt.Errorf("its name %s is longer than %d characters", name, maxNameLen)})
				continue
			}
			if prev, ok := taken[name]; ok {
				probs = append(probs, Problem{Server: s, Tool: rt.Name,
					Err: fmt.Errorf("its name %s is taken by %s; that one is offered, this one is not", name, prev)})
				continue
			}
			taken[name] = fmt.Sprintf("tool %q of server %s", rt.Name, s)
			ro := rt.Annotations != nil && rt.Annotations.ReadOnlyHint
			desc := rt.Description
			if desc == "" {
				desc = rt.Title
			}
			out = append(out, &Tool{m: m, server: s, remote: rt.Name, ro: ro,
				spec: llm.ToolSpec{Name: name, Description: desc, InputSchema: schema}})
		}
	}
	return out, probs
}

// CheckSchema returns a tool's input schema as the model will be sent it,
// or why it cannot be: it must be a JSON object of type "object", and
// every $ref must point inside it without a loop.
func CheckSchema(schema any) (json.RawMessage, error) {
	var raw []byte
	switch s := schema.(type) {
	case nil:
		return nil, fmt.Errorf("%w: none given", ErrSchema)
	case json.RawMessage:
		raw = s
	case []byte:
		raw = s
	default:
		b, err := json.Marshal(s)
		if err != nil {
			return nil, fmt.Errorf("%w: not JSON: %v", ErrSchema, err)
		}
		raw = b
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%w: not JSON: %v", ErrSchema, err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: not a JSON object", ErrSchema)
	}
	if obj["type"] != "object" {
		return nil, fmt.Errorf("%w: type is %v, the API takes only \"object\"", ErrSchema, jsonText(obj["type"]))
	}
	if err := checkRefs(doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSchema, err)
	}
	return raw, nil
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// checkRefs follows every $ref of root: each must be a local JSON pointer
// ("#/...") that resolves, and no chain of them may come back to where it
// started (a recursive schema, which the API refuses).
func checkRefs(root any) error {
	edges := map[string][]string{} // pointer of a subschema -> refs inside it
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			if r, ok := v["$ref"].(string); ok {
				edges[at] = append(edges[at], r)
			}
			for k, c := range v {
				walk(c, at+"/"+escapePointer(k))
			}
		case []any:
			for i, c := range v {
				walk(c, fmt.Sprintf("%s/%d", at, i))
			}
		}
	}
	walk(root, "#")
	for from, refs := range edges {
		for _, r := range refs {
			if !strings.HasPrefix(r, "#") {
				return fmt.Errorf("$ref %q at %s points outside the schema", r, from)
			}
			if _, ok := resolvePointer(root, r); !ok {
				return fmt.Errorf("$ref %q at %s does not resolve", r, from)
			}
		}
	}
	// A loop: following the refs found inside a referenced subschema
	// comes back to a subschema still being followed.
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var visit func(p string, path []string) error
	visit = func(p string, path []string) error {
		switch color[p] {
		case grey:
			return fmt.Errorf("$ref loop: %s", strings.Join(append(path, p), " -> "))
		case black:
			return nil
		}
		color[p] = grey
		// The refs reachable from p are those of p itself and of every
		// subschema inside it.
		for from, refs := range edges {
			if from != p && !strings.HasPrefix(from, p+"/") {
				continue
			}
			for _, r := range refs {
				target := strings.TrimSuffix(r, "/")
				if target == "" {
					target = "#"
				}
				if err := visit(target, append(path, p)); err != nil {
					return err
				}
			}
		}
		color[p] = black
		return nil
	}
	roots := make([]string, 0, len(edges))
	for from := range edges {
		roots = append(roots, from)
	}
	sort.Strings(roots)
	for _, from := range roots {
		for _, r := range edges[from] {
			if err := visit(strings.TrimSuffix(r, "/"), nil); err != nil {
				return err
			}
		}
	}
	return nil
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func resolvePointer(root any, ref string) (any, bool) {
	p := strings.TrimPrefix(ref, "#")
	if p == "" {
		return root, true
	}
	if !strings.HasPrefix(p, "/") {
		return nil, false
	}
	cur := root
	for _, part := range strings.Split(p[1:], "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[part]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			var i int
			if _, err := fmt.Sscanf(part, "%d", &i); err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// IsMCPTool reports whether name is an MCP tool's, and of which server.
func IsMCPTool(name string) (server string, ok bool) {
	rest, ok := strings.CutPrefix(name, Prefix)
	if !ok {
		return "", false
	}
	s, _, _ := strings.Cut(rest, "__")
	return s, s != ""
}

var _ tool.Tool = (*Tool)(nil)

// AddTo puts the tools of the servers allow admits (nil: all) into reg,
// starting the servers that do not run yet, and returns what was left out
// and why. It is the one call that gives an agent its MCP tools.
func (m *Manager) AddTo(ctx context.Context, reg *tool.Registry, allow []string) []Problem {
	tools, probs := m.Tools(ctx, allow)
	for _, t := range tools {
		reg.Add(t)
	}
	return probs
}
