package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/troupe-dev/troupe/internal/racetest"
	"os"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// helperEnv makes the test binary an MCP server over stdio instead of
// running tests: its value names the server's behaviour.
const helperEnv = "TROUPE_TEST_MCP_SERVER"

func TestMain(m *testing.M) {
	racetest.QuickExit()
	if kind := os.Getenv(helperEnv); kind != "" {
		os.Exit(serveHelper(kind))
	}
	goleak.VerifyTestMain(m)
}

func serveHelper(kind string) int {
	if kind == "garbage" {
		// Not a protocol: what a misconfigured command prints.
		fmt.Println("Usage: frobnicate [options]")
		fmt.Println("{not json at all")
		for range 100 {
			fmt.Println("garbage garbage garbage")
		}
		return 2
	}
	if err := testServer(kind).Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "helper server:", err)
		return 1
	}
	return 0
}

// helperServer returns the config entry of a stdio server that is this
// test binary behaving as kind.
func helperServer(t testing.TB, name, kind string) Server {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Server{Name: name, Type: TypeStdio, Command: exe, Env: map[string]string{helperEnv: kind, "GREETING": "hello from " + name}, Source: "test"}
}

type echoArgs struct {
	Text string `json:"text" jsonschema:"what to echo"`
}

// testServer is the MCP server the tests talk to, over stdio or HTTP.
func testServer(kind string) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "test-" + kind, Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echo text back.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *sdk.CallToolRequest, a echoArgs) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo: " + a.Text}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "env", Description: "Say GREETING and whether ANTHROPIC_API_KEY is set."},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			_, key := os.LookupEnv("ANTHROPIC_API_KEY")
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("%s; key=%v", os.Getenv("GREETING"), key)}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "Always fails."},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			return nil, nil, fmt.Errorf("the frobnicator is broken")
		})
	sdk.AddTool(s, &sdk.Tool{Name: "mixed", Description: "Text, an image and a resource."},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.TextContent{Text: "here:"},
				&sdk.ImageContent{MIMEType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}},
				&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///notes.txt", MIMEType: "text/plain", Text: "the notes"}},
			}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "big", Description: "A huge output."},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "HEAD" + strings.Repeat("x", 200_000) + "TAIL"}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "hang", Description: "Never answers until cancelled."},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
	sdk.AddTool(s, &sdk.Tool{Name: "crash", Description: "Kills the server."},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "crashing on purpose")
			os.Exit(3)
			return nil, nil, nil
		})
	if kind == "refloop" {
		s.AddTool(&sdk.Tool{Name: "loopy", Description: "Its schema loops.", InputSchema: json.RawMessage(
			`{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{"$ref":"#/$defs/y"},"y":{"$ref":"#/$defs/x"}}}`)},
			func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "unreachable"}}}, nil
			})
	}
	if kind == "clash" {
		// Served as b_x next to b.x: every tool clashes with b.x's once
		// the server names are sanitised; e.cho and e_cho clash within it.
		sdk.AddTool(s, &sdk.Tool{Name: "e.cho", Description: "Offered as e_cho."},
			func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "e.cho"}}}, nil, nil
			})
		sdk.AddTool(s, &sdk.Tool{Name: strings.Repeat("long", 32), Description: "Its full name is over 128 characters."},
			func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
				return nil, nil, nil
			})
		sdk.AddTool(s, &sdk.Tool{Name: "e_cho", Description: "Same offered name as e.cho."},
			func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "e_cho"}}}, nil, nil
			})
	}
	return s
}
